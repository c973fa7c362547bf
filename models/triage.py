"""What reviewers record on trials (migration 0032): labels, the labels on each trial, a review state with a human
failure category, notes, and the append-only audit trail of every change."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from domain.outcome import FAILURE_CATEGORY_CHARS
from domain.triage import LABEL_DESCRIPTION_CHARS, LABEL_NAME_CHARS, NOTE_CHARS, REASON_CHARS
from domain.vocabulary import LABEL_COLORS, REVIEW_STATES
from models.base import Base, new_id, one_of


def _trial_fk(table: str) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(
        ["organization_id", "evaluation_trial_id"],
        ["evaluation_trials.organization_id", "evaluation_trials.id"],
        name=f"fk_{table}_evaluation_trials",
        ondelete="CASCADE",
    )


LABEL_KEY = (["organization_id", "label_id"], ["labels.organization_id", "labels.id"])  # a label of the trial's org
TRIAL_LABEL_KEY = ("organization_id", "label_id", "failed_rank", "evaluation_trial_id")  # as the explorer walks
HUMAN_SET = text("human_category IS NOT NULL")
HUMAN_CATEGORY_KEY = ("organization_id", "human_category", "evaluation_trial_id")


def _by(table: str, column: str) -> Any:
    return mapped_column(ForeignKey("users.id", name=f"fk_{table}_users_{column}"), nullable=True)


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), server_default=func.now())


class Added:
    """Who added the row (a user; null once their account is gone) and when."""

    @declared_attr
    def created_by_user_id(cls) -> Mapped[uuid.UUID | None]:
        return _by(cls.__tablename__, "created_by_user_id")  # type: ignore[attr-defined]

    created_at: Mapped[datetime] = _now()


class Label(Added, Base):
    """A label of the organization's set: a name in its normal form (domain.rules.normal_name), unique, and unique in
    what it looks like (`look_alike`, migration 0039), a colour of the palette, a description."""

    __tablename__ = "labels"
    __table_args__ = (
        ForeignKeyConstraint(["organization_id"], ["organizations.id"], name="fk_labels_organizations"),
        CheckConstraint(one_of("color", LABEL_COLORS), name="ck_labels_color"),
        CheckConstraint("btrim(name) <> '' AND name !~ '[[:cntrl:],]'", name="ck_labels_name"),
        PrimaryKeyConstraint("organization_id", "id", name="pk_labels"),
        Index("uq_labels_org_name", "organization_id", "name", unique=True),
        Index("uq_labels_org_look_alike", "organization_id", "look_alike", unique=True),
    )

    organization_id: Mapped[uuid.UUID]
    id: Mapped[uuid.UUID] = mapped_column(default=new_id)
    name: Mapped[str] = mapped_column(String(LABEL_NAME_CHARS))
    look_alike: Mapped[str] = mapped_column(Text)  # domain.rules.look_alike of the name as written
    color: Mapped[str] = mapped_column(String(16), server_default="gray")
    description: Mapped[str] = mapped_column(String(LABEL_DESCRIPTION_CHARS), server_default="")


class TrialLabel(Added, Base):
    """A label on a trial, keyed like the explorer walks it: a label's trials in failed-first rank, newest last."""

    __tablename__ = "trial_labels"
    __table_args__ = (
        _trial_fk("trial_labels"),
        ForeignKeyConstraint(*LABEL_KEY, name="fk_trial_labels_labels", ondelete="CASCADE"),
        PrimaryKeyConstraint(*TRIAL_LABEL_KEY, name="pk_trial_labels"),
        Index("ix_trial_labels_trial", "organization_id", "evaluation_trial_id", "label_id", unique=True),
    )

    organization_id: Mapped[uuid.UUID]
    label_id: Mapped[uuid.UUID]
    failed_rank: Mapped[int] = mapped_column(SmallInteger)  # trial_failed_rank(reward), kept by a trigger
    evaluation_trial_id: Mapped[uuid.UUID]


class TrialReview(Base):
    """A trial's review state (no row: unreviewed) and the failure category a reviewer set over the verifier's."""

    __tablename__ = "trial_reviews"
    __table_args__ = (
        _trial_fk("trial_reviews"),
        CheckConstraint(one_of("review_state", REVIEW_STATES), name="ck_trial_reviews_state"),
        CheckConstraint("review_state <> 'excluded' OR btrim(reason) <> ''", name="ck_trial_reviews_reason"),
        PrimaryKeyConstraint("organization_id", "evaluation_trial_id", name="pk_trial_reviews"),
        Index("ix_trial_reviews_state", "organization_id", "review_state", "failed_rank", "evaluation_trial_id"),
        Index("ix_trial_reviews_human_category", *HUMAN_CATEGORY_KEY, postgresql_where=HUMAN_SET),
    )

    organization_id: Mapped[uuid.UUID]
    evaluation_trial_id: Mapped[uuid.UUID]
    review_state: Mapped[str] = mapped_column(String(16), server_default="unreviewed")
    reason: Mapped[str] = mapped_column(String(REASON_CHARS), server_default="")
    human_category: Mapped[str | None] = mapped_column(String(FAILURE_CATEGORY_CHARS))
    # The verifier's category, kept from when the row was written (the trial's failure_category is then the
    # reviewer's whenever human_category is set; migration 0033).
    verifier_category: Mapped[str | None] = mapped_column(String(FAILURE_CATEGORY_CHARS))
    failed_rank: Mapped[int] = mapped_column(SmallInteger)
    updated_by_user_id: Mapped[uuid.UUID | None] = _by("trial_reviews", "updated_by_user_id")
    updated_at: Mapped[datetime] = _now()


class TrialNote(Base):
    """A plain-text note on a trial, or on one of its steps (`step`, 1-based)."""

    __tablename__ = "trial_notes"
    __table_args__ = (
        _trial_fk("trial_notes"),
        CheckConstraint(f"char_length(body) BETWEEN 1 AND {NOTE_CHARS}", name="ck_trial_notes_body"),
        CheckConstraint("step IS NULL OR step >= 1", name="ck_trial_notes_step"),
        PrimaryKeyConstraint("organization_id", "id", name="pk_trial_notes"),
        Index("ix_trial_notes_trial", "organization_id", "evaluation_trial_id", "id"),
    )

    organization_id: Mapped[uuid.UUID]
    id: Mapped[uuid.UUID] = mapped_column(default=new_id)
    evaluation_trial_id: Mapped[uuid.UUID]
    step: Mapped[int | None] = mapped_column(Integer)
    body: Mapped[str] = mapped_column(Text)
    author_user_id: Mapped[uuid.UUID | None] = _by("trial_notes", "author_user_id")
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class TrialAuditEntry(Base):
    """One change to a trial's triage: who, when, what (`action`), and the value before and after."""

    __tablename__ = "trial_audit"
    __table_args__ = (
        _trial_fk("trial_audit"),
        PrimaryKeyConstraint("organization_id", "id", name="pk_trial_audit"),
        Index("ix_trial_audit_trial", "organization_id", "evaluation_trial_id", "id"),
    )

    organization_id: Mapped[uuid.UUID]
    id: Mapped[uuid.UUID] = mapped_column(default=new_id)
    evaluation_trial_id: Mapped[uuid.UUID]
    actor_user_id: Mapped[uuid.UUID | None] = _by("trial_audit", "actor_user_id")
    at: Mapped[datetime] = _now()
    action: Mapped[str] = mapped_column(String(32))
    before: Mapped[Any | None] = mapped_column(JSONB)
    after: Mapped[Any | None] = mapped_column(JSONB)
