"""The first-run checklist's progress, per member: the marks their visits left (domain.vocabulary.CHECKLIST_MARKS)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, ForeignKeyConstraint, String, func
from sqlalchemy.orm import Mapped, mapped_column

from domain.vocabulary import CHECKLIST_MARKS
from models.base import Base, one_of


class ChecklistMark(Base):
    """One mark a member left on the first-run checklist of an organization (shown, a failed trial opened, two runs
    compared, hidden), kept so the checklist remembers it at their next login; gone with their membership."""

    __tablename__ = "checklist_marks"
    __table_args__ = (
        CheckConstraint(one_of("mark", CHECKLIST_MARKS), name="mark_known"),
        ForeignKeyConstraint(
            ["organization_id", "user_id"],
            ["memberships.organization_id", "memberships.user_id"],
            ondelete="CASCADE",
        ),
    )

    organization_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("organizations.id"), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    mark: Mapped[str] = mapped_column(String(40), primary_key=True)
    reached_at: Mapped[datetime] = mapped_column(server_default=func.now())
