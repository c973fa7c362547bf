"""Triage writes: the organization's labels, and on a trial its labels, review state, human failure category and
notes, each change kept in the audit trail (trial_audit) in the same transaction.

Changes to one trial's triage lock the trial's row for the transaction, so two reviewers' edits serialise: each
adds or removes what it names against what the other left, and neither is lost. A change that names labels holds
them (FOR KEY SHARE) until it commits, and deleting a label locks it (FOR UPDATE) first: a change that started
before the deletion finishes, and the deletion then takes the label off that trial too; one that comes after finds
no label and answers so (422 by name, 404 by id), never a foreign-key error. The lock order is the trial, then its
labels, for every change; a deletion takes no trial lock (its audit entries only need the trials to exist).

A human failure category is written onto the trial itself (evaluation_trials.failure_category, migration 0033), so
the capability-gap counts, the failureCategory filter and the exports follow it; the verifier's stays in
trial_reviews.verifier_category.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from domain.errors import Forbidden, NameTaken, NotFoundInOrg, TriageRefused
from domain.rules import look_alike, normal_name
from domain.triage import NOTE_CHARS, effective_category, lacks_a_reason
from domain.vocabulary import ReviewState
from models.base import new_id
from models.triage import Label, TrialAuditEntry, TrialLabel, TrialNote, TrialReview

UNCHANGED: Any = object()  # a field a change leaves as it is


@dataclass(frozen=True)
class Reviewer:
    """Who makes a change: the organization, the user and their role in it (owners edit anyone's notes)."""

    org_id: uuid.UUID
    user_id: uuid.UUID
    role: str


def create_label(session: Session, reviewer: Reviewer, name: str, color: str = "gray", description: str = "") -> Label:
    """Add a label to the organization's set, named in its normal form (domain.rules.normal_name). NameTaken (409)
    naming the label that holds the name when one has the same normal form or looks like it (domain.rules.look_alike:
    `fIaky` beside `flaky`), also when a concurrent request added it a moment ago (the unique indexes decide)."""
    normal, look = normal_name(name), look_alike(name)
    for _ in range(2):  # a conflicting label deleted before it could be named: try once more
        label_id = new_id()
        added = session.scalar(
            insert(Label)
            .values(
                organization_id=reviewer.org_id,
                id=label_id,
                name=normal,
                look_alike=look,
                color=color,
                description=description,
                created_by_user_id=reviewer.user_id,
            )
            .on_conflict_do_nothing()
            .returning(Label.id)
        )
        if added is not None:
            return session.get_one(Label, (reviewer.org_id, label_id))
        taken = session.scalar(select(Label.name).where((Label.name == normal) | (Label.look_alike == look)))
        if taken == normal:
            raise NameTaken(
                f"name: a label named {taken!r} already exists (names compare in their normal form: case, "
                "compatibility forms and invisible characters aside)"
            )
        if taken is not None:
            raise NameTaken(f"name: {name!r} looks like the label {taken!r}, which exists; a label looks like no other")
    raise NameTaken(f"name: a label named {normal!r} was being added and deleted at once; add it again")


def delete_label(session: Session, reviewer: Reviewer, label_id: uuid.UUID) -> str:
    """Remove a label from the set and from every trial it was on, each such trial's audit trail saying so
    (`label_deleted`, before: the label's name, after: none); return its name. The label is locked first, so
    changes that hold it finish before, and changes that come after find it gone. NotFoundInOrg when unknown."""
    name = session.scalar(select(Label.name).where(Label.id == label_id).with_for_update())
    if name is None:
        raise NotFoundInOrg(f"label {label_id} no longer exists in this organization, or never did")
    trials = session.scalars(
        delete(TrialLabel)
        .where(TrialLabel.label_id == label_id)
        .returning(TrialLabel.evaluation_trial_id)
        .execution_options(synchronize_session=False)
    ).all()
    for trial_id in sorted(trials):
        _audit(session, reviewer, trial_id, "label_deleted", name, None)
    session.flush()
    session.execute(delete(Label).where(Label.id == label_id).execution_options(synchronize_session=False))
    return name


@dataclass(frozen=True)
class LockedTrial:
    """A trial locked for a triage change: its failed-first rank and its failure category as pages show it."""

    rank: int
    category: str | None


def _lock_trial(session: Session, trial_id: uuid.UUID) -> LockedTrial:
    """Lock the trial's row for this transaction (two reviewers' changes to one trial serialise), mark it triaged
    (exports then read its triage) and return its rank and category; NotFoundInOrg when the trial is not the
    organization's."""
    row = session.execute(
        text(
            "SELECT trial_failed_rank(reward) AS rank, failure_category, triaged FROM evaluation_trials "
            "WHERE id = :id FOR NO KEY UPDATE"
        ),
        {"id": trial_id},
    ).first()
    if row is None:
        raise NotFoundInOrg(f"no trial {trial_id}")
    if not row.triaged:
        session.execute(text("UPDATE evaluation_trials SET triaged = true WHERE id = :id"), {"id": trial_id})
    return LockedTrial(int(row.rank), row.failure_category)


def _audit(session: Session, reviewer: Reviewer, trial_id: uuid.UUID, action: str, before: Any, after: Any) -> None:
    session.add(
        TrialAuditEntry(
            organization_id=reviewer.org_id,
            id=new_id(),
            evaluation_trial_id=trial_id,
            actor_user_id=reviewer.user_id,
            action=action,
            before=before,
            after=after,
        )
    )


def _labels_on(session: Session, trial_id: uuid.UUID) -> dict[uuid.UUID, str]:
    rows = session.execute(
        select(Label.id, Label.name)
        .join(TrialLabel, (TrialLabel.organization_id == Label.organization_id) & (TrialLabel.label_id == Label.id))
        .where(TrialLabel.evaluation_trial_id == trial_id)
    )
    return {row.id: row.name for row in rows}


def _held(session: Session, *condition: Any) -> dict[uuid.UUID, str]:
    """The organization's labels that meet `condition`, held (FOR KEY SHARE) until this transaction ends: none can
    be deleted meanwhile, and one being deleted is waited for, then missing."""
    rows = session.execute(
        select(Label.id, Label.name).where(*condition).order_by(Label.id).with_for_update(read=True, key_share=True)
    )
    return {row.id: row.name for row in rows}


def _labels_named(session: Session, names: list[str]) -> dict[uuid.UUID, str]:
    """The organization's labels of these names (compared in their normal form), held; TriageRefused naming one
    that does not exist (or no longer does)."""
    wanted = {normal_name(name): name for name in names}
    if len(wanted) < len(names):
        twice = next(name for i, name in enumerate(names) if normal_name(name) in {normal_name(n) for n in names[:i]})
        raise TriageRefused(
            f"labels: {twice!r} is named twice (names compare in their normal form, whatever the case)", field="labels"
        )
    found = _held(session, Label.name.in_(list(wanted)))
    missing = sorted(set(wanted) - set(found.values()))
    if missing:
        raise TriageRefused(
            f"labels: no label named {wanted[missing[0]]!r} (it no longer exists, or never did); create it at "
            "/settings/labels first",
            field="labels",
        )
    return found


def change_labels(
    session: Session,
    reviewer: Reviewer,
    trial_id: uuid.UUID,
    *,
    add: list[uuid.UUID] | None = None,
    remove: list[uuid.UUID] | None = None,
    names: list[str] | None = None,
    add_names: list[str] | None = None,
) -> list[str]:
    """Add and remove labels on a trial (by id), add labels by name (`add_names`), or with `names` make its labels
    exactly those; return its label names after, sorted. Unknown label ids answer NotFoundInOrg, unknown names
    TriageRefused (a label deleted a moment ago is unknown); another reviewer's concurrent change is kept."""
    rank = _lock_trial(session, trial_id).rank
    before = _labels_on(session, trial_id)
    if add_names is not None:
        adding = {i: n for i, n in _labels_named(session, add_names).items() if i not in before}
        removing: dict[uuid.UUID, str] = {}
    elif names is not None:
        wanted = _labels_named(session, names)
        adding = {i: n for i, n in wanted.items() if i not in before}
        removing = {i: n for i, n in before.items() if i not in wanted}
    else:
        known = _held(session, Label.id.in_([*(add or []), *(remove or [])]))
        unknown = [i for i in [*(add or []), *(remove or [])] if i not in known]
        if unknown:
            raise NotFoundInOrg(f"label {unknown[0]} no longer exists in this organization, or never did")
        adding = {i: known[i] for i in add or [] if i not in before}
        removing = {i: known[i] for i in remove or [] if i in before}
    if adding:
        session.execute(
            insert(TrialLabel).values(
                [
                    {
                        "organization_id": reviewer.org_id,
                        "label_id": label_id,
                        "failed_rank": rank,
                        "evaluation_trial_id": trial_id,
                        "created_by_user_id": reviewer.user_id,
                    }
                    for label_id in adding
                ]
            )
        )
    if removing:
        session.execute(
            delete(TrialLabel).where(
                TrialLabel.evaluation_trial_id == trial_id, TrialLabel.label_id.in_(list(removing))
            )
        )
    after = sorted([n for i, n in before.items() if i not in removing] + list(adding.values()), key=str.lower)
    if adding or removing:
        _audit(session, reviewer, trial_id, "labels", sorted(before.values(), key=str.lower), after)
    return after


def set_review(
    session: Session,
    reviewer: Reviewer,
    trial_id: uuid.UUID,
    *,
    state: ReviewState | Any = UNCHANGED,
    reason: str | Any = UNCHANGED,
    human_category: str | Any | None = UNCHANGED,
) -> TrialReview:
    """Set a trial's review state (excluded needs a reason; another state clears it) and/or its human failure
    category (None clears it); audit what changed. TriageRefused when excluded has no reason."""
    trial = _lock_trial(session, trial_id)
    review = session.get(TrialReview, (reviewer.org_id, trial_id))
    old = (review.review_state, review.reason, review.human_category) if review else ("unreviewed", "", None)
    new_state = old[0] if state is UNCHANGED else state
    new_reason = (old[1] if reason is UNCHANGED else reason or "") if new_state == "excluded" else ""
    if lacks_a_reason(new_state, new_reason):
        raise TriageRefused(
            "reason: excluding a trial needs a reason (what makes it unfit for training)", field="reason"
        )
    new_category = old[2] if human_category is UNCHANGED else human_category or None
    if review is None:  # the trial's category is still the verifier's: keep it beside the reviewer's
        review = TrialReview(
            organization_id=reviewer.org_id,
            evaluation_trial_id=trial_id,
            failed_rank=trial.rank,
            verifier_category=trial.category,
        )
        session.add(review)
    review.review_state, review.reason, review.human_category = new_state, new_reason, new_category
    review.updated_by_user_id, review.updated_at = reviewer.user_id, func.now()
    shown = effective_category(review.verifier_category, new_category)
    if shown != trial.category:  # the category rollups follow (migration 0033's trigger)
        session.execute(
            text("UPDATE evaluation_trials SET failure_category = :category WHERE id = :id"),
            {"category": shown, "id": trial_id},
        )
    if (new_state, new_reason) != old[:2]:
        _audit(session, reviewer, trial_id, "review", _state(old[0], old[1]), _state(new_state, new_reason))
    if new_category != old[2]:
        _audit(session, reviewer, trial_id, "human_category", old[2], new_category)
    session.flush()
    return review


def _state(state: str, reason: str) -> dict[str, str]:
    return {"state": state, "reason": reason} if reason else {"state": state}


def add_note(
    session: Session, reviewer: Reviewer, trial_id: uuid.UUID, body: str, step: int | None = None
) -> TrialNote:
    """Add a plain-text note to a trial, or to one of its steps; TriageRefused when the trial has no such step."""
    _note_fits(body)
    _lock_trial(session, trial_id)
    if step is not None:
        steps = session.execute(
            text("SELECT coalesce(jsonb_array_length(steps), 0) FROM evaluation_trials WHERE id = :id"),
            {"id": trial_id},
        ).scalar()
        if not 1 <= step <= (steps or 0):
            raise TriageRefused(f"step: the trial has {steps or 0} steps, not a step {step}", field="step")
    note = TrialNote(
        organization_id=reviewer.org_id,
        id=new_id(),
        evaluation_trial_id=trial_id,
        step=step,
        body=body,
        author_user_id=reviewer.user_id,
    )
    session.add(note)
    _audit(session, reviewer, trial_id, "note_added", None, _note(note.id, step, body))
    session.flush()
    return note


def _note_fits(body: str) -> None:
    if len(body) > NOTE_CHARS:
        raise TriageRefused(f"body: a note holds at most {NOTE_CHARS} characters, not {len(body)}", field="body")


def _note(note_id: uuid.UUID, step: int | None, body: str) -> dict[str, Any]:
    return {"note": str(note_id), "step": step, "body": body}


def _own_note(session: Session, reviewer: Reviewer, trial_id: uuid.UUID, note_id: uuid.UUID) -> TrialNote:
    note = session.get(TrialNote, (reviewer.org_id, note_id))
    if note is None or note.evaluation_trial_id != trial_id:
        raise NotFoundInOrg(f"no note {note_id} on trial {trial_id}")
    if note.author_user_id != reviewer.user_id and reviewer.role != "owner":
        raise Forbidden("Only the note's author or an owner may change or delete it.")
    return note


def edit_note(session: Session, reviewer: Reviewer, trial_id: uuid.UUID, note_id: uuid.UUID, body: str) -> TrialNote:
    """Change a note's text (its author or an owner); audit the text before and after."""
    _note_fits(body)
    _lock_trial(session, trial_id)
    note = _own_note(session, reviewer, trial_id, note_id)
    if note.body != body:
        _audit(
            session,
            reviewer,
            trial_id,
            "note_edited",
            _note(note.id, note.step, note.body),
            _note(note.id, note.step, body),
        )
        note.body, note.updated_at = body, func.now()
    session.flush()
    return note


def delete_note(session: Session, reviewer: Reviewer, trial_id: uuid.UUID, note_id: uuid.UUID) -> None:
    """Delete a note (its author or an owner); the audit trail keeps its text."""
    _lock_trial(session, trial_id)
    note = _own_note(session, reviewer, trial_id, note_id)
    _audit(session, reviewer, trial_id, "note_deleted", _note(note.id, note.step, note.body), None)
    session.delete(note)
    session.flush()
