"""Invitations: an owner invites an email with a role; the invitee accepts through a single-use link.

The link carries a random token whose sha256 alone is stored. Nobody sets
another person's password: a new person sets their own when accepting, an
existing user logs in and accepts. Inviting answers the same whether or not the
email has an account, and the invitee is looked up only through definer
functions, because they do not belong to the organization yet.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from domain.vocabulary import ROLES
from models.base import Base, OrgRoot, Timestamped, one_of


class Invitation(OrgRoot, Timestamped, Base):
    """A pending, accepted, revoked or expired offer to join one organization with a role."""

    __tablename__ = "invitations"
    __table_args__ = (
        CheckConstraint("email = lower(email)", name="email_lower_case"),
        CheckConstraint(one_of("role", ROLES), name="role_known"),
        Index("ix_invitations_org_email", "organization_id", "email"),
        Index("ix_invitations_sha256", "token_sha256", unique=True),
    )

    email: Mapped[str] = mapped_column(String(320))
    role: Mapped[str] = mapped_column(String(20))
    # Never loaded by the runtime role (no SELECT on this column): links are looked up by invitation_by_token().
    token_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), deferred=True)
    invited_by_user_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id"))
    expires_at: Mapped[datetime]
    accepted_at: Mapped[datetime | None]
    accepted_by_user_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id"))
    revoked_at: Mapped[datetime | None]
