"""Review queues as their pages read them: a reviewer's queue, where `n`, `p` and a decision move to (past the
trials another reviewer holds), who holds a trial, a trial's triage as a decision changes it, the labels with their
number keys and the organization's failure categories.

A position is 1-based in the queue's trial ids (the explorer's order when the queue started); a trial deleted since
is passed over. A claim is live while its `claimed_until` is ahead of the transaction's time.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.review_queue import TriageState
from queries.conditions import Conditions
from queries.rows import by_name


@dataclass(frozen=True)
class QueueRow:
    """A reviewer's queue: the explorer parameters it was started from and the explorer's words for them, how many
    trials it holds (and whether the filter matched more), how many decisions `u` can take back and the position of
    the newest one's trial, and the position of the trial asked about (None: not asked, or not in the queue)."""

    id: uuid.UUID
    filters: dict[str, str]
    summary: str
    size: int
    more: bool
    undoable: int
    last_position: int | None
    position: int | None


QUEUE = """
    SELECT q.id, q.filters, q.summary, cardinality(q.trial_ids) AS size, q.more,
           jsonb_array_length(q.decisions) AS undoable,
           array_position(q.trial_ids, CAST(q.decisions -> -1 ->> 'trial' AS uuid)) AS last_position,
           array_position(q.trial_ids, CAST(:trial AS uuid)) AS position
    FROM review_queues q WHERE q.id = :queue AND q.user_id = :user
"""


def find_queue(
    session: Session, queue_id: uuid.UUID, user_id: uuid.UUID, trial_id: uuid.UUID | None = None
) -> QueueRow | None:
    """The user's queue of that id in the organization, with the position of `trial_id` in it; None for another
    user's, another organization's or none."""
    row = session.execute(text(QUEUE), {"queue": queue_id, "user": user_id, "trial": trial_id}).first()
    return by_name(QueueRow, row) if row else None


# A trial another reviewer holds: their claim on it is live.
HELD = (
    "EXISTS (SELECT 1 FROM review_claims c WHERE c.organization_id = t.organization_id "
    "AND c.evaluation_trial_id = t.id AND c.user_id <> :queue_user AND c.claimed_until > now())"
)
POSITIONS = """
    FROM review_queues q
    CROSS JOIN LATERAL unnest(q.trial_ids) WITH ORDINALITY AS p(trial_id, position)
    JOIN evaluation_trials t ON t.organization_id = q.organization_id AND t.id = p.trial_id
    WHERE q.id = :queue_id AND NOT {held} AND {where}
"""
WALK = "SELECT p.position {positions} AND p.position {compare} :queue_from ORDER BY p.position {direction} LIMIT 1"


def open_position(
    session: Session,
    queue_id: uuid.UUID,
    user_id: uuid.UUID,
    start: int,
    *,
    backwards: bool = False,
    still: Conditions | None = None,
) -> int | None:
    """The first position after `start` (before it, `backwards`) whose trial no other reviewer holds and, with
    `still` (the queue's filters as conditions on `evaluation_trials t`), that still matches them; None when
    there is none. `start` 0 looks from the first position on."""
    where = still or Conditions()
    positions = POSITIONS.format(held=HELD, where=where.sql)
    sql = WALK.format(positions=positions, compare="<" if backwards else ">", direction="DESC" if backwards else "ASC")
    params: dict[str, Any] = {**where.params, "queue_id": queue_id, "queue_user": user_id, "queue_from": start}
    return session.execute(text(sql), params).scalar()


NEIGHBOURS = f"""
    SELECT (SELECT max(p.position) {POSITIONS.format(held=HELD, where="p.position < :queue_from")}) AS previous,
           (SELECT min(p.position) {POSITIONS.format(held=HELD, where="p.position > :queue_from")}) AS next
"""


def neighbours(session: Session, queue_id: uuid.UUID, user_id: uuid.UUID, position: int) -> tuple[int | None, ...]:
    """The positions `p` and `n` go to from `position`: the nearest before and after whose trials no other reviewer
    holds, whatever was decided on them (None at either end); one statement."""
    row = session.execute(text(NEIGHBOURS), {"queue_id": queue_id, "queue_user": user_id, "queue_from": position}).one()
    return row.previous, row.next


@dataclass(frozen=True)
class Claim:
    """Who holds a trial (their email, and their user id) and until when."""

    user_id: uuid.UUID
    holder: str
    until: datetime


def live_claim(session: Session, trial_id: uuid.UUID) -> Claim | None:
    """The live claim on the trial, whoever holds it; None when nobody does."""
    row = session.execute(
        text(
            "SELECT c.user_id, coalesce((SELECT u.email FROM users u WHERE u.id = c.user_id), 'a former member') "
            "AS holder, c.claimed_until AS until FROM review_claims c "
            "WHERE c.evaluation_trial_id = :trial AND c.claimed_until > now()"
        ),
        {"trial": trial_id},
    ).first()
    return by_name(Claim, row) if row else None


# A trial's triage as a decision changes it (writes.review_queue locks the trial with it: FOR NO KEY UPDATE OF t).
TRIAGE_STATE = """
    SELECT coalesce(r.review_state, 'unreviewed') AS state, coalesce(r.reason, '') AS reason,
           r.human_category AS category,
           ARRAY(SELECT tl.label_id::text FROM trial_labels tl
                 WHERE tl.organization_id = t.organization_id AND tl.evaluation_trial_id = t.id
                 ORDER BY tl.label_id) AS labels
    FROM evaluation_trials t
    LEFT JOIN trial_reviews r ON r.organization_id = t.organization_id AND r.evaluation_trial_id = t.id
    WHERE t.id = :trial
"""


def triage_state(session: Session, trial_id: uuid.UUID) -> TriageState | None:
    """The trial's triage as a decision changes it and an undo restores it; None when the trial is not the
    organization's."""
    row = session.execute(text(TRIAGE_STATE), {"trial": trial_id}).first()
    return TriageState(row.state, row.reason, row.category, tuple(row.labels)) if row else None


@dataclass(frozen=True)
class KeyedLabel:
    """A label of the set as the queue's panel offers it: its number key (1 to 9; None past the ninth)."""

    key: int | None
    id: uuid.UUID
    name: str
    color: str
    description: str


@dataclass(frozen=True)
class PanelChoices:
    """What the decision panel offers: the organization's labels in the order they were created (a new label never
    renumbers the others), the first ones numbered from 1, and the failure categories its trials have (the
    verifier's and reviewers'), by name."""

    labels: list[KeyedLabel]
    categories: list[str]


CHOICES = """
    (SELECT 'label' AS kind, CASE WHEN row_number() OVER w <= :keys THEN row_number() OVER w END AS key,
            id, name, color, description
     FROM labels WINDOW w AS (ORDER BY created_at, id) ORDER BY created_at, id)
    UNION ALL
    (SELECT DISTINCT 'category', NULL::bigint, NULL::uuid, failure_category, NULL, NULL
     FROM failure_category_counts WHERE trials > 0 ORDER BY 4)
"""


def panel_choices(session: Session, keys: int) -> PanelChoices:
    """The labels (the first `keys` numbered) and the failure categories the panel offers; one statement."""
    rows = session.execute(text(CHOICES), {"keys": keys}).all()
    return PanelChoices(
        [KeyedLabel(row.key, row.id, row.name, row.color, row.description) for row in rows if row.kind == "label"],
        [row.name for row in rows if row.kind == "category"],
    )


def failure_categories(session: Session) -> list[str]:
    """The failure categories the organization's trials have (the verifier's and reviewers'), by name."""
    return list(
        session.execute(
            text("SELECT DISTINCT failure_category FROM failure_category_counts WHERE trials > 0 ORDER BY 1")
        ).scalars()
    )


def decided_count(session: Session, queue_id: uuid.UUID) -> int:
    """How many of the queue's trials are reviewed or excluded now (by anyone)."""
    return session.execute(
        text(
            "SELECT count(*) FROM review_queues q JOIN trial_reviews r ON r.organization_id = q.organization_id "
            "AND r.evaluation_trial_id = ANY(q.trial_ids) WHERE q.id = :queue AND r.review_state <> 'unreviewed'"
        ),
        {"queue": queue_id},
    ).scalar_one()
