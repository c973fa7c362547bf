"""API tokens: create one (shown once), revoke one, revoke a removed member's; the reads are in queries/tokens.py."""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy import func, update
from sqlalchemy.orm import Session

from db.session import rows_changed
from domain.accounts import token_digest
from domain.rules import NAME
from models.base import new_id
from models.tokens import ApiToken

TOKEN_PREFIX = "afk_"


def create_token(session: Session, org_id: uuid.UUID, user_id: uuid.UUID, name: str) -> tuple[ApiToken, str]:
    """Create a token for the user in the organization; return the row and the token (shown this once only). Its
    name follows domain.rules' NAME (held stripped; Refused otherwise: the form and the CLI refuse it first)."""
    secret = secrets.token_urlsafe(32)
    token = f"{TOKEN_PREFIX}{secret}"
    row = ApiToken(
        organization_id=org_id,
        id=new_id(),
        user_id=user_id,
        name=NAME.apply(name),
        prefix=token[: len(TOKEN_PREFIX) + 6],
        token_sha256=token_digest(token),
    )
    session.add(row)
    session.flush()
    return row, token


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
