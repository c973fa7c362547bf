"""Accounts as login and the settings page read them: an organization or account by name, the user behind a login
session or an API token (with every membership), the organization's members."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from domain.accounts import token_digest
from models.accounts import Membership, Organization, User
from queries.rows import all_by_name


@dataclass(frozen=True)
class MembershipView:
    """One organization a logged-in user belongs to, with their role there."""

    organization_id: uuid.UUID
    organization_name: str
    organization_slug: str
    role: str
    last_used_at: datetime | None = None


@dataclass(frozen=True)
class SessionUser:
    """The user behind a live login session, with every membership (re-read on each request)."""

    id: uuid.UUID
    email: str
    name: str
    session_token: str
    memberships: tuple[MembershipView, ...]

    def membership_in(self, org_id: uuid.UUID | None) -> MembershipView | None:
        """Return the membership in `org_id`, or None when the user is not a member there."""
        return next((m for m in self.memberships if m.organization_id == org_id), None)

    def landing_membership(self) -> MembershipView | None:
        """The organization used last (a login lands there), else the first by name; None without memberships."""
        used = [m for m in self.memberships if m.last_used_at is not None]
        if used:
            return max(used, key=lambda m: m.last_used_at)  # type: ignore[arg-type, return-value]
        return self.memberships[0] if self.memberships else None


def find_organization(session: Session, name: str) -> Organization | None:
    """Return the organization named `name` (case-insensitive), as visible to this session."""
    return session.scalar(select(Organization).where(func.lower(Organization.name) == name.strip().lower()))


def find_account(session: Session, email: str) -> User | None:
    """The account with `email`, whichever organizations it belongs to (id and email only); None when unknown."""
    email = email.strip().lower()
    user_id = session.scalar(text("SELECT account_id_by_email(:email)"), {"email": email})
    return User(id=user_id, email=email) if user_id else None


_SESSION_USER = text(
    """
    SELECT u.id, u.email, u.name,
           COALESCE((SELECT json_agg(m) FROM auth_memberships(u.id) m), '[]'::json) AS memberships
    FROM auth_session_user(:digest) u
    """
)

_TOKEN_USER = text(
    """
    SELECT u.id, u.email, u.name, u.organization_id,
           COALESCE((SELECT json_agg(m) FROM auth_memberships(u.id) m), '[]'::json) AS memberships
    FROM auth_token_user(:digest) u
    """
)


def _session_user(row, token: str) -> SessionUser:
    memberships = tuple(
        MembershipView(
            uuid.UUID(m["organization_id"]),
            m["organization_name"],
            m["organization_slug"],
            m["role"],
            datetime.fromisoformat(m["last_used_at"]) if m.get("last_used_at") else None,
        )
        for m in row.memberships
    )
    return SessionUser(row.id, row.email, row.name, token, memberships)


def load_session_user(session: Session, token: str) -> SessionUser | None:
    """Return the user of a live session token with all memberships, in one query; None when expired or unknown."""
    row = session.execute(_SESSION_USER, {"digest": token_digest(token)}).one_or_none()
    return _session_user(row, token) if row else None


def load_token_user(session: Session, token: str) -> tuple[SessionUser, uuid.UUID] | None:
    """The user behind a live API token and the organization it is bound to; None when unknown, revoked or expired.

    Marks the token as used (last_used_at), so the caller commits.
    """
    row = session.execute(_TOKEN_USER, {"digest": token_digest(token)}).one_or_none()
    return (_session_user(row, ""), row.organization_id) if row else None


@dataclass(frozen=True)
class MemberRow:
    """One member of the current organization."""

    membership_id: uuid.UUID
    user_id: uuid.UUID
    email: str
    name: str
    role: str
    joined_at: datetime


def list_members(session: Session) -> list[MemberRow]:
    """Every member of the session's organization, by email."""
    rows = session.execute(
        select(
            Membership.id.label("membership_id"),
            User.id.label("user_id"),
            User.email,
            User.name,
            Membership.role,
            Membership.created_at.label("joined_at"),
        )
        .join(User, User.id == Membership.user_id)
        .order_by(User.email)
    )
    return all_by_name(MemberRow, rows)


@dataclass(frozen=True)
class Holder:
    """Another organization of the user's that holds a trial or run: its id and name."""

    organization_id: uuid.UUID
    organization_name: str


def organization_holding(session: Session, kind: str, object_id: uuid.UUID) -> Holder | None:
    """Which of the user's organizations holds the trial or run (`kind`), or None (migration 0035's function)."""
    row = session.execute(
        text("SELECT organization_id, organization_name FROM organization_holding(:kind, :id)"),
        {"kind": kind, "id": object_id},
    ).first()
    return Holder(row.organization_id, row.organization_name) if row else None
