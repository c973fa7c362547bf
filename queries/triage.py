"""Triage as pages and the API read it: the organization's labels, and one trial's labels, review, notes and audit
trail (authors by email; a former member's changes keep their text)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.triage import LABEL_PALETTE, Swatch, effective_category
from queries.rows import all_by_name, by_name


@dataclass(frozen=True)
class LabelRow:
    """A label of the set, with how many trials carry it."""

    id: uuid.UUID
    name: str
    color: str
    description: str
    trials: int

    @property
    def swatch(self) -> Swatch:
        return LABEL_PALETTE.get(self.color, LABEL_PALETTE["gray"])


def list_labels(session: Session) -> list[LabelRow]:
    """The organization's labels by name (whatever the case), each with its count of trials."""
    rows = session.execute(
        text(
            """
            SELECT l.id, l.name, l.color, l.description,
                   (SELECT count(*) FROM trial_labels tl
                     WHERE tl.organization_id = l.organization_id AND tl.label_id = l.id) AS trials
            FROM labels l ORDER BY lower(l.name), l.id
            """
        )
    )
    return all_by_name(LabelRow, rows)


def label_ids_named(session: Session, names: tuple[str, ...]) -> list[uuid.UUID | None]:
    """The id of each name's label (compared whatever the case), None for a name the organization has no label of."""
    rows = session.execute(
        text("SELECT lower(name) AS key, id FROM labels WHERE lower(name) = ANY(:keys)"),
        {"keys": [name.lower() for name in names]},
    )
    found = {row.key: row.id for row in rows}
    return [found.get(name.lower()) for name in names]


@dataclass(frozen=True)
class NoteRow:
    """A note on a trial (or on its step `step`), with its author's email (None once they left the organization)."""

    id: uuid.UUID
    step: int | None
    body: str
    author_user_id: uuid.UUID | None
    author: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def edited(self) -> bool:
        return self.updated_at > self.created_at


@dataclass(frozen=True)
class AuditRow:
    """One change of the trial's triage: who (email), when, what, and the values before and after."""

    at: datetime
    actor: str | None
    action: str
    before: Any
    after: Any


@dataclass(frozen=True)
class Triage:
    """What reviewers recorded on one trial."""

    labels: list[LabelRow]
    review_state: str
    reason: str
    human_category: str | None
    verifier_category: str | None
    notes: list[NoteRow]
    audit: list[AuditRow]

    @property
    def category(self) -> str | None:
        """The failure category pages and exports use (the reviewer's over the verifier's)."""
        return effective_category(self.verifier_category, self.human_category)

    def notes_on(self, step: int | None) -> list[NoteRow]:
        """The notes on step `step` (None: on the trial as a whole)."""
        return [note for note in self.notes if note.step == step]


AUTHOR = "(SELECT u.email FROM users u WHERE u.id = {column})"


def trial_triage(session: Session, trial_id: uuid.UUID, *, audit_limit: int = 200) -> Triage | None:
    """The trial's labels, review, notes and newest audit entries; None when the trial is not the organization's."""
    head = session.execute(
        text(
            """
            SELECT t.failure_category, r.review_state, r.reason, r.human_category
            FROM evaluation_trials t
            LEFT JOIN trial_reviews r ON r.organization_id = t.organization_id AND r.evaluation_trial_id = t.id
            WHERE t.id = :id
            """
        ),
        {"id": trial_id},
    ).first()
    if head is None:
        return None
    labels = session.execute(
        text(
            """
            SELECT l.id, l.name, l.color, l.description, 0 AS trials
            FROM trial_labels tl JOIN labels l ON l.organization_id = tl.organization_id AND l.id = tl.label_id
            WHERE tl.evaluation_trial_id = :id ORDER BY lower(l.name)
            """
        ),
        {"id": trial_id},
    )
    notes = session.execute(
        text(
            f"""
            SELECT n.id, n.step, n.body, n.author_user_id, {AUTHOR.format(column="n.author_user_id")} AS author,
                   n.created_at, n.updated_at
            FROM trial_notes n WHERE n.evaluation_trial_id = :id ORDER BY n.step NULLS FIRST, n.id
            """
        ),
        {"id": trial_id},
    )
    audit = session.execute(
        text(
            f"""
            SELECT a.at, {AUTHOR.format(column="a.actor_user_id")} AS actor, a.action, a.before, a.after
            FROM trial_audit a WHERE a.evaluation_trial_id = :id ORDER BY a.id DESC LIMIT :limit
            """
        ),
        {"id": trial_id, "limit": audit_limit},
    )
    return Triage(
        labels=all_by_name(LabelRow, labels),
        review_state=head.review_state or "unreviewed",
        reason=head.reason or "",
        human_category=head.human_category,
        verifier_category=head.failure_category,
        notes=all_by_name(NoteRow, notes),
        audit=all_by_name(AuditRow, audit),
    )


def label_row(session: Session, label_id: uuid.UUID) -> LabelRow | None:
    """One label with its count of trials."""
    row = session.execute(
        text(
            """
            SELECT l.id, l.name, l.color, l.description,
                   (SELECT count(*) FROM trial_labels tl
                     WHERE tl.organization_id = l.organization_id AND tl.label_id = l.id) AS trials
            FROM labels l WHERE l.id = :id
            """
        ),
        {"id": label_id},
    ).first()
    return by_name(LabelRow, row) if row else None
