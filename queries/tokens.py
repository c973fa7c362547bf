"""API tokens as the settings page and bearer authentication read them: the user's own, the organization's, and
who a live token acts as."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from domain.accounts import token_digest
from models.accounts import User
from models.tokens import ApiToken
from queries.rows import all_by_name, by_name


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
    rows = session.execute(
        select(
            ApiToken.id,
            ApiToken.name,
            ApiToken.prefix,
            User.email.label("owner_email"),
            ApiToken.created_at,
            ApiToken.last_used_at,
            ApiToken.revoked_at,
        )
        .outerjoin(User, User.id == ApiToken.user_id)
        .order_by(ApiToken.id.desc())
    )
    return all_by_name(OrgTokenRow, rows)


@dataclass(frozen=True)
class TokenIdentity:
    """Who a valid token acts as."""

    user_id: uuid.UUID
    organization_id: uuid.UUID
    token_id: uuid.UUID


def authenticate_token(session: Session, token: str) -> TokenIdentity | None:
    """The user and organization of a live token (marking it used), or None for unknown, revoked or expired."""
    row = session.execute(text("SELECT * FROM auth_token(:digest)"), {"digest": token_digest(token)}).first()
    return by_name(TokenIdentity, row) if row else None
