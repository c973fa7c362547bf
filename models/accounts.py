"""Organizations, users, memberships and login sessions: who may see which organization's rows."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    LargeBinary,
    String,
    UniqueConstraint,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from domain.vocabulary import ROLES
from models.base import Base, Timestamped, new_id, one_of


class Organization(Timestamped, Base):
    """A tenant: every customer row belongs to exactly one organization."""

    __tablename__ = "organizations"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    slug: Mapped[str] = mapped_column(String(200), unique=True)
    # When a worker last claimed one of its runs: organizations take turns in that order (migration 0025).
    last_claimed_at: Mapped[datetime | None]


class User(Timestamped, Base):
    """A person who logs in; email is stored lower-cased and unique.

    `email_proven` is false for an account made through an invitation link until a link of another organization
    reaches it (migration 0026): until then add-member refuses it, and such a link's holder may take it over.
    """

    __tablename__ = "users"
    __table_args__ = (CheckConstraint("email = lower(email)", name="email_lower_case"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(400))
    name: Mapped[str] = mapped_column(String(200), default="")
    email_proven: Mapped[bool] = mapped_column(server_default=true())


class Membership(Timestamped, Base):
    """A user's role (owner, member or viewer) in one organization."""

    __tablename__ = "memberships"
    __table_args__ = (
        UniqueConstraint("organization_id", "user_id"),
        CheckConstraint(one_of("role", ROLES), name="role_known"),
    )

    organization_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("organizations.id"), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), index=True)
    role: Mapped[str] = mapped_column(String(20))
    last_used_at: Mapped[datetime | None]  # when the user last chose this organization: a login lands there


class AuthSession(Timestamped, Base):
    """A server-side login session: the cookie carries a random token whose sha256 is stored here.

    Login creates a fresh row (the session id is renewed), logout deletes it, so
    a copied cookie stops working the moment its owner logs out.
    """

    __tablename__ = "auth_sessions"

    token_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), index=True)
    expires_at: Mapped[datetime]


class LoginThrottle(Base):
    """Failed logins of one key ("account:<email>" or "address:<ip>") within the current window."""

    __tablename__ = "login_throttle"

    key: Mapped[str] = mapped_column(String(400), primary_key=True)
    window_started_at: Mapped[datetime]
    failures: Mapped[int]


class LoginAttemptInFlight(Base):
    """A login attempt reserved by auth_login_begin() whose password is being checked (counts against the limits)."""

    __tablename__ = "login_attempts"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    account_key: Mapped[str] = mapped_column(String(400), index=True)
    address_key: Mapped[str] = mapped_column(String(400), index=True)
    account_failures_seen: Mapped[int]
    reserved_at: Mapped[datetime]
