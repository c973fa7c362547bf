"""Environments area: the list of the organization's environments and each environment's page."""

import uuid

from flask import Blueprint, abort, redirect, request, url_for

from blueprints.auth import require_role
from blueprints.htmx import redirect_after_write, render
from db import request_session
from models.runs import NotFoundInOrg, RunError, start_run
from queries.environments import environment_detail, list_environments

bp = Blueprint("environments", __name__)


@bp.get("/")
def home():
    """The dashboard starts at the environments list."""
    return redirect(url_for("environments.index"))


@bp.get("/environments")
def index():
    """List the current organization's environments (or say how to get some)."""
    return render("environments/index.html", "environment_list", environments=list_environments(request_session()))


def _detail_or_404(environment_id: uuid.UUID):
    detail = environment_detail(request_session(), environment_id)
    if detail is None:
        abort(404, description=f"No environment {environment_id} in this organization.")
    return detail


@bp.get("/environments/<uuid:environment_id>")
def show(environment_id: uuid.UUID):
    """An environment: its immutable versions, the start-run form and recent runs."""
    return render("environments/show.html", "start_run", detail=_detail_or_404(environment_id), form={}, errors={})


@bp.post("/environments/<uuid:environment_id>/runs")
def start(environment_id: uuid.UUID):
    """Start a run from the form; invalid input re-renders the form in place with 422 and writes nothing."""
    require_role("member")
    detail = _detail_or_404(environment_id)
    form = request.form
    errors: dict[str, str] = {}
    ids = {}
    for field, label in (
        ("environment_version_id", "an environment version"),
        ("evaluator_config_id", "an evaluator configuration"),
    ):
        try:
            ids[field] = uuid.UUID(form.get(field, ""))
        except ValueError:
            errors[field] = f"Choose {label}."
    raw_count = form.get("attempt_count", "").strip()
    attempt_count = int(raw_count) if raw_count.lstrip("-").isdigit() else raw_count or None
    if not errors:
        session = request_session()
        try:
            if ids["environment_version_id"] not in {v.id for v in detail.versions}:
                raise NotFoundInOrg("Choose a version of this environment.")
            run = start_run(session, ids["environment_version_id"], ids["evaluator_config_id"], attempt_count)
        except RunError as error:
            errors["attempt_count"] = str(error)
        except NotFoundInOrg as error:
            errors["environment_version_id"] = str(error)
        else:
            session.commit()
            return redirect_after_write(url_for("runs.show", run_id=run.id))
    return render("environments/show.html", "start_run", status=422, detail=detail, form=form, errors=errors)
