"""Invitations: invite by email with a role, revoke a pending one, accept (logged in, or with a new account); the
reads (the owners' pending list, the offer behind a link) are in queries/invitations.py."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

from sqlalchemy import func, text, update
from sqlalchemy.orm import Session

from db.session import rows_changed
from domain.accounts import EMAIL, MIN_PASSWORD_LENGTH, token_digest
from domain.vocabulary import ROLES
from models.accounts import User
from models.base import new_id
from models.invitations import Invitation
from writes.accounts import AccountError, hash_password

INVITATION_LIFETIME = timedelta(days=7)


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
        token_sha256=token_digest(token),
        invited_by_user_id=invited_by,
        expires_at=func.now() + INVITATION_LIFETIME,
    )
    session.add(row)
    session.flush()
    return row, token


def revoke_invitation(session: Session, invitation_id: uuid.UUID) -> bool:
    """Revoke a pending invitation of the session's organization; False when there is no such pending one."""
    result = session.execute(
        update(Invitation)
        .where(Invitation.id == invitation_id, Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None))
        .values(revoked_at=func.now())
    )
    return rows_changed(result) == 1


def accept_as_logged_in(session: Session, token: str, session_token: str) -> uuid.UUID | None:
    """Accept the invitation as the user of a live login session whose email it names; its organization, or None."""
    return session.scalar(
        text("SELECT accept_invitation(:digest, :session)"),
        {"digest": token_digest(token), "session": token_digest(session_token)},
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
        {"digest": token_digest(token), "id": user.id, "hash": user.password_hash, "name": name[:200]},
    )
    if email == "":
        raise AccountExists("This email already has an account: log in with it to accept the invitation.")
    return email
