"""Personal API tokens: one user in one organization, shown once, stored as a sha256 with a visible prefix."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Index, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base, OrgRoot, Timestamped


class ApiToken(OrgRoot, Timestamped, Base):
    """A bearer token acting as its user, with that user's role, in one organization."""

    __tablename__ = "api_tokens"
    __table_args__ = (
        Index("ix_api_tokens_org_user", "organization_id", "user_id"),
        # Looked up by hash before any organization is known (through auth_token()), so not led by organization_id.
        Index("ix_api_tokens_sha256", "token_sha256", unique=True),
    )

    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"))
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16))
    # Never loaded by the runtime role (it has no SELECT on this column): lookups go through auth_token().
    token_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), deferred=True)
    last_used_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
