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
from queries.review_queue import live_claim, triage_state
from writes.triage import UNCHANGED, Reviewer, change_labels, set_review


def start_queue(
    session: Session, reviewer: Reviewer, filters: dict[str, str], trial_ids: list[uuid.UUID], more: bool
) -> uuid.UUID:
    """Start the reviewer's queue over `trial_ids` (1 to QUEUE_MOST, the explorer's order) matched by `filters` (the
    explorer's parameters); return its id."""
    queue = ReviewQueue(
        organization_id=reviewer.org_id,
        id=new_id(),
        user_id=reviewer.user_id,
        filters=filters,
        trial_ids=trial_ids[:QUEUE_MOST],
        more=more,
    )
    session.add(queue)
    session.flush()
    return queue.id


CLAIM = f"""
    INSERT INTO review_claims (organization_id, evaluation_trial_id, user_id, claimed_until)
    VALUES (:org, :trial, :user, now() + interval '{CLAIM_MINUTES} minutes')
    ON CONFLICT (organization_id, evaluation_trial_id) DO UPDATE
    SET user_id = excluded.user_id, claimed_until = excluded.claimed_until
    WHERE review_claims.user_id = excluded.user_id OR review_claims.claimed_until <= now()
    RETURNING user_id
"""


def claim(session: Session, reviewer: Reviewer, trial_id: uuid.UUID) -> bool:
    """Take the trial for the reviewer for CLAIM_MINUTES (again, when it is theirs already); False, and nothing
    written, while another reviewer's claim on it is live."""
    taken = session.execute(text(CLAIM), {"org": reviewer.org_id, "trial": trial_id, "user": reviewer.user_id}).scalar()
    return taken is not None


def _hold(session: Session, reviewer: Reviewer, trial_id: uuid.UUID) -> None:
    """Claim the trial or refuse: ClaimHeld naming who holds it and until when."""
    if claim(session, reviewer, trial_id):
        return
    held = live_claim(session, trial_id)
    by = f"{held.holder} until {held.until:%H:%M} UTC" if held else "another reviewer"
    raise ClaimHeld(f"This trial is being reviewed by {by}; nothing was changed. Its queue skips it until then.")


def _locked_queue(session: Session, reviewer: Reviewer, queue_id: uuid.UUID) -> Any:
    """The reviewer's queue row, locked for this transaction; NotFoundInOrg for another's or none."""
    row = session.execute(
        text("SELECT id, trial_ids, decisions FROM review_queues WHERE id = :id AND user_id = :user FOR UPDATE"),
        {"id": queue_id, "user": reviewer.user_id},
    ).first()
    if row is None:
        raise NotFoundInOrg(f"no review queue {queue_id} of yours in this organization")
    return row


def _lock_trial(session: Session, trial_id: uuid.UUID) -> None:
    """Lock the trial as writes.triage does, so the state read next is the one the change starts from."""
    session.execute(text("SELECT 1 FROM evaluation_trials WHERE id = :id FOR NO KEY UPDATE"), {"id": trial_id})


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
    queue = _locked_queue(session, reviewer, queue_id)
    if trial_id not in queue.trial_ids:
        raise NotFoundInOrg(f"no trial {trial_id} in this review queue")
    _hold(session, reviewer, trial_id)
    _lock_trial(session, trial_id)
    before = triage_state(session, trial_id)
    if decision.add_labels or decision.remove_labels:
        change_labels(session, reviewer, trial_id, add=list(decision.add_labels), remove=list(decision.remove_labels))
    reason = decision.reason if decision.state == "excluded" else UNCHANGED
    set_review(session, reviewer, trial_id, state=decision.state, reason=reason, human_category=decision.human_category)
    after = triage_state(session, trial_id)
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
    the trial's id.
    UndoRefused when nothing is left to undo or the trial changed since; ClaimHeld when another reviewer holds it
    now."""
    queue = _locked_queue(session, reviewer, queue_id)
    if not queue.decisions:
        raise UndoRefused("Nothing to undo: no decision of this queue is left to take back.")
    entry = queue.decisions[-1]
    trial_id = uuid.UUID(entry["trial"])
    if session.execute(text("SELECT 1 FROM evaluation_trials WHERE id = :id"), {"id": trial_id}).first() is None:
        raise NotFoundInOrg(f"trial {trial_id} no longer exists; its decision cannot be undone")
    _hold(session, reviewer, trial_id)
    _lock_trial(session, trial_id)
    before, left = TriageState.from_stored(entry["before"]), TriageState.from_stored(entry["after"])
    now = triage_state(session, trial_id)
    if now != left:
        raise UndoRefused(
            "Not undone: the trial's triage changed after your decision (someone else's change would be lost); "
            "change it on the trial's page instead."
        )
    still = set(
        session.execute(
            text("SELECT id::text FROM labels WHERE id = ANY(CAST(:ids AS uuid[]))"), {"ids": list(before.labels)}
        ).scalars()
    )  # a label deleted since is on no trial any more
    add = [uuid.UUID(i) for i in before.labels if i not in now.labels and i in still]
    remove = [uuid.UUID(i) for i in now.labels if i not in before.labels]
    if add or remove:
        change_labels(session, reviewer, trial_id, add=add, remove=remove)
    set_review(session, reviewer, trial_id, state=before.state, reason=before.reason, human_category=before.category)
    session.execute(text("UPDATE review_queues SET decisions = decisions - -1 WHERE id = :id"), {"id": queue_id})
    return trial_id
