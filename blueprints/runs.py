"""Runs area: a run's progress, pass@k and every trial; Reset (offered on finished runs) asks to confirm first."""

import uuid

from flask import Blueprint, abort, flash, g, request, url_for

from blueprints.auth import require_role
from domain.errors import RunNotResettable
from domain.vocabulary import RESETS
from models import EvaluationRun
from queries.runs import RunDetail, latest_reset, run_detail
from queries.usage import run_usage
from queries.workers import worker_activity
from web.database import request_session
from web.elsewhere import abort_not_here
from web.forms import ResetForm
from web.htmx import redirect_after_write, render
from writes.once import submitted
from writes.runs import check_resettable, queue_once, reset_run

bp = Blueprint("runs", __name__)

RESET_HELP = {
    "new_workspace": "Same world, fresh workspace: the new run draws the same world as this one.",
    "new_world": "A newly drawn world: the new run draws another world.",
}


def _detail_or_404(run_id: uuid.UUID) -> RunDetail:
    detail = run_detail(request_session(), run_id)
    if detail is None:
        abort_not_here("run", run_id, f"No run {run_id} in this organization.")
    return detail


@bp.get("/runs/<uuid:run_id>")
def show(run_id: uuid.UUID):
    """The run page; htmx polls its live block every 2 s while the run is queued or running."""
    detail = _detail_or_404(run_id)
    usage = run_usage(request_session(), run_id)
    return render(
        "runs/show.html",
        "run_status",
        detail=detail,
        progress=detail.progress(),
        workers=worker_activity(request_session()) if detail.run.status == "queued" else None,
        reset_modes=RESETS,
        reset_help=RESET_HELP,
        usage=usage,
    )


@bp.get("/runs/<uuid:run_id>/reset")
def confirm_reset(run_id: uuid.UUID):
    """The confirmation step of a Reset (works without JavaScript): what the new run will be, and a Confirm button."""
    require_role("member")
    detail = _detail_or_404(run_id)
    form = ResetForm(formdata=None)
    form.mode.data = mode = _mode_or_400()
    refusal = _refusal(detail)
    earlier = latest_reset(request_session(), run_id)
    form.seen.data = earlier.id if earlier else None
    return render(
        "runs/reset.html",
        status=409 if refusal else 200,
        detail=detail,
        form=form,
        mode=mode,
        help=RESET_HELP[mode],
        refusal=refusal,
        earlier=earlier,
    )


def _mode_or_400() -> str:
    mode = request.args.get("mode", "")
    if mode not in RESETS:
        abort(400, description=f"mode must be one of {', '.join(RESETS)}.")
    return mode


def _refusal(detail: RunDetail) -> str | None:
    """Why this run cannot be reset now, or None."""
    if detail.imported:
        return "This run holds imported results: its agent ran in another harness, so no worker here can run it again."
    try:
        check_resettable(detail.run)
    except RunNotResettable as error:
        return str(error)
    return None


@bp.post("/runs/<uuid:run_id>/reset")
def reset(run_id: uuid.UUID):
    """Enqueue a new run against the same environment version (new_workspace or new_world) and go to it.

    Refused with 409 and nothing written while the run is queued or running, or when it holds imported results; a
    second POST of the same confirmation (its submission key) goes to the run the first one queued."""
    require_role("member")
    session = request_session()
    run = session.get(EvaluationRun, (g.org_id, run_id))
    if run is None:
        abort(404, description=f"No run {run_id} in this organization.")
    form = ResetForm()
    if not form.validate():
        abort(400, description=form.error)
    key = form.submission_key.data
    earlier = latest_reset(session, run_id)
    if earlier is not None and earlier.id != form.seen.data and submitted(session, EvaluationRun, key) is None:
        flash("This confirmation was already used: the run was reset since it was shown. Nothing new was queued.")
        return redirect_after_write(url_for("runs.show", run_id=earlier.id))
    try:
        check_resettable(run)
        new_run, new = queue_once(session, key, lambda: reset_run(session, run, form.mode.data, submission_key=key))
    except RunNotResettable as error:
        session.rollback()
        abort(409, description=str(error))
    session.commit()
    if not new:
        flash("This reset was already confirmed: here is the run it queued (nothing new was queued).")
    return redirect_after_write(url_for("runs.show", run_id=new_run.id))
