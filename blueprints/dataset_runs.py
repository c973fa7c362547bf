"""Dataset runs area: the organization's dataset runs with the start form, and one dataset run's page (live
progress, pass@k and mean reward with task-clustered intervals, its tasks, capability gap and partial rewards, and
"retry the tasks that ended in errors"), read from the dataset run's rollup rows."""

from __future__ import annotations

import uuid

from flask import Blueprint, abort, flash, g, url_for

from blueprints.auth import require_role
from domain import task_stats, task_verdict
from domain.errors import NotFoundInOrg, NotRunnableHere, RunNotResettable
from models import DatasetRun
from queries.dataset_runs import (
    FINISHED,
    DatasetRunView,
    dataset_run_choices,
    dataset_run_view,
    list_dataset_runs,
    stage_pipeline,
)
from web.charts import pass_at_k_chart
from web.database import request_session
from web.forms import StartDatasetRunForm
from web.htmx import redirect_after_write, render
from web.params import optional_uuid, page_number
from writes.dataset_runs import retry_errored_tasks, start_dataset_run

bp = Blueprint("dataset_runs", __name__)

TASK_ROWS = 100  # task rows a page of the table shows (`?page=`); the API lists every task
LISTED = 100  # dataset runs the list shows, newest first


def _list_page(form: StartDatasetRunForm, status: int = 200, block: str | None = None):
    session = request_session()
    versions, evaluators = dataset_run_choices(session)
    return render(
        "dataset_runs/index.html",
        block,
        status=status,
        dataset_runs=list_dataset_runs(session, limit=LISTED),
        listed=LISTED,
        versions=versions,
        evaluators=evaluators,
        form=form,
    )


@bp.get("/dataset-runs")
def index():
    """The organization's dataset runs, newest first, and the form that starts one (`?datasetVersionId=` picks its
    dataset version, as a dataset page's "Run an evaluator" link does)."""
    form = StartDatasetRunForm()
    form.dataset_version_id.data = optional_uuid("datasetVersionId")
    return _list_page(form)


@bp.post("/dataset-runs")
def start():
    """Start a dataset run from the form and go to its page (303); invalid input redraws the form with 422 and
    writes nothing. The form's submission key makes a second POST of the same form go to the first one's run."""
    require_role("member")
    form = StartDatasetRunForm()
    version_id, config_id = form.dataset_version_id.data, form.evaluator_config_id.data
    if form.validate() and version_id and config_id:
        session = request_session()
        versions, evaluators = dataset_run_choices(session)
        if version_id not in {v.id for v in versions}:
            form.dataset_version_id.errors.append("Choose a dataset version of this organization.")
        elif config_id not in {c.id for c in evaluators}:
            form.evaluator_config_id.errors.append("Choose an evaluator configuration of this organization.")
        else:
            key = form.submission_key.data
            try:
                dataset_run, new = start_dataset_run(
                    session, version_id, config_id, form.attempt_count.data, submission_key=key
                )
            except NotRunnableHere as error:
                form.evaluator_config_id.errors.append(str(error))
            except NotFoundInOrg as error:  # removed since the form was drawn
                form.dataset_version_id.errors.append(str(error))
            else:
                session.commit()
                if not new:
                    flash(
                        "This form was already submitted: here is the dataset run it started (nothing new was queued)."
                    )
                return redirect_after_write(url_for("dataset_runs.show", dataset_run_id=dataset_run.id))
    return _list_page(form, status=422, block="start_dataset_run")


def _view_or_404(dataset_run_id: uuid.UUID, page: int = 1) -> DatasetRunView:
    view = dataset_run_view(request_session(), dataset_run_id, TASK_ROWS, (page - 1) * TASK_ROWS)
    if view is None:
        abort(404, description=f"No dataset run {dataset_run_id} in this organization.")
    if not view.tasks:
        abort(404, description=f"This dataset run has {view.totals.tasks} tasks: there is no page {page} of them.")
    return view


@bp.get("/dataset-runs/<uuid:dataset_run_id>")
def show(dataset_run_id: uuid.UUID):
    """A dataset run's page; htmx polls its live block every 2 s while it is queued or running."""
    page = page_number()
    view = _view_or_404(dataset_run_id, page)
    figures = {k: (e.value, e.low, e.high) for k, e in view.pass_at_k.items()}
    chart = None
    if view.pass_at_k[1].value is not None:
        chart = pass_at_k_chart("pass@k with 95% intervals", [(view.ref.evaluator_label, figures)])
    return render(
        "dataset_runs/show.html",
        "dataset_run_live",
        view=view,
        finished=view.status in FINISHED,
        task_rows=view.tasks,
        page=page,
        pages=-(-view.totals.tasks // TASK_ROWS),
        per_page=TASK_ROWS,
        stage_keys=stage_pipeline(request_session(), view),
        chart=chart,
        methods=task_stats,
        words=task_verdict,
    )


@bp.post("/dataset-runs/<uuid:dataset_run_id>/retry")
def retry(dataset_run_id: uuid.UUID):
    """Queue again every finished task that ended in errors (an environment or agent infrastructure error, never a
    scored failure) and go back to the page with how many; none to retry is 409 with nothing written."""
    require_role("member")
    session = request_session()
    dataset_run = session.get(DatasetRun, (g.org_id, dataset_run_id))
    if dataset_run is None:
        abort(404, description=f"No dataset run {dataset_run_id} in this organization.")
    try:
        retried = retry_errored_tasks(session, dataset_run)
    except RunNotResettable as error:
        session.rollback()
        abort(409, description=str(error))
    session.commit()
    flash(
        f"Queued again {retried} task{'s' if retried != 1 else ''} that ended in errors, each a new run of the same "
        "task in a fresh workspace."
    )
    return redirect_after_write(url_for("dataset_runs.show", dataset_run_id=dataset_run_id))
