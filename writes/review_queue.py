"""Review queue writes: start a reviewer's queue, claim the trial they have open, make a decision on it (one
transaction: labels, review state, reason and human category, through writes.triage and audited there) and undo
the newest decision, restoring the trial's triage as the decision found it.

A decision locks the queue's row, then the trial (writes.triage's order after it: the trial, then its labels), so
one reviewer's double submission serialises and an undo never races the decision it undoes. A decision or an undo
on a trial another reviewer holds is refused (ClaimHeld); an undo of a trial changed since its decision is refused
(UndoRefused) rather than losing that change.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.errors import ClaimHeld, NotFoundInOrg, UndoRefused
from domain.review_queue import CLAIM_MINUTES, QUEUE_MOST, UNDO_MOST, TriageState
from models.base import new_id
from models.review_queues import ReviewQueue
from queries.review_queue import TRIAGE_STATE, live_claim
from writes.triage import UNCHANGED, Reviewer, change_labels, set_review


def start_queue(
    session: Session,
    reviewer: Reviewer,
    filters: dict[str, str],
    summary: str,
    trial_ids: list[uuid.UUID],
    more: bool,
) -> uuid.UUID:
    """Start the reviewer's queue over `trial_ids` (1 to QUEUE_MOST, the explorer's order) matched by `filters` (the
    explorer's parameters, which `summary` says in words); return its id."""
    queue = ReviewQueue(
        organization_id=reviewer.org_id,
        id=new_id(),
        user_id=reviewer.user_id,
        filters=filters,
        summary=summary,
        trial_ids=trial_ids[:QUEUE_MOST],
        more=more,
    )
    session.add(queue)
    session.flush()
    return queue.id


TAKE = f"""
    INSERT INTO review_claims (organization_id, evaluation_trial_id, user_id, claimed_until)
    SELECT :org, target.id, :user, now() + interval '{CLAIM_MINUTES} minutes' FROM target
    ON CONFLICT (organization_id, evaluation_trial_id) DO UPDATE
    SET user_id = excluded.user_id, claimed_until = excluded.claimed_until
    WHERE review_claims.user_id = excluded.user_id OR review_claims.claimed_until <= now()
    RETURNING evaluation_trial_id
"""
CLAIM = f"WITH target AS (SELECT CAST(:trial AS uuid) AS id), taken AS ({TAKE}) SELECT count(*) FROM taken"
CLAIM_AT = f"""
    WITH target AS (
        SELECT t.id FROM review_queues q
        JOIN evaluation_trials t ON t.organization_id = q.organization_id AND t.id = q.trial_ids[:position]
        WHERE q.id = :queue
    ), taken AS ({TAKE})
    SELECT target.id, EXISTS (SELECT 1 FROM taken) AS mine FROM target
"""


def claim(session: Session, reviewer: Reviewer, trial_id: uuid.UUID) -> bool:
    """Take the trial for the reviewer for CLAIM_MINUTES (again, when it is theirs already); False, and nothing
    written, while another reviewer's claim on it is live."""
    taken = session.execute(text(CLAIM), {"org": reviewer.org_id, "trial": trial_id, "user": reviewer.user_id})
    return bool(taken.scalar_one())


def claim_at(session: Session, reviewer: Reviewer, queue_id: uuid.UUID, position: int) -> tuple[uuid.UUID | None, bool]:
    """The trial at `position` of the queue, taken for the reviewer as `claim` takes it (one statement): (its id,
    whether it is theirs now); (None, False) past either end or when the trial no longer exists."""
    row = session.execute(
        text(CLAIM_AT),
        {"org": reviewer.org_id, "user": reviewer.user_id, "queue": queue_id, "position": position},
    ).first()
    return (row.id, bool(row.mine)) if row else (None, False)


def _hold(session: Session, reviewer: Reviewer, trial_id: uuid.UUID) -> None:
    """Claim the trial or refuse: ClaimHeld naming who holds it and until when."""
    if claim(session, reviewer, trial_id):
        return
    held = live_claim(session, trial_id)
    by = f"{held.holder} until {held.until:%H:%M} UTC" if held else "another reviewer"
    raise ClaimHeld(f"This trial is being reviewed by {by}; nothing was changed. Its queue skips it until then.")


def _locked_queue(session: Session, reviewer: Reviewer, queue_id: uuid.UUID, trial_id: uuid.UUID | None) -> Any:
    """The reviewer's queue row locked for this transaction: the position of `trial_id` in it and its newest
    decision; NotFoundInOrg for another's or none."""
    row = session.execute(
        text(
            "SELECT array_position(trial_ids, CAST(:trial AS uuid)) AS position, decisions -> -1 AS last "
            "FROM review_queues WHERE id = :id AND user_id = :user FOR UPDATE"
        ),
        {"id": queue_id, "user": reviewer.user_id, "trial": trial_id},
    ).first()
    if row is None:
        raise NotFoundInOrg(f"no review queue {queue_id} of yours in this organization")
    return row


def _locked_state(session: Session, trial_id: uuid.UUID) -> TriageState:
    """Lock the trial as writes.triage does and read its triage, the state the change starts from."""
    row = session.execute(text(f"{TRIAGE_STATE} FOR NO KEY UPDATE OF t"), {"trial": trial_id}).first()
    if row is None:
        raise NotFoundInOrg(f"no trial {trial_id}")
    return TriageState(row.state, row.reason, row.category, tuple(row.labels))


@dataclass(frozen=True)
class DecisionInput:
    """What a reviewer decided on a trial: its review state (reviewed or excluded, with the reason), the labels
    they put on and took off, and the human category (UNCHANGED: as it was)."""

    state: str
    reason: str = ""
    add_labels: tuple[uuid.UUID, ...] = ()
    remove_labels: tuple[uuid.UUID, ...] = ()
    human_category: Any = UNCHANGED


def decide(
    session: Session, reviewer: Reviewer, queue_id: uuid.UUID, trial_id: uuid.UUID, decision: DecisionInput
) -> TriageState:
    """Make the decision on a trial of the reviewer's queue and keep the trial's triage before and after it in the
    queue (the newest UNDO_MOST decisions); return the state it left. NotFoundInOrg when the queue is not theirs
    or does not hold the trial, or a label is unknown; ClaimHeld when another reviewer holds the trial;
    TriageRefused as writes.triage refuses (excluded without a reason)."""
    if _locked_queue(session, reviewer, queue_id, trial_id).position is None:
        raise NotFoundInOrg(f"no trial {trial_id} in this review queue")
    _hold(session, reviewer, trial_id)
    before = _locked_state(session, trial_id)
    if decision.add_labels or decision.remove_labels:
        change_labels(session, reviewer, trial_id, add=list(decision.add_labels), remove=list(decision.remove_labels))
    reason = decision.reason if decision.state == "excluded" else UNCHANGED
    review = set_review(
        session, reviewer, trial_id, state=decision.state, reason=reason, human_category=decision.human_category
    )
    labels = set(before.labels) | {str(i) for i in decision.add_labels}
    after = TriageState(
        review.review_state,
        review.reason,
        review.human_category,
        tuple(sorted(labels - {str(i) for i in decision.remove_labels})),
    )
    entry = {"trial": str(trial_id), "before": before.stored(), "after": after.stored()}
    session.execute(
        text(
            "UPDATE review_queues SET decisions = CASE WHEN jsonb_array_length(decisions) >= :most "
            "THEN decisions - 0 ELSE decisions END || jsonb_build_array(CAST(:entry AS jsonb)) WHERE id = :id"
        ),
        {"id": queue_id, "most": UNDO_MOST, "entry": json.dumps(entry)},
    )
    return after


def undo_last(session: Session, reviewer: Reviewer, queue_id: uuid.UUID) -> uuid.UUID:
    """Undo the queue's newest decision: the trial's labels, review state, reason and human category become what
    the decision found (a trial that had no review row keeps one saying unreviewed, with no reason and the
    verifier's category, which every page, filter and export reads as it read none), each change audited; return
    the trial's id. UndoRefused when nothing is left to undo or the trial changed since; ClaimHeld when another
    reviewer holds it now."""
    entry = _locked_queue(session, reviewer, queue_id, None).last
    if entry is None:
        raise UndoRefused("Nothing to undo: no decision of this queue is left to take back.")
    trial_id = uuid.UUID(entry["trial"])
    _hold(session, reviewer, trial_id)
    now = _locked_state(session, trial_id)
    before, left = TriageState.from_stored(entry["before"]), TriageState.from_stored(entry["after"])
    if now != left:
        raise UndoRefused(
            "Not undone: the trial's triage changed after your decision (someone else's change would be lost); "
            "change it on the trial's page instead."
        )
    missing = [i for i in before.labels if i not in now.labels]
    still = set(
        session.execute(
            text("SELECT id::text FROM labels WHERE id = ANY(CAST(:ids AS uuid[]))"), {"ids": missing}
        ).scalars()
        if missing
        else ()
    )  # a label deleted since is on no trial any more
    add = [uuid.UUID(i) for i in missing if i in still]
    remove = [uuid.UUID(i) for i in now.labels if i not in before.labels]
    if add or remove:
        change_labels(session, reviewer, trial_id, add=add, remove=remove)
    set_review(session, reviewer, trial_id, state=before.state, reason=before.reason, human_category=before.category)
    session.execute(text("UPDATE review_queues SET decisions = decisions - -1 WHERE id = :id"), {"id": queue_id})
    return trial_id
