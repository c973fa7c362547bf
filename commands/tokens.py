"""API tokens: create, list (own or the whole organization's), revoke, and bearer authentication."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from db.session import rows_changed
from models.base import new_id
from models.tokens import ApiToken

TOKEN_PREFIX = "afk_"


def token_digest(token: str) -> bytes:
    """The sha256 the database keeps instead of the token."""
    return hashlib.sha256(token.encode()).digest()


def create_token(session: Session, org_id: uuid.UUID, user_id: uuid.UUID, name: str) -> tuple[ApiToken, str]:
    """Create a token for the user in the organization; return the row and the token (shown this once only)."""
    secret = secrets.token_urlsafe(32)
    token = f"{TOKEN_PREFIX}{secret}"
    row = ApiToken(
        organization_id=org_id,
        id=new_id(),
        user_id=user_id,
        name=name.strip()[:200] or "token",
        prefix=token[: len(TOKEN_PREFIX) + 6],
        token_sha256=token_digest(token),
    )
    session.add(row)
    session.flush()
    return row, token


def list_tokens(session: Session, user_id: uuid.UUID) -> list[ApiToken]:
    """The user's tokens in the session's organization, newest first."""
    return list(session.scalars(select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.id.desc())))


@dataclass(frozen=True)
class OrgTokenRow:
    """One token of the organization as its owners see it: whose it is, never the secret."""

    id: uuid.UUID
    name: str
    prefix: str
    owner_email: str | None  # None once the user is no longer a member (their account is not visible here)
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def list_org_tokens(session: Session) -> list[OrgTokenRow]:
    """Every token of the session's organization with its owner's email, newest first (for owners)."""
    from models.accounts import User  # accounts imports this module for removing members

    rows = session.execute(
        select(
            ApiToken.id,
            ApiToken.name,
            ApiToken.prefix,
            User.email,
            ApiToken.created_at,
            ApiToken.last_used_at,
            ApiToken.revoked_at,
        )
        .outerjoin(User, User.id == ApiToken.user_id)
        .order_by(ApiToken.id.desc())
    )
    return [OrgTokenRow(*row) for row in rows]


def revoke_token(session: Session, user_id: uuid.UUID | None, token_id: uuid.UUID) -> bool:
    """Revoke a live token of the session's organization: the user's own, or anyone's when `user_id` is None."""
    statement = update(ApiToken).where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None))
    if user_id is not None:
        statement = statement.where(ApiToken.user_id == user_id)
    return rows_changed(session.execute(statement.values(revoked_at=func.now()))) == 1


def revoke_member_tokens(session: Session, user_id: uuid.UUID) -> int:
    """Revoke every live token of `user_id` in the session's organization (they were removed); how many."""
    result = session.execute(
        update(ApiToken).where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    return rows_changed(result)


@dataclass(frozen=True)
class TokenIdentity:
    """Who a valid token acts as."""

    user_id: uuid.UUID
    organization_id: uuid.UUID
    token_id: uuid.UUID


def authenticate_token(session: Session, token: str) -> TokenIdentity | None:
    """The user and organization of a live token (marking it used), or None for unknown, revoked or expired."""
    row = session.execute(text("SELECT * FROM auth_token(:digest)"), {"digest": token_digest(token)}).first()
    return TokenIdentity(*row) if row else None
