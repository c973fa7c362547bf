"""Trials area: the trajectory viewer and the trials explorer (filters, failed-first order, chips, exports)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, abort, flash, g, request, url_for
from flask_login import current_user

from domain.triage import LABEL_PALETTE
from domain.vocabulary import REVIEW_STATES
from queries.attempts import other_attempts
from queries.exports import EXPORT_KINDS, excluded_rollouts
from queries.review_queue import live_claim
from queries.search import SEARCH_QUERY_CHARS, snippets, trial_marks
from queries.triage import list_labels, trial_triage
from queries.trials import (
    ExplorerChoices,
    TrajectoryChanged,
    UnknownCursor,
    count_trials,
    explorer_choices,
    list_trials,
    neighbour_ids,
    trajectory_file,
    trial_detail,
)
from queries.usage import recorded_totals, step_usage
from web.checklist import OPENED_FAILED_TRIAL, reached
from web.database import request_session
from web.elsewhere import abort_not_here
from web.export_options import export_options
from web.fields import PageForm
from web.htmx import redirect_after_write, render
from web.limits import expensive, searching
from web.params import given_args, parse_uuid, query_text
from web.security import PRIVATE
from web.transcript import log_view, transcript
from web.trial_diff import TrialDiffQuery, diff_view
from web.trial_filters import BASIC_FILTERS, FILTER_PARAMS, TRIAL_FILTERS, TrialListQuery, filter_chips
from web.urls import IdLink, export_links, possible_kinds
from web.validation import Invalid, parse

bp = Blueprint("trials", __name__)

SORT_LABELS = {
    "failed": "Failed first, then newest",
    "newest": "Newest",
    "reward": "Reward, lowest first",
    "-reward": "Reward, highest first",
    "steps": "Agent steps, fewest first",
    "-steps": "Agent steps, most first",
    "duration": "Duration, shortest first",
    "-duration": "Duration, longest first",
    "time": "Finished, oldest first",
    "-time": "Finished, latest first",
}


def parsed_query(args: dict[str, str]) -> TrialListQuery:
    """The explorer's parameters, or 400 with the API's message naming the bad one."""
    try:
        return parse(TrialListQuery, args)
    except Invalid as error:
        abort(400, description=error.detail)


def explorer_url(args: dict[str, str]) -> str:
    """The explorer's URL with these parameters."""
    return url_for("trials.index") + (f"?{urlencode(args)}" if args else "")


@dataclass(frozen=True)
class Chip:
    """An active filter, shown with a link that drops it."""

    label: str
    url: str


def chips(args: dict[str, str], choices: ExplorerChoices) -> list[Chip]:
    """One removable chip per active filter (per stage key of a stage filter)."""
    return [Chip(chip.label, explorer_url(chip.without)) for chip in filter_chips(args, choices)]


@bp.get("/trials/<uuid:trial_id>")
def show(trial_id: uuid.UUID):
    """One trial: its transcript (an outline beside the steps, repeats grouped, long texts folded, JSON as
    trees), log (its end, the cut said at the top), reward, stages, artifact, previous/next trial.

    With `q` (a search), the steps, task and log that match have their matches marked and the page links its
    first matching step (#step-N, where search results already point).
    """
    return trial_page(trial_id)


@dataclass(frozen=True)
class Matches:
    """The explorer's list a trial was opened from: its previous and next match, the list, and its filters."""

    previous_url: str | None
    next_url: str | None
    list_url: str
    filters: list[str]


def _matches(trial_id: uuid.UUID) -> Matches | None:
    """Previous and next match when the trial page was opened from a filtered or sorted list (its parameters are
    carried in the trial's URL); None otherwise."""
    args: dict[str, Any] = {
        name: value for name, value in given_args().items() if name in FILTER_PARAMS or name == "sort"
    }
    if not args:
        return None
    query = parsed_query(args)
    session = request_session()
    try:
        before, after = neighbour_ids(session, query.filters(), trial_id, query.sort)
    except UnknownCursor:
        return None
    choices = explorer_choices(session)
    return Matches(
        url_for("trials.show", trial_id=before, **args) if before else None,
        url_for("trials.show", trial_id=after, **args) if after else None,
        explorer_url(args),
        [chip.label for chip in filter_chips(args, choices)],
    )


@dataclass(frozen=True)
class TriageRefusal:
    """A refused triage form of a trial: which of its forms (`form_id`: the trial page's add-label, review-form,
    add-note or note-<id>, a note's edit form; on the diff the side's), the form with each refusal at its field
    (None for a form that is only a button), and the refusals no field holds, in the page's words."""

    form_id: str
    form: PageForm | None = None
    others: tuple[str, ...] = ()

    def summary(self, ids: Mapping[str, str | None]) -> list[tuple[str | None, str]]:
        """The error summary's lines: each refused field's message linked to its input (`ids`: the page's id of
        each field's input, None where the page draws none), then the others, linked to nothing."""
        lines = self.form.summary({item.name: ids.get(item.name) for item in self.form}) if self.form else []
        return lines + [(None, message) for message in self.others]


def trial_page(trial_id: uuid.UUID, *, status: int = 200, refusal: TriageRefusal | None = None):
    """The trial page (`status` and the refusal of a triage change, when one was refused: the review panel starts
    with its error summary, each message also under its input, the refused form open with what was sent); while
    another reviewer's queue holds the trial, who and until when (the claimant does not see it)."""
    session = request_session()
    detail = trial_detail(session, trial_id)
    triage = trial_triage(session, trial_id)
    if detail is None or triage is None:
        abort_not_here("trial", trial_id, f"No trial {trial_id} in this organization.")
    q = query_text("q", SEARCH_QUERY_CHARS)
    marks = trial_marks(session, trial_id, q)
    if detail.reward is None or detail.reward < 1:
        reached(g.org_id, OPENED_FAILED_TRIAL)
    claim = live_claim(session, trial_id)  # another reviewer's queue holds it: the page says who, and until when
    label_set = list_labels(session)
    on = {label.id for label in triage.labels}
    summary: list[tuple[str | None, str]] = []
    if refusal is not None:
        edited = refusal.form_id.removeprefix("note-")
        ids = {
            "label_id": "label_id" if any(label.id not in on for label in label_set) else None,
            "review_state": "review_state",
            "reason": "reason",
            "human_category": "human_category",
            "body": f"note-body-{edited}" if refusal.form_id.startswith("note-") else "note-body",
            "step": "note-step" if detail.steps and refusal.form_id == "add-note" else None,
        }
        summary = refusal.summary(ids)
    return render(
        "trials/show.html",
        held_by=claim if claim is not None and claim.user_id != current_user.user.id else None,
        status=status,
        trial=detail,
        usage=step_usage(detail.steps),
        totals=recorded_totals(session, trial_id),  # an imported ATIF trajectory's final_metrics
        q=q,
        marks=marks,
        transcript=transcript(detail.steps, imported=detail.imported, offered=detail.offered_tools),
        log=log_view(detail.log, imported=detail.imported),
        triage=triage,
        label_set=label_set,
        palette=LABEL_PALETTE,
        review_states=REVIEW_STATES,
        can_triage=g.membership.role != "viewer",
        refusal=refusal,
        triage_summary=summary,
        matches=_matches(trial_id),
    )


@bp.get("/trials/<uuid:trial_id>/trajectory.json")
def trajectory(trial_id: uuid.UUID):
    """The trial's stored trajectory document, downloaded as `<environment>-v<N>-run-<n>-trial-<n>-trajectory.json`."""
    try:
        found = trajectory_file(request_session(), trial_id)
    except TrajectoryChanged as changed:
        abort(409, description=f"The trajectory of trial {trial_id} changed after it was recorded: {changed}.")
    if found is None:
        abort(404, description=f"No trajectory for trial {trial_id} in this organization.")
    return Response(
        found.body,
        mimetype=found.content_type,
        headers={**PRIVATE, "Content-Disposition": f'attachment; filename="{found.download_name}"'},
    )


@bp.get("/trials")
@expensive(searching)
def index():
    """The trials explorer: a filter bar, removable chips, failed first (or a chosen order), keyset pages, exports."""
    args = given_args()
    query = parsed_query(args)
    include_excluded = export_options().include_excluded
    session = request_session()
    try:
        trials, cursor = list_trials(session, query.filters(), query.after, query.sort)
    except UnknownCursor:
        abort(400, description=f"after names no trial of this organization: {query.after}.")
    choices = explorer_choices(session)
    found = snippets(session, [t.id for t in trials], query.q) if query.q else {}
    filter_args = {name: value for name, value in args.items() if name in FILTER_PARAMS}
    trail = {**filter_args, "sort": query.sort}  # carried to trial pages: their previous and next match
    kinds = possible_kinds(query.filters())  # export kinds the reward filters leave something to hold
    return render(
        "trials/index.html",
        "explorer",
        trials=trials,
        cursor=cursor,
        query=query,
        args=filter_args,
        trail=trail,
        sort=query.sort,
        palette=LABEL_PALETTE,
        can_triage=g.membership.role != "viewer",
        sorts=SORT_LABELS,
        choices=choices,
        filters=TRIAL_FILTERS,
        basic_filters=BASIC_FILTERS,
        more_set=sum(1 for f in TRIAL_FILTERS if f.name not in BASIC_FILTERS and filter_args.get(f.name)),
        chips=chips(args, choices),
        next_url=explorer_url({**filter_args, "sort": query.sort, "after": str(cursor)}) if cursor else None,
        exports=export_links(filter_args, kinds, include_excluded=include_excluded),
        include_excluded=include_excluded,
        excluded=excluded_rollouts(session, g.org_id, query.filters().for_session(session)).all if kinds else 0,
        exclusions_url=explorer_url({**trail, **({} if include_excluded else {"includeExcluded": "true"})}),
        ruled_out=[kind for kind in EXPORT_KINDS if kind not in kinds],
        first_page=query.after is None,
        count_url=f"{url_for('trials.count')}?{urlencode(filter_args)}" if filter_args else url_for("trials.count"),
        q=query.q,
        snippets=found,
        trial_link=IdLink.of("trials.show", "trial_id", **trail),
        environment_link=IdLink.of("environments.show", "environment_id"),
        run_link=IdLink.of("runs.show", "run_id"),
    )


@bp.get("/trials/count")
@expensive(searching)
def count():
    """How many trials the explorer's filters match ("about N" past 10,000): the explorer loads it after the list
    (htmx), and without JavaScript its link opens this as a page."""
    args = given_args()
    query = parsed_query(args)
    found = count_trials(request_session(), query.filters())
    filter_args = {name: value for name, value in args.items() if name in FILTER_PARAMS}
    return render("trials/count.html", "count", found=found, list_url=explorer_url(filter_args))


@bp.get("/trials/diff")
def diff():
    """Two trials side by side (`a` and `b`, trial ids): outcomes and stages above, each trial's review (label, note,
    exclude: the triage forms, answered in place), then the steps aligned by tool call with the first divergence
    marked and the arguments two calls of the same tool gave differently listed in their row
    (domain.trajectory_diff). 400 when an id is missing or malformed, 404 when either is not a trial of this
    organization."""
    try:
        query = parse(TrialDiffQuery, given_args())
    except Invalid as error:
        abort(400, description=error.detail)
    return diff_page(query.a, query.b)


def diff_page(
    a_id: uuid.UUID, b_id: uuid.UUID, *, status: int = 200, side: str = "", refusal: TriageRefusal | None = None
):
    """The trial diff of `a_id` and `b_id` (`status`, and the refusal of a triage change on `side`, when a plain form
    posted from it was refused)."""
    session = request_session()
    a, b = trial_detail(session, a_id), trial_detail(session, b_id)
    for trial_id, found in ((a_id, a), (b_id, b)):
        if found is None:
            abort(404, description=f"No trial {trial_id} in this organization.")
    assert a is not None and b is not None
    labels = list_labels(session)
    reviews = [
        _diff_review(side_name, trial, a_id, b_id, labels, refusal=refusal if side_name == side else None)
        for side_name, trial in (("A", a), ("B", b))
    ]
    return render(
        "trials/diff.html", status=status, a=a, b=b, view=diff_view(a, b), reviews=reviews, palette=LABEL_PALETTE
    )


@dataclass(frozen=True)
class DiffReview:
    """One side's review panel on the trial diff: its trial's triage, the labels it can still get, the diff its
    forms answer to (`diff_args`: diffA and diffB), what the last change did, and a refused form (`refusal`, with
    its error summary's lines in `summary`)."""

    side: str
    trial: Any
    triage: Any
    unused_labels: list[Any]
    diff_args: dict[str, str]
    can_triage: bool
    message: str = ""
    refusal: TriageRefusal | None = None
    summary: list[tuple[str | None, str]] = field(default_factory=list)


def _diff_review(
    side: str,
    trial: Any,
    a_id: uuid.UUID,
    b_id: uuid.UUID,
    labels: list[Any] | None = None,
    *,
    message: str = "",
    refusal: TriageRefusal | None = None,
) -> DiffReview:
    session = request_session()
    triage = trial_triage(session, trial.id)
    if triage is None:
        abort_not_here("trial", trial.id, f"No trial {trial.id} in this organization.")
    on = {label.id for label in triage.labels}
    unused = [label for label in (list_labels(session) if labels is None else labels) if label.id not in on]
    s = side.lower()
    ids = {  # the side's inputs (its exclude form is drawn while the trial is not excluded)
        "label_id": f"diff-label-{s}" if unused else None,
        "body": f"diff-note-{s}",
        "reason": f"diff-reason-{s}" if triage.review_state != "excluded" else None,
    }
    return DiffReview(
        side,
        trial,
        triage,
        unused,
        {"diffA": str(a_id), "diffB": str(b_id)},
        g.membership.role != "viewer",
        message,
        refusal,
        refusal.summary(ids) if refusal else [],
    )


def diff_of_request(trial_id: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID, str] | None:
    """The trial diff a triage form of `trial_id` was sent from (its diffA and diffB, and which side the trial is),
    or None (the trial page's forms)."""
    a, b = parse_uuid(request.args.get("diffA", "")), parse_uuid(request.args.get("diffB", ""))
    if a is None or b is None or trial_id not in (a, b):
        return None
    return a, b, "A" if trial_id == a else "B"


def diff_review_answer(
    trial_id: uuid.UUID, *, status: int = 200, message: str = "", refusal: TriageRefusal | None = None
):
    """The answer to a triage form sent from the trial diff: for htmx, that side's review panel again with what
    happened (in place: a refusal's error summary at its top); for a plain form, the diff page (after a change, by
    a redirect to it, at the panel)."""
    a, b, side = diff_of_request(trial_id) or abort(400, description="diffA and diffB name no trial diff of it.")
    if request.headers.get("HX-Request") != "true":
        if refusal is not None:
            return diff_page(a, b, status=status, side=side, refusal=refusal)
        flash(message)
        return redirect_after_write(url_for("trials.diff", a=a, b=b, _anchor=f"review-{side.lower()}"))
    trial = trial_detail(request_session(), trial_id)
    if trial is None:
        abort_not_here("trial", trial_id, f"No trial {trial_id} in this organization.")
    review = _diff_review(side, trial, a, b, message=message, refusal=refusal)
    return render(
        "trials/diff_review.html", "diff_review", status=status, review=review, palette=LABEL_PALETTE, oob=True
    )


@bp.get("/trials/<uuid:trial_id>/attempts")
def attempts(trial_id: uuid.UUID):
    """The other attempts of a trial's task (its environment version, the same task text), newest first, each a
    link to the trial diff with this trial as A."""
    found = other_attempts(request_session(), trial_id)
    if found is None:
        abort(404, description=f"No trial {trial_id} in this organization.")
    trial = found.trial
    explorer = explorer_url({"environmentVersionId": str(trial.version_id), "task": trial.task_key})
    return render("trials/attempts.html", attempts=found, explorer=explorer)
