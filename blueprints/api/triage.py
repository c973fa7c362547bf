"""Triage API: the organization's labels, and one trial with what reviewers recorded on it (labels, review state,
human failure category, notes); every change is audited (writes.triage)."""

from __future__ import annotations

import uuid
from typing import Any

from flask import jsonify

from blueprints.api import ApiError, bp, json_object
from blueprints.api.contract import Reply, created, operation, write
from blueprints.api.schemas import (
    Label,
    LabelCreate,
    Note,
    NoteCreate,
    NoteEdit,
    TrialDetail,
    TrialLabels,
    TrialReview,
    TrialReviewChange,
    validated,
)
from blueprints.auth import current_reviewer
from queries.triage import Triage, has_trial, label_row, list_labels, trial_triage
from queries.trials import trial_detail
from web.database import request_session
from writes.triage import UNCHANGED, add_note, change_labels, create_label, delete_note, edit_note, set_review

NO_TRIAL = {404: "No such trial in this organization"}
NO_NOTE = {404: "No such trial, or no such note on it, in this organization"}
TRIAGE_REFUSALS = {
    404: "No such trial in this organization",
    422: "A rule of the write refuses it (excluded without a reason, an unknown label name, a note over 10,000 "
    "characters, a step the trial does not have); `error` names the field, nothing was written",
}


@bp.get("/labels")
@operation("listLabels", {200: Reply("The organization's labels by name, with their counts of trials", list[Label])})
def labels_api():
    """The organization's labels."""
    return jsonify([Label.of(label).to_json() for label in list_labels(request_session())])


@bp.post("/labels")
@write(
    "createLabel",
    created(Label),
    body=LabelCreate,
    error_reasons={
        409: "A label of that name exists, or one that looks like it (names compare in their normal form: NFKC, "
        "without format characters, case-folded; `fIaky` looks like `flaky`); `detail` names it, nothing was written"
    },
)
def create_label_api():
    """Add a label to the set: {"name", "color"?, "description"?} → 201 with its id; its name in its normal form."""
    body = validated(LabelCreate, json_object())
    session = request_session()
    label = create_label(session, current_reviewer(), body.name, body.color, body.description)
    answer = label_row(session, label.id)
    session.commit()
    return jsonify(Label.of(answer).to_json()), 201


def _review(triage: Triage) -> dict[str, Any]:
    return {
        "labels": [label.name for label in triage.labels],
        "review_state": triage.review_state,
        "reason": triage.reason,
        "human_category": triage.human_category,
        "verifier_category": triage.verifier_category,
        "failure_category": triage.category,
        "notes": [Note.of(note) for note in triage.notes],
    }


def _known(trial_id: uuid.UUID) -> None:
    """Answer 404 for a trial the organization does not have, before reading the body (as every route does)."""
    if not has_trial(request_session(), trial_id):
        raise ApiError(404, "not found", f"no trial {trial_id}")


def _triage_of(trial_id: uuid.UUID) -> Triage:
    triage = trial_triage(request_session(), trial_id)
    if triage is None:
        raise ApiError(404, "not found", f"no trial {trial_id}")
    return triage


@bp.get("/trials/<uuid:trial_id>")
@operation("getTrial", {200: Reply("The trial with its steps, stages and triage", TrialDetail)}, error_reasons=NO_TRIAL)
def get_trial(trial_id: uuid.UUID):
    """One trial: outcome, stages, steps, labels, review state, human category, notes and audit trail."""
    session = request_session()
    detail = trial_detail(session, trial_id)
    triage = trial_triage(session, trial_id)
    if detail is None or triage is None:
        raise ApiError(404, "not found", f"no trial {trial_id}")
    answer = TrialDetail.of(
        detail,
        evaluation_run_id=detail.run_id,
        steps=[step.to_stored() for step in detail.steps],
        audit=[vars(entry) for entry in triage.audit],
        **_review(triage),
    )
    return jsonify(answer.to_json())


@bp.put("/trials/<uuid:trial_id>/labels")
@write("setTrialLabels", {200: Reply("The labels after", TrialLabels)}, body=TrialLabels, error_reasons=TRIAGE_REFUSALS)
def set_trial_labels(trial_id: uuid.UUID):
    """Make the trial's labels exactly these names: {"labels": ["flaky-verifier", …]}."""
    _known(trial_id)
    body = validated(TrialLabels, json_object())
    session = request_session()
    after = change_labels(session, current_reviewer(), trial_id, names=body.labels)
    session.commit()
    return jsonify(TrialLabels(labels=after).to_json())


@bp.patch("/trials/<uuid:trial_id>")
@write("reviewTrial", {200: Reply("After", TrialReview)}, body=TrialReviewChange, error_reasons=TRIAGE_REFUSALS)
def review_trial(trial_id: uuid.UUID):
    """Set the review state (`excluded` needs a `reason`) and/or the human failure category (null clears it)."""
    _known(trial_id)
    body = validated(TrialReviewChange, json_object())
    given = body.model_fields_set
    session = request_session()
    set_review(
        session,
        current_reviewer(),
        trial_id,
        state=body.review_state if "review_state" in given and body.review_state else UNCHANGED,
        reason=body.reason if "reason" in given else UNCHANGED,
        human_category=body.human_category if "human_category" in given else UNCHANGED,
    )
    session.commit()
    return jsonify(TrialReview(**_review(_triage_of(trial_id))).to_json())


@bp.post("/trials/<uuid:trial_id>/notes")
@write("addTrialNote", created(Note), body=NoteCreate, error_reasons=TRIAGE_REFUSALS)
def add_trial_note(trial_id: uuid.UUID):
    """Add a plain-text note to the trial, or to one of its steps: {"body", "step"?} → 201."""
    _known(trial_id)
    body = validated(NoteCreate, json_object())
    session = request_session()
    note = add_note(session, current_reviewer(), trial_id, body.body, body.step)
    session.commit()
    return jsonify(_note_answer(trial_id, note.id)), 201


def _note_answer(trial_id: uuid.UUID, note_id: uuid.UUID) -> dict[str, object]:
    note = next(n for n in _triage_of(trial_id).notes if n.id == note_id)
    return Note.of(note).to_json()


@bp.patch("/trials/<uuid:trial_id>/notes/<uuid:note_id>")
@write(
    "editTrialNote",
    {200: Reply("The note, after", Note)},
    body=NoteEdit,
    error_reasons={**TRIAGE_REFUSALS, **NO_NOTE, 403: "Only the note's author or an owner may change it"},
)
def edit_trial_note(trial_id: uuid.UUID, note_id: uuid.UUID):
    """Change a note's text (its author or an owner): {"body"}."""
    _known(trial_id)
    body = validated(NoteEdit, json_object())
    session = request_session()
    edit_note(session, current_reviewer(), trial_id, note_id, body.body)
    session.commit()
    return jsonify(_note_answer(trial_id, note_id))


@bp.delete("/trials/<uuid:trial_id>/notes/<uuid:note_id>")
@write(
    "deleteTrialNote",
    {204: Reply("Deleted; the audit trail keeps its text")},
    error_reasons={**NO_NOTE, 403: "Only the note's author or an owner may delete it"},
)
def delete_trial_note(trial_id: uuid.UUID, note_id: uuid.UUID):
    """Delete a note (its author or an owner)."""
    session = request_session()
    delete_note(session, current_reviewer(), trial_id, note_id)
    session.commit()
    return "", 204
