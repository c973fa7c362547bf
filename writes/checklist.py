"""The first-run checklist's progress: a mark a member's visit left (web/checklist.py says when); the read is in
queries/checklist.py."""

from __future__ import annotations

import uuid

from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from domain.vocabulary import ChecklistMark as Mark
from models.checklist import ChecklistMark


def leave_mark(session: Session, org_id: uuid.UUID, user_id: uuid.UUID, mark: Mark) -> None:
    """Keep `mark` for the member (a no-op when they left it before)."""
    session.execute(
        insert(ChecklistMark).values(organization_id=org_id, user_id=user_id, mark=mark).on_conflict_do_nothing()
    )
