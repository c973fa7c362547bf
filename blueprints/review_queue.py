"""The review queue: the trials an explorer filter matched, one at a time, the transcript and stages beside the
decision panel. A decision (reviewed or excluded, with labels and a human category) is one request whose answer is
the next trial; `u` undoes the newest decision; `p`/`n` walk the queue whatever was decided. A trial one reviewer
has open is skipped by every other reviewer's queue for ten minutes (domain.review_queue.CLAIM_MINUTES), and a
decision on it from another queue is refused meanwhile (409).

Members and owners review (viewers: 403). A refused decision re-renders the trial (422 or 409) with every refusal at
once in the error summary at the top, each under its input, in the page's words, and writes nothing; a queue, trial
or label that is not the reviewer's answers 404, nothing written. Each request is one transaction: the decision, the
claim on the trial shown next and the reads of its page.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, abort, flash, g, make_response, redirect, request, url_for

from blueprints.auth import current_reviewer, require_role
from blueprints.trials import explorer_url, parsed_query
from domain.errors import DomainError
from domain.review_queue import CLAIM_MINUTES, LABEL_KEYS, NEW_CATEGORY, QUEUE_MOST, UNDO_MOST
from domain.triage import LABEL_PALETTE
from queries.review_queue import (
    QueueRow,
    decided_count,
    failure_categories,
    find_queue,
    live_claim,
    neighbours,
    open_position,
    panel_choices,
)
from queries.triage import trial_triage
from queries.trials import explorer_choices, matching_ids, trial_detail
from web.database import request_session
from web.fields import in_page_words
from web.htmx import redirect_after_write, render, wants_fragment
from web.params import given_args
from web.review_queue import DecisionForm, queue_filters, remember_reason, remembered_reason
from web.transcript import log_view, transcript
from web.trial_filters import FILTER_PARAMS, filter_chips
from writes.review_queue import claim_at, decide, start_queue, undo_last

bp = Blueprint("review_queue", __name__)


def _queue(queue_id: uuid.UUID, trial_id: uuid.UUID | None = None) -> QueueRow:
    """The reviewer's queue (with the position of `trial_id` in it), or 404 (another reviewer's, another
    organization's, or none)."""
    queue = find_queue(request_session(), queue_id, g.user_id, trial_id)
    if queue is None:
        abort(404, description=f"No review queue {queue_id} of yours in this organization.")
    return queue


def _still_matching(queue: QueueRow) -> Any:
    """The queue's filters as conditions on `evaluation_trials t`: where a decision moves on to."""
    return queue_filters(queue.filters).for_session(request_session()).conditions("t")


def _place(queue_id: uuid.UUID, position: int | None) -> str:
    """The URL of the queue's trial at `position`, or of its end when None."""
    if position is None:
        return url_for("review_queue.done", queue_id=queue_id)
    return url_for("review_queue.show", queue_id=queue_id, position=position)


def _list_url(queue: QueueRow) -> str:
    """The explorer's list the queue was started from."""
    return explorer_url({k: v for k, v in queue.filters.items() if k != "sort" or v != "failed"})


def _start_url(queue: QueueRow) -> str:
    """Where "Start a new queue with these filters" posts."""
    return url_for("review_queue.start") + "?" + urlencode(queue.filters)


def _committed(response: Response) -> Response:
    """The request's one commit, once its answer is rendered (a claim on the trial it shows included)."""
    request_session().commit()
    return response


@bp.post("/queue")
def start():
    """Start a queue over the trials the explorer's parameters (in the query string) match, at most QUEUE_MOST of
    them in the explorer's order, and open its first trial that no other reviewer holds."""
    require_role("member")
    args = {name: value for name, value in given_args().items() if name in FILTER_PARAMS or name == "sort"}
    query = parsed_query(args)
    session, reviewer = request_session(), current_reviewer()
    ids = matching_ids(session, query.filters(), query.sort, QUEUE_MOST + 1)
    if not ids:
        flash("No trials match these filters: there is nothing to review.")
        return redirect_after_write(explorer_url(args))
    summary = ", ".join(chip.label for chip in filter_chips(args, explorer_choices(session)))
    filters = {**args, "sort": query.sort}
    queue_id = start_queue(session, reviewer, filters, summary, ids[:QUEUE_MOST], len(ids) > QUEUE_MOST)
    first = open_position(session, queue_id, reviewer.user_id, 0)
    session.commit()
    return redirect_after_write(_place(queue_id, first))


@bp.get("/queue/<uuid:queue_id>")
def resume(queue_id: uuid.UUID):
    """Back into a queue: its first trial that still matches its filters and no other reviewer holds."""
    require_role("member")
    queue = _queue(queue_id)
    found = open_position(request_session(), queue.id, g.user_id, 0, still=_still_matching(queue))
    return redirect(_place(queue.id, found), 303)


@bp.get("/queue/<uuid:queue_id>/<int:position>")
def show(queue_id: uuid.UUID, position: int):
    """The queue's trial at `position` (1-based): taken for the reviewer for CLAIM_MINUTES unless another reviewer
    holds it, which the page then says ("Being reviewed by …")."""
    require_role("member")
    return _committed(queue_page(_queue(queue_id), position))


# The decision form's fields the panel draws no input of its own for (a button's value, hidden fields, a label's
# checkbox, which a page never sends refused): their refusals link to nothing.
UNLINKED = {"decision": None, "label_id": None, "shown_label_id": None, "shown_category": None}


def queue_page(
    queue: QueueRow,
    position: int,
    *,
    status: int = 200,
    form: DecisionForm | None = None,
    error: str | None = None,
    said: str | None = None,
) -> Response:
    """The page (or, for htmx, the #queue fragment) of the queue's trial at `position`, claimed for the reviewer
    when nobody else holds it (the caller commits); a refused decision's `form` (drawn as it was sent, each
    refusal under its input) or `error` (a refusal no input holds), both in the error summary at the top; `said`
    what the last action did."""
    session, reviewer = request_session(), current_reviewer()
    trial_id, mine = claim_at(session, reviewer, queue.id, position)
    if trial_id is None:
        abort(404, description=f"No trial at position {position} of this queue (it holds {queue.size}).")
    held_by = None if mine else live_claim(session, trial_id)
    detail, triage = trial_detail(session, trial_id), trial_triage(session, trial_id)
    if detail is None or triage is None:  # pragma: no cover - claim_at found it in this transaction
        abort(404)
    choices = panel_choices(session, LABEL_KEYS)
    previous, following = neighbours(session, queue.id, reviewer.user_id, position)
    response = render(
        "queue/show.html",
        "queue",
        status=status,
        queue=queue,
        position=position,
        previous=previous,
        next=following,
        trial=detail,
        triage=triage,
        transcript=transcript(detail.steps, imported=detail.imported, offered=detail.offered_tools),
        log=log_view(detail.log, imported=detail.imported),
        labels=choices.labels,
        on={label.id for label in triage.labels},
        categories=choices.categories,
        new_category=NEW_CATEGORY,
        reason=triage.reason if triage.review_state == "excluded" else remembered_reason(reviewer.org_id),
        palette=LABEL_PALETTE,
        held_by=held_by,
        claim_minutes=CLAIM_MINUTES,
        form=form,
        summary=(form.summary(UNLINKED) if form else []) + ([(None, error)] if error else []),
        said=said,
        fragment=wants_fragment(),
        list_url=_list_url(queue),
    )
    if wants_fragment():
        response.headers["HX-Push-Url"] = _place(queue.id, position)
    return response


def _moved(queue: QueueRow, position: int | None, said: str) -> Response:
    """After a decision or an undo: the trial at `position` (the queue's end when None), in this same answer for
    htmx (its URL pushed), else a redirect to it with `said` flashed."""
    if not wants_fragment():
        flash(said)
        return make_response(redirect(_place(queue.id, position), 303))
    if position is None:
        response = done_page(queue, said=said)
        response.headers["HX-Push-Url"] = _place(queue.id, None)
        return response
    return queue_page(queue, position, said=said)


@bp.post("/queue/<uuid:queue_id>/trials/<uuid:trial_id>")
def decide_view(queue_id: uuid.UUID, trial_id: uuid.UUID):
    """Decide on a trial of the queue (reviewed or excluded, labels, human category) and answer with the next trial
    that still matches the queue's filters and no other reviewer holds."""
    require_role("member")
    session, reviewer = request_session(), current_reviewer()
    queue = _queue(queue_id, trial_id)
    position = queue.position
    if position is None:
        abort(404, description=f"No trial {trial_id} in this review queue.")
    form = DecisionForm()
    decision = form.decision_input(lambda: failure_categories(session))
    if decision is None:
        return _committed(queue_page(queue, position, status=422, form=form))
    try:
        decide(session, reviewer, queue.id, trial_id, decision)
    except DomainError as error:
        session.rollback()
        if error.status == 404:
            abort(404, description=str(error))
        field = getattr(error, "field", "")  # a rule of the write about one input: said under it
        if field in form:
            form[field].errors.append(in_page_words(str(error), field))
            return _committed(queue_page(queue, position, status=error.status, form=form))
        return _committed(queue_page(queue, position, status=error.status, form=form, error=str(error)))
    if decision.state == "excluded":
        remember_reason(reviewer.org_id, decision.reason)
    following = open_position(session, queue.id, reviewer.user_id, position, still=_still_matching(queue))
    queue = replace(queue, undoable=min(queue.undoable + 1, UNDO_MOST), last_position=position)
    what = "marked reviewed" if decision.state == "reviewed" else "excluded from training exports"
    return _committed(_moved(queue, following, f"Trial {position} of {queue.size} {what}. (u undoes it.)"))


@bp.post("/queue/<uuid:queue_id>/undo")
def undo(queue_id: uuid.UUID):
    """Undo the queue's newest decision and answer with its trial, as the decision found it."""
    require_role("member")
    session, reviewer = request_session(), current_reviewer()
    queue = _queue(queue_id)
    try:
        trial_id = undo_last(session, reviewer, queue.id)
    except DomainError as error:
        session.rollback()
        if error.status == 404:
            abort(404, description=str(error))
        at = _given_position(queue)
        if at is None:
            return _committed(done_page(queue, status=error.status, error=str(error)))
        return _committed(queue_page(queue, at, status=error.status, error=str(error)))
    queue = _queue(queue_id, trial_id)  # its decisions changed
    said = f"Undone: trial {queue.position} of {queue.size} is back as your decision found it."
    return _committed(_moved(queue, queue.position, said))


def _given_position(queue: QueueRow) -> int | None:
    """The position the reviewer was at (the undo form's `position`), when it is one of the queue's."""
    raw = request.form.get("position", "")
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= queue.size else None


@bp.get("/queue/<uuid:queue_id>/done")
def done(queue_id: uuid.UUID):
    """The end of a queue: how many of its trials are decided, and the ways on."""
    require_role("member")
    return done_page(_queue(queue_id))


def done_page(queue: QueueRow, *, status: int = 200, error: str | None = None, said: str | None = None) -> Response:
    """The queue's end (the #queue fragment for htmx)."""
    session = request_session()
    return render(
        "queue/done.html",
        "queue",
        status=status,
        queue=queue,
        decided=decided_count(session, queue.id),
        last=open_position(session, queue.id, g.user_id, queue.size + 1, backwards=True),
        error=error,
        said=said,
        fragment=wants_fragment(),
        list_url=_list_url(queue),
        again_url=_start_url(queue),
    )
