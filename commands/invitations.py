"""Invitations: invite by email with a role, list and revoke pending ones, accept (logged in, or with a new account)."""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from commands.accounts import MIN_PASSWORD_LENGTH, AccountError, hash_password
from db.session import rows_changed
from domain.vocabulary import ROLES
from models.accounts import User
from models.base import new_id
from models.invitations import Invitation

INVITATION_LIFETIME = timedelta(days=7)

EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


def invitation_digest(token: str) -> bytes:
    """The sha256 the database keeps instead of the link's token."""
    return hashlib.sha256(token.encode()).digest()


def invite(
    session: Session, org_id: uuid.UUID, email: str, role: str, invited_by: uuid.UUID | None
) -> tuple[Invitation, str]:
    """Invite `email` to the session's organization as `role`; return the row and the link's token (shown once).

    Never says whether the email has an account: the same invitation is made either way.
    """
    email = email.strip().lower()
    if not EMAIL.fullmatch(email) or len(email) > 320:
        raise AccountError(f"{email!r} is not an email address")
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    token = secrets.token_urlsafe(32)
    row = Invitation(
        organization_id=org_id,
        id=new_id(),
        email=email,
        role=role,
        token_sha256=invitation_digest(token),
        invited_by_user_id=invited_by,
        expires_at=func.now() + INVITATION_LIFETIME,
    )
    session.add(row)
    session.flush()
    return row, token


@dataclass(frozen=True)
class PendingInvitation:
    """A pending invitation as the owners' list shows it."""

    id: uuid.UUID
    email: str
    role: str
    created_at: datetime
    expires_at: datetime


def list_pending_invitations(session: Session) -> list[PendingInvitation]:
    """The session's organization's invitations not yet accepted, revoked or expired, newest first."""
    rows = session.execute(
        select(Invitation.id, Invitation.email, Invitation.role, Invitation.created_at, Invitation.expires_at)
        .where(Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None), Invitation.expires_at > func.now())
        .order_by(Invitation.id.desc())
    )
    return [PendingInvitation(*row) for row in rows]


def revoke_invitation(session: Session, invitation_id: uuid.UUID) -> bool:
    """Revoke a pending invitation of the session's organization; False when there is no such pending one."""
    result = session.execute(
        update(Invitation)
        .where(Invitation.id == invitation_id, Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None))
        .values(revoked_at=func.now())
    )
    return rows_changed(result) == 1


@dataclass(frozen=True)
class InvitationOffer:
    """What the link page shows: which organization, for which email, with which role, until when, and what the link
    can do for the email's account: `new` (none yet: set a password), `existing` (log in and accept) or `unproven`
    (made through another organization's link: log in and accept, or take it over with a new password)."""

    organization_id: uuid.UUID
    id: uuid.UUID
    organization_name: str
    email: str
    role: str
    expires_at: datetime
    account: str


def find_invitation(session: Session, token: str) -> InvitationOffer | None:
    """The pending invitation a link's token belongs to; None when unknown, used, revoked or expired."""
    row = session.execute(
        text("SELECT * FROM invitation_by_token(:digest)"), {"digest": invitation_digest(token)}
    ).first()
    return InvitationOffer(*row) if row else None


def accept_as_logged_in(session: Session, token: str, session_token: str) -> uuid.UUID | None:
    """Accept the invitation as the user of a live login session whose email it names; its organization, or None."""
    return session.scalar(
        text("SELECT accept_invitation(:digest, :session)"),
        {"digest": invitation_digest(token), "session": hashlib.sha256(session_token.encode()).digest()},
    )


class AccountExists(AccountError):
    """The invited email already has an account: its owner logs in and accepts instead."""


def accept_with_new_account(session: Session, token: str, password: str, name: str = "") -> str | None:
    """Create the invitee's account with the password they chose and join; the email, or None for a dead link.

    When the email has an unproven account (made through another organization's link), the link's holder takes it
    over instead: it gets this password, its sessions and API tokens end, it leaves the organizations it had joined
    and joins this one, proven from then on. A proven account, or one this organization's links made, is refused
    (AccountExists): its owner logs in and accepts.
    """
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"password must be at least {MIN_PASSWORD_LENGTH} characters")
    user = User(id=new_id(), password_hash=hash_password(password))
    email = session.scalar(
        text("SELECT accept_invitation_with_account(:digest, :id, :hash, :name)"),
        {"digest": invitation_digest(token), "id": user.id, "hash": user.password_hash, "name": name[:200]},
    )
    if email == "":
        raise AccountExists("This email already has an account: log in with it to accept the invitation.")
    return email
