"""Evaluation runs API: queue a run, reset it, read its status, pass@k and trials."""

from __future__ import annotations

import uuid
from typing import Any

from flask import g, jsonify, url_for

from blueprints.api import ApiError, bp, json_object, uuid_field
from blueprints.auth import require_role
from commands.runs import NotFoundInOrg, reset_run, start_run
from db import request_session
from domain.errors import RunError
from models import EvaluationRun
from queries.runs import RunDetail, run_detail


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
