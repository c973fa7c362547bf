"""Triage pages: the organization's label set (/settings/labels), and on the trial page its labels, review state,
human failure category and notes. Members and owners write; viewers read (403). A refused change re-renders the
page (422, nothing written) with every refusal of the form at once: an error summary at the top of the review
panel, each message under its input, in the page's words; every change is audited (writes.triage)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from flask import Blueprint, abort, flash, request, url_for
from sqlalchemy.orm import Session

from blueprints.auth import current_reviewer, require_role
from blueprints.trials import TriageRefusal, diff_of_request, diff_review_answer, trial_page
from domain.errors import DomainError, NotFoundInOrg
from domain.triage import LABEL_PALETTE
from domain.vocabulary import LABEL_COLORS
from queries.triage import list_labels
from web.database import request_session
from web.fields import PageForm, in_page_words
from web.forms import LabelForm, NoteForm, ReviewForm, TrialLabelForm
from web.htmx import redirect_after_write, render
from web.params import parse_uuid
from writes.triage import add_note, change_labels, create_label, delete_label, delete_note, edit_note, set_review

bp = Blueprint("triage", __name__)


def _labels_page(status: int = 200, error: str | None = None, form: LabelForm | None = None):
    return render(
        "settings/labels.html",
        status=status,
        labels=list_labels(request_session()),
        palette=LABEL_PALETTE,
        colors=LABEL_COLORS,
        error=error,
        form=form or LabelForm(formdata=None),
        can_write=current_reviewer().role != "viewer",
    )


@bp.get("/settings/labels")
def labels():
    """The organization's labels, with their counts of trials (everyone reads; members and owners add and delete)."""
    return _labels_page()


@bp.post("/settings/labels")
def create_label_view():
    """Add a label: a name (kept in its normal form, unique, and like no other label's: 409 otherwise), a colour of
    the palette, a description."""
    require_role("member")
    form = LabelForm()
    if form.validate():
        session = request_session()
        try:
            label = create_label(
                session, current_reviewer(), form.name.data, form.color.data or "gray", form.description.data
            )
        except DomainError as error:  # a name taken, or like one taken: said under the name, in the page's words
            session.rollback()
            form.name.errors.append(in_page_words(str(error), "name"))
            return _labels_page(error.status, form=form)
        name = label.name
        session.commit()
        flash(f"Label {name} added.")
        return redirect_after_write(url_for("triage.labels"))
    return _labels_page(422, form=form)


@bp.post("/settings/labels/<uuid:label_id>/delete")
def delete_label_view(label_id: uuid.UUID):
    """Delete a label: it leaves every trial it was on, each trial's history saying so."""
    require_role("member")
    session = request_session()
    try:
        name = delete_label(session, current_reviewer(), label_id)
    except NotFoundInOrg as error:
        abort(404, description=str(error))
    session.commit()
    flash(f"Label {name} deleted.")
    return redirect_after_write(url_for("triage.labels"))


def _change(
    trial_id: uuid.UUID,
    change: Callable[[Session], Any],
    done: str,
    anchor: str = "triage",
    *,
    form: PageForm | None = None,
    form_id: str = "",
):
    """Make a change to the trial's triage; a refusal re-renders the trial page with it (under the input of the field
    it names, else in the error summary alone, in the page's words) and writes nothing. A form sent from the trial
    diff (diffA, diffB) is answered there (blueprints.trials.diff_review_answer)."""
    require_role("member")
    session = request_session()
    from_diff = diff_of_request(trial_id) is not None
    try:
        change(session)
    except DomainError as error:
        session.rollback()
        if error.status == 404:
            abort(404, description=str(error))
        field = getattr(error, "field", "")
        if form is not None and field in form:
            form[field].errors.append(in_page_words(str(error), field))
            refusal = TriageRefusal(form_id, form)
        else:
            refusal = TriageRefusal(form_id, form, (in_page_words(str(error), field),))
        return _refused_answer(trial_id, error.status, refusal)
    session.commit()
    if from_diff:
        return diff_review_answer(trial_id, message=done)
    flash(done)
    # Back to the trial with the list it was opened from (its previous and next match stay).
    carried: dict[str, Any] = request.args.to_dict()
    return redirect_after_write(url_for("trials.show", trial_id=trial_id, **carried, _anchor=anchor))


def _refused_answer(trial_id: uuid.UUID, status: int, refusal: TriageRefusal):
    """A refused triage form answered where it was sent from: the trial diff, or the trial page."""
    if diff_of_request(trial_id) is not None:
        return diff_review_answer(trial_id, status=status, refusal=refusal)
    return trial_page(trial_id, status=status, refusal=refusal)


def _refused(trial_id: uuid.UUID, form: PageForm, form_id: str):
    """A form its own rules refused: every refusal at once, 422."""
    require_role("member")
    return _refused_answer(trial_id, 422, TriageRefusal(form_id, form))


@bp.post("/trials/<uuid:trial_id>/labels")
def add_label(trial_id: uuid.UUID):
    """Put a label of the set on the trial."""
    form = TrialLabelForm()
    label_id = form.label_id.data if form.validate() else None
    if label_id is None:
        return _refused(trial_id, form, "add-label")
    add = [label_id]
    return _change(
        trial_id,
        lambda s: change_labels(s, current_reviewer(), trial_id, add=add),
        "Label added.",
        form=form,
        form_id="add-label",
    )


@bp.post("/trials/<uuid:trial_id>/labels/<uuid:label_id>/remove")
def remove_label(trial_id: uuid.UUID, label_id: uuid.UUID):
    """Take a label off the trial."""
    remove = [label_id]
    return _change(trial_id, lambda s: change_labels(s, current_reviewer(), trial_id, remove=remove), "Label removed.")


@bp.post("/trials/<uuid:trial_id>/review")
def review(trial_id: uuid.UUID):
    """Set the review state (excluded needs a reason) and the human failure category (blank: the verifier's)."""
    form = ReviewForm()
    if not form.validate():
        return _refused(trial_id, form, "review-form")
    state, reason, category = form.review_state.data, form.reason.data, form.human_category.data or None
    said = {"reviewed": "Marked reviewed.", "excluded": "Excluded from training exports.", "unreviewed": "Saved."}
    return _change(
        trial_id,
        lambda s: set_review(s, current_reviewer(), trial_id, state=state, reason=reason, human_category=category),
        said[state],
        form=form,
        form_id="review-form",
    )


@bp.post("/trials/<uuid:trial_id>/notes")
def add_note_view(trial_id: uuid.UUID):
    """Add a plain-text note to the trial, or to one of its steps."""
    form = NoteForm()
    if not form.validate():
        return _refused(trial_id, form, "add-note")
    body, step = form.body.data, form.step.data
    return _change(
        trial_id,
        lambda s: add_note(s, current_reviewer(), trial_id, body, step),
        "Note added.",
        "notes",
        form=form,
        form_id="add-note",
    )


@bp.post("/trials/<uuid:trial_id>/notes/<uuid:note_id>")
def edit_note_view(trial_id: uuid.UUID, note_id: uuid.UUID):
    """Change a note's text (its author or an owner)."""
    form = NoteForm()
    if not form.validate():
        return _refused(trial_id, form, f"note-{note_id}")
    body = form.body.data
    return _change(
        trial_id,
        lambda s: edit_note(s, current_reviewer(), trial_id, note_id, body),
        "Note saved.",
        "notes",
        form=form,
        form_id=f"note-{note_id}",
    )


@bp.post("/trials/<uuid:trial_id>/notes/<uuid:note_id>/delete")
def delete_note_view(trial_id: uuid.UUID, note_id: uuid.UUID):
    """Delete a note (its author or an owner)."""
    return _change(
        trial_id,
        lambda s: delete_note(s, current_reviewer(), trial_id, note_id),
        "Note deleted.",
        "notes",
        form_id=f"note-{note_id}",
    )


BULK_MOST = 200  # trials one bulk action may change (the explorer shows 50 a page)


@bp.post("/trials/bulk")
def bulk():
    """Label, mark reviewed or exclude (with a reason) the trials selected in the explorer, all or none; then back
    to the same list. An unknown or foreign trial answers 404 and changes nothing."""
    require_role("member")
    carried: dict[str, Any] = request.args.to_dict()
    back = url_for("trials.index", **carried)
    ids = [parse_uuid(value) for value in request.form.getlist("trial_id")[: BULK_MOST + 1]]
    action = request.form.get("action", "")
    if not ids or any(i is None for i in ids) or len(ids) > BULK_MOST:
        abort(400, description=f"Select 1 to {BULK_MOST} trials (trial_id must be trial UUIDs).")
    chosen = [i for i in ids if i is not None]
    reviewer, session = current_reviewer(), request_session()
    try:
        if action == "label":
            name = request.form.get("label", "")
            for trial_id in chosen:
                change_labels(session, reviewer, trial_id, add_names=[name])
            done = f"Labelled {len(chosen)} trial{'s' if len(chosen) != 1 else ''} {name}."
        elif action in ("reviewed", "excluded"):
            reason = request.form.get("reason", "")
            for trial_id in chosen:
                set_review(session, reviewer, trial_id, state=action, reason=reason)
            trials = f"{len(chosen)} trial{'s' if len(chosen) != 1 else ''}"
            done = f"Marked {trials} reviewed." if action == "reviewed" else f"Excluded {trials} from training exports."
        else:
            abort(400, description="action must be one of label, reviewed, excluded.")
    except DomainError as error:
        session.rollback()
        if error.status == 404:
            abort(404, description=str(error))
        flash(f"Nothing changed: {error}")
        return redirect_after_write(back)
    session.commit()
    flash(done)
    return redirect_after_write(back)
