"""Triage as pages and the API read it: the organization's labels, and one trial's labels, review, notes and audit
trail (authors by email; a former member's changes keep their text)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from queries.rows import all_by_name, by_name


@dataclass(frozen=True)
class LabelRow:
    """A label of the set, with how many trials carry it."""

    id: uuid.UUID
    name: str
    color: str
    description: str
    trials: int


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
    category: str | None  # the trial's failure category as pages and exports use it: the reviewer's, if set
    notes: list[NoteRow]
    audit: list[AuditRow]


AUTHOR = "(SELECT u.email FROM users u WHERE u.id = {column})"
TRIAGE = f"""
    SELECT t.failure_category,
      CASE WHEN r.evaluation_trial_id IS NULL THEN t.failure_category ELSE r.verifier_category END
        AS verifier_category, r.review_state, r.reason, r.human_category,
      (SELECT coalesce(json_agg(json_build_object('id', l.id, 'name', l.name, 'color', l.color,
                                                  'description', l.description, 'trials', 0)
                                ORDER BY lower(l.name)), '[]'::json)
       FROM trial_labels tl JOIN labels l ON l.organization_id = tl.organization_id AND l.id = tl.label_id
       WHERE tl.organization_id = t.organization_id AND tl.evaluation_trial_id = t.id) AS labels,
      (SELECT coalesce(json_agg(json_build_object('id', n.id, 'step', n.step, 'body', n.body,
                                                  'author_user_id', n.author_user_id,
                                                  'author', {AUTHOR.format(column="n.author_user_id")},
                                                  'created_at', n.created_at, 'updated_at', n.updated_at)
                                ORDER BY n.step NULLS FIRST, n.id), '[]'::json)
       FROM trial_notes n WHERE n.organization_id = t.organization_id AND n.evaluation_trial_id = t.id) AS notes,
      (SELECT coalesce(json_agg(json_build_object('at', a.at, 'actor', a.actor, 'action', a.action,
                                                  'before', a.before, 'after', a.after) ORDER BY a.id DESC),
                       '[]'::json)
       FROM (SELECT a.id, a.at, {AUTHOR.format(column="a.actor_user_id")} AS actor, a.action, a.before, a.after
             FROM trial_audit a WHERE a.organization_id = t.organization_id AND a.evaluation_trial_id = t.id
             ORDER BY a.id DESC LIMIT :limit) a) AS audit
    FROM evaluation_trials t
    LEFT JOIN trial_reviews r ON r.organization_id = t.organization_id AND r.evaluation_trial_id = t.id
    WHERE t.id = :id
"""


def _moment(value: str) -> datetime:
    return datetime.fromisoformat(value)


def has_trial(session: Session, trial_id: uuid.UUID) -> bool:
    """Whether the organization has this trial (one index probe)."""
    return session.execute(text("SELECT 1 FROM evaluation_trials WHERE id = :id"), {"id": trial_id}).first() is not None


def trial_triage(session: Session, trial_id: uuid.UUID, *, audit_limit: int = 200) -> Triage | None:
    """The trial's labels, review, notes and newest audit entries (one statement); None when the trial is not the
    organization's."""
    row = session.execute(text(TRIAGE), {"id": trial_id, "limit": audit_limit}).first()
    if row is None:
        return None
    return Triage(
        labels=[LabelRow(**{**label, "id": uuid.UUID(label["id"])}) for label in row.labels],
        review_state=row.review_state or "unreviewed",
        reason=row.reason or "",
        human_category=row.human_category,
        verifier_category=row.verifier_category,
        category=row.failure_category,
        notes=[
            NoteRow(
                id=uuid.UUID(note["id"]),
                step=note["step"],
                body=note["body"],
                author_user_id=uuid.UUID(note["author_user_id"]) if note["author_user_id"] else None,
                author=note["author"],
                created_at=_moment(note["created_at"]),
                updated_at=_moment(note["updated_at"]),
            )
            for note in row.notes
        ],
        audit=[AuditRow(**{**entry, "at": _moment(entry["at"])}) for entry in row.audit],
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
