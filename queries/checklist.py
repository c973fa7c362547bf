"""The first-run checklist's progress as web/checklist.py reads it: the marks a member left (writes/checklist.py)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from models.checklist import ChecklistMark


def marks_of(session: Session, user_id: uuid.UUID) -> set[str]:
    """The marks the member left in the session's organization."""
    return set(session.scalars(select(ChecklistMark.mark).where(ChecklistMark.user_id == user_id)))
