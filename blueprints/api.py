"""JSON API under /api/v1 (session cookie auth; 401 JSON when anonymous; 400 names the valid values)."""

from __future__ import annotations

import uuid
from typing import Any

from flask import Blueprint, g, jsonify, request, url_for
from flask_login import current_user
from werkzeug.exceptions import BadRequest, HTTPException

from blueprints.auth import require_role
from db import request_session
from models import EvaluationRun
from models.runs import NotFoundInOrg, RunError, reset_run, start_run
from queries.runs import RunDetail, run_detail

bp = Blueprint("api", __name__, url_prefix="/api/v1")


class ApiError(HTTPException):
    """An API error with a machine-readable `error` and a human `detail`."""

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(description=detail)
        self.code, self.error = status, error


@bp.errorhandler(ApiError)
def _api_error(error: ApiError):
    return jsonify(error=error.error, detail=error.description), error.code


def json_object() -> dict[str, Any]:
    """Return the request's JSON object body, or answer 400 saying what is wrong with it."""
    try:
        body = request.get_json(force=True, silent=False)
    except BadRequest as error:
        raise ApiError(400, "invalid JSON body", "the body must be a JSON object") from error
    if not isinstance(body, dict):
        raise ApiError(400, "invalid JSON body", "the body must be a JSON object")
    return body


def uuid_field(body: dict[str, Any], name: str) -> uuid.UUID:
    """Return `body[name]` as a UUID, or answer 400 naming the field."""
    try:
        return uuid.UUID(str(body[name]))
    except KeyError as error:
        raise ApiError(400, f"missing {name}", f"{name} is required") from error
    except ValueError as error:
        raise ApiError(400, f"invalid {name}", f"{name} must be a UUID, not {body[name]!r}") from error


def run_json(detail: RunDetail) -> dict[str, Any]:
    """A run as the API shows it: status, attemptCount, resetMode, ids, passAtK and every trial."""
    run = detail.run
    return {
        "id": str(run.id),
        "status": run.status,
        "attemptCount": run.attempt_count,
        "resetMode": run.reset_mode,
        "resetOfRunId": str(run.reset_of_run_id) if run.reset_of_run_id else None,
        "environmentVersionId": str(run.environment_version_id),
        "evaluatorConfigId": str(run.evaluator_config_id),
        "passAtK": run.pass_at_k,
        "stagePassAtK": run.stage_pass_at_k,
        "error": run.error,
        "createdAt": run.created_at.isoformat(),
        "trials": [
            {
                "id": str(t.id),
                "trialNumber": t.trial_number,
                "status": t.status,
                "reward": t.reward,
                "failureCategory": t.failure_category,
                "stages": t.stages,
            }
            for t in detail.trials
        ],
    }


def _accepted(run: EvaluationRun):
    """Answer 202 with the queued run and its URL."""
    detail = run_detail(request_session(), run.id)
    response = jsonify(run_json(detail))
    response.status_code = 202
    response.headers["Location"] = url_for("api.get_run", run_id=run.id)
    return response


@bp.get("/me")
def me():
    """Who is logged in, the organization requests are scoped to, and every membership."""
    user = current_user.user
    return jsonify(
        id=str(user.id),
        email=user.email,
        name=user.name,
        organizationId=str(g.org_id),
        role=g.membership.role,
        memberships=[
            {"organizationId": str(m.organization_id), "organizationName": m.organization_name, "role": m.role}
            for m in user.memberships
        ],
    )


@bp.post("/evaluation-runs")
def create_run():
    """Queue a run: {"environmentVersionId", "evaluatorConfigId", "attemptCount"?} → 202 with the run."""
    require_role("member")
    body = json_object()
    version_id = uuid_field(body, "environmentVersionId")
    config_id = uuid_field(body, "evaluatorConfigId")
    session = request_session()
    try:
        run = start_run(session, version_id, config_id, body.get("attemptCount"))
    except RunError as error:
        raise ApiError(400, "invalid attemptCount", str(error)) from error
    except NotFoundInOrg as error:
        raise ApiError(404, "not found", str(error)) from error
    session.commit()
    return _accepted(run)


@bp.get("/evaluation-runs/<uuid:run_id>")
def get_run(run_id: uuid.UUID):
    """A run with its status, passAtK and trials."""
    detail = run_detail(request_session(), run_id)
    if detail is None:
        raise ApiError(404, "not found", f"no evaluation run {run_id}")
    return jsonify(run_json(detail))


@bp.post("/evaluation-runs/<uuid:run_id>/reset")
def reset(run_id: uuid.UUID):
    """Enqueue a new run on the same environment version: {"mode": "new_workspace" | "new_world"} → 202."""
    require_role("member")
    body = json_object()
    session = request_session()
    run = session.get(EvaluationRun, (g.org_id, run_id))
    if run is None:
        raise ApiError(404, "not found", f"no evaluation run {run_id}")
    try:
        new_run = reset_run(session, run, body.get("mode"))
    except RunError as error:
        raise ApiError(400, "invalid mode", str(error)) from error
    session.commit()
    return _accepted(new_run)
