"""Invitations as the settings page and an invitation link read them: the pending ones, and the offer behind a link."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from domain.accounts import token_digest
from models.invitations import Invitation
from queries.rows import by_name


def list_pending_invitations(session: Session) -> list[Invitation]:
    """The session's organization's invitations not yet accepted, revoked or expired, newest first (the owners'
    list shows each one's email, role, when it was sent and when it expires)."""
    return list(
        session.scalars(
            select(Invitation)
            .where(
                Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None), Invitation.expires_at > func.now()
            )
            .order_by(Invitation.id.desc())
        )
    )


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
    row = session.execute(text("SELECT * FROM invitation_by_token(:digest)"), {"digest": token_digest(token)}).first()
    return by_name(InvitationOffer, row) if row else None
