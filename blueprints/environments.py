"""Environments area: the list, one environment (versions, start-run form, runs), and its Export page."""

import uuid

from flask import Blueprint, abort, flash, g, redirect, url_for

from blueprints.auth import require_role
from domain.errors import NotFoundInOrg, NotRunnableHere
from queries.environments import (
    catalog_counts,
    environment_detail,
    find_environment,
    list_environments,
)
from queries.export_counts import export_counts, trl_preference_rows
from web.charts import pass_at_1_trend_chart
from web.checklist import first_steps, hide
from web.database import request_session
from web.export_options import export_options
from web.forms import StartRunForm
from web.htmx import redirect_after_write, render
from web.limits import expensive
from web.params import optional_uuid, page_number
from web.urls import export_links
from writes.runs import queue_once, start_run

bp = Blueprint("environments", __name__)


@bp.get("/")
def home():
    """The dashboard starts at the environments list."""
    return redirect(url_for("environments.index"))


@bp.get("/environments")
def index():
    """The organization's environments with runs, trials, latest pass@1, mean reward and a reward trend."""
    page = page_number()
    session = request_session()
    environments, more = list_environments(session, page)
    trends = {env.id: pass_at_1_trend_chart(env.name, env.trend, 300, 170) for env in environments if env.trend}
    return render(
        "environments/index.html",
        "environment_list",
        environments=environments,
        page=page,
        more=more,
        trends=trends,
        steps=first_steps(g.org_id, catalog_counts(session)),
    )


@bp.post("/checklist/hide")
def hide_checklist():
    """Hide the first-run checklist for the member (web.checklist keeps it: at their next login too)."""
    hide(g.org_id)
    return redirect_after_write(url_for("environments.index"))


def _detail_or_404(environment_id: uuid.UUID, before: uuid.UUID | None = None):
    detail = environment_detail(request_session(), environment_id, before)
    if detail is None:
        abort(404, description=f"No environment {environment_id} in this organization.")
    return detail


@bp.get("/environments/<uuid:environment_id>")
def show(environment_id: uuid.UUID):
    """An environment: immutable versions with pass@k, the start-run form (`evaluatorConfigId` chooses its
    evaluator), and recent runs (paged)."""
    detail = _detail_or_404(environment_id, optional_uuid("before"))
    trend = pass_at_1_trend_chart(detail.environment.name, detail.trend) if detail.trend else None
    form = StartRunForm(evaluator_config_id=optional_uuid("evaluatorConfigId"))  # "Start a run with it" chooses one
    return render("environments/show.html", "recent_runs", detail=detail, form=form, trend=trend)


@bp.post("/environments/<uuid:environment_id>/runs")
def start(environment_id: uuid.UUID):
    """Start a run from the form; invalid input re-renders the form in place with 422 and writes nothing.

    The form's submission key makes a second POST of the same form (a double click) go to the first one's run."""
    require_role("member")
    detail = _detail_or_404(environment_id)
    form = StartRunForm()
    version_id, config_id = form.environment_version_id.data, form.evaluator_config_id.data
    key, attempts = form.submission_key.data, form.attempt_count.data
    if form.validate() and version_id and config_id:
        session = request_session()
        try:
            if version_id not in {v.id for v in detail.versions}:
                raise NotFoundInOrg("Choose a version of this environment.")
            run, new = queue_once(
                session, key, lambda: start_run(session, version_id, config_id, attempts, submission_key=key)
            )
        except NotFoundInOrg as error:
            form.environment_version_id.errors.append(str(error))
        except NotRunnableHere as error:
            field = form.evaluator_config_id if error.field == "evaluatorConfigId" else form.environment_version_id
            field.errors.append(str(error))
        else:
            session.commit()
            if not new:
                flash("This form was already submitted: here is the run it started (nothing new was queued).")
            return redirect_after_write(url_for("runs.show", run_id=run.id))
    return render("environments/show.html", "start_run", status=422, detail=detail, form=form)


def _environment_or_404(environment_id: uuid.UUID):
    environment = find_environment(request_session(), environment_id)
    if environment is None:
        abort(404, description=f"No environment {environment_id} in this organization.")
    return environment


@bp.get("/environments/<uuid:environment_id>/export")
def export(environment_id: uuid.UUID):
    """Environments → Export: every kind URL for this environment (and its ATIF and TRL variants) with the lines
    each holds now, its filename and a curl line; the trials a reviewer excluded are named with their number and
    left out of counts and links, or held in both with includeExcluded=true."""
    include_excluded = export_options().include_excluded
    environment = _environment_or_404(environment_id)
    counts = export_counts(request_session(), g.org_id, environment_id, include_excluded=include_excluded)
    filters = {"environmentId": str(environment_id)}
    return render(
        "environments/export.html",
        environment=environment,
        kinds=export_links(filters, include_excluded=include_excluded),
        counts=counts,
        include_excluded=include_excluded,
        trl_pairs_url=url_for("environments.trl_pairs", environment_id=environment_id)
        + ("?includeExcluded=true" if include_excluded else ""),
    )


@bp.get("/environments/<uuid:environment_id>/export/trl-pairs")
@expensive()
def trl_pairs(environment_id: uuid.UUID):
    """The rows of the environment's TRL preference export, counted by building them as the download does (the Export
    page loads it after the page; without JavaScript its link opens it)."""
    include_excluded = export_options().include_excluded
    environment = _environment_or_404(environment_id)
    rows = trl_preference_rows(request_session(), g.org_id, environment_id, include_excluded=include_excluded)
    return render("environments/trl_pairs.html", "trl_pairs", env=environment, rows=rows)
