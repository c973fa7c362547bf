"""Review queues as their pages read them: a reviewer's queue, the trial at a position, where `n`, `p` and a
decision move to (past the trials another reviewer holds), who holds a trial, the labels with their number keys and
the organization's failure categories.

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
from queries.rows import all_by_name, by_name


@dataclass(frozen=True)
class QueueRow:
    """A reviewer's queue: the explorer parameters it was started from, how many trials it holds (and whether the
    filter matched more), how many decisions `u` can take back, and the position of the newest one's trial."""

    id: uuid.UUID
    filters: dict[str, str]
    size: int
    more: bool
    undoable: int
    last_position: int | None
    created_at: datetime


QUEUE = """
    SELECT q.id, q.filters, cardinality(q.trial_ids) AS size, q.more, jsonb_array_length(q.decisions) AS undoable,
           array_position(q.trial_ids, (q.decisions -> -1 ->> 'trial')::uuid) AS last_position, q.created_at
    FROM review_queues q WHERE q.id = :queue AND q.user_id = :user
"""


def find_queue(session: Session, queue_id: uuid.UUID, user_id: uuid.UUID) -> QueueRow | None:
    """The user's queue of that id in the organization; None for another user's, another organization's or none."""
    row = session.execute(text(QUEUE), {"queue": queue_id, "user": user_id}).first()
    return by_name(QueueRow, row) if row else None


def trial_at(session: Session, queue_id: uuid.UUID, position: int) -> uuid.UUID | None:
    """The id of the trial at `position` (None past either end or when the trial no longer exists)."""
    return session.execute(
        text(
            "SELECT t.id FROM review_queues q JOIN evaluation_trials t "
            "ON t.organization_id = q.organization_id AND t.id = q.trial_ids[:position] WHERE q.id = :queue"
        ),
        {"queue": queue_id, "position": position},
    ).scalar()


def position_of(session: Session, queue_id: uuid.UUID, trial_id: uuid.UUID) -> int | None:
    """The trial's position in the queue; None when the queue does not hold it."""
    return session.execute(
        text("SELECT array_position(trial_ids, CAST(:trial AS uuid)) FROM review_queues WHERE id = :queue"),
        {"queue": queue_id, "trial": trial_id},
    ).scalar()


# A trial another reviewer holds: their claim on it is live.
HELD = (
    "EXISTS (SELECT 1 FROM review_claims c WHERE c.organization_id = t.organization_id "
    "AND c.evaluation_trial_id = t.id AND c.user_id <> :queue_user AND c.claimed_until > now())"
)
WALK = """
    SELECT p.position FROM review_queues q
    CROSS JOIN LATERAL unnest(q.trial_ids) WITH ORDINALITY AS p(trial_id, position)
    JOIN evaluation_trials t ON t.organization_id = q.organization_id AND t.id = p.trial_id
    WHERE q.id = :queue_id AND p.position {compare} :queue_from AND NOT {held} AND {where}
    ORDER BY p.position {direction} LIMIT 1
"""


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
    sql = WALK.format(
        compare="<" if backwards else ">", direction="DESC" if backwards else "ASC", held=HELD, where=where.sql
    )
    params: dict[str, Any] = {**where.params, "queue_id": queue_id, "queue_user": user_id, "queue_from": start}
    return session.execute(text(sql), params).scalar()


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


def triage_state(session: Session, trial_id: uuid.UUID) -> TriageState:
    """The trial's triage as a decision changes it and an undo restores it (one statement)."""
    row = session.execute(
        text(
            """
            SELECT coalesce(r.review_state, 'unreviewed') AS state,
                   coalesce(r.reason, '') AS reason, r.human_category AS category,
                   ARRAY(SELECT tl.label_id::text FROM trial_labels tl
                         WHERE tl.organization_id = t.organization_id AND tl.evaluation_trial_id = t.id
                         ORDER BY tl.label_id) AS labels
            FROM evaluation_trials t
            LEFT JOIN trial_reviews r ON r.organization_id = t.organization_id AND r.evaluation_trial_id = t.id
            WHERE t.id = :trial
            """
        ),
        {"trial": trial_id},
    ).one()
    return TriageState(row.state, row.reason, row.category, tuple(row.labels))


@dataclass(frozen=True)
class KeyedLabel:
    """A label of the set as the queue's panel offers it: its number key (1 to 9; None past the ninth)."""

    key: int | None
    id: uuid.UUID
    name: str
    color: str
    description: str


def keyed_labels(session: Session, keys: int) -> list[KeyedLabel]:
    """The organization's labels in the order they were created (a new label never renumbers the others), the
    first `keys` of them numbered from 1."""
    rows = session.execute(
        text(
            "SELECT CASE WHEN row_number() OVER w <= :keys THEN row_number() OVER w END AS key, id, name, color, "
            "description FROM labels WINDOW w AS (ORDER BY created_at, id) ORDER BY created_at, id"
        ),
        {"keys": keys},
    )
    return all_by_name(KeyedLabel, rows)


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
