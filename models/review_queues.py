"""Review queues (migration 0042): a reviewer's walk through the trials an explorer filter matched, one trial at a
time, with the decisions `u` can take back; and the claims that keep two reviewers off the same trial."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    PrimaryKeyConstraint,
    Text,
    Uuid,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from domain.review_queue import QUEUE_MOST
from models.base import Base, new_id


class ReviewQueue(Base):
    """One reviewer's queue: the explorer parameters it was started from (`filters`: the filters and the order;
    `summary`: the explorer's words for them, kept for the queue's heading), the ids of the trials they matched then
    (`trial_ids`, at most QUEUE_MOST in the explorer's order; `more`: the filter matched more), and its decisions
    newest last (`decisions`: each trial's triage before and after, what `u` restores)."""

    __tablename__ = "review_queues"
    __table_args__ = (
        ForeignKeyConstraint(["organization_id"], ["organizations.id"], name="fk_review_queues_organizations"),
        CheckConstraint(f"cardinality(trial_ids) BETWEEN 1 AND {QUEUE_MOST}", name="ck_review_queues_trials"),
        PrimaryKeyConstraint("organization_id", "id", name="pk_review_queues"),
    )

    organization_id: Mapped[uuid.UUID]
    id: Mapped[uuid.UUID] = mapped_column(default=new_id)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", name="fk_review_queues_users", ondelete="CASCADE")
    )
    filters: Mapped[dict[str, Any]] = mapped_column(JSONB)
    summary: Mapped[str] = mapped_column(Text)
    trial_ids: Mapped[list[uuid.UUID]] = mapped_column(ARRAY(Uuid()))
    more: Mapped[bool] = mapped_column(server_default="false")
    decisions: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ReviewClaim(Base):
    """A trial a reviewer opened in a queue: every other reviewer's queue skips it until `claimed_until`."""

    __tablename__ = "review_claims"
    __table_args__ = (
        ForeignKeyConstraint(
            ["organization_id", "evaluation_trial_id"],
            ["evaluation_trials.organization_id", "evaluation_trials.id"],
            name="fk_review_claims_evaluation_trials",
            ondelete="CASCADE",
        ),
        PrimaryKeyConstraint("organization_id", "evaluation_trial_id", name="pk_review_claims"),
    )

    organization_id: Mapped[uuid.UUID]
    evaluation_trial_id: Mapped[uuid.UUID]
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", name="fk_review_claims_users", ondelete="CASCADE")
    )
    claimed_until: Mapped[datetime] = mapped_column(DateTime(timezone=True))
