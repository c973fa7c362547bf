"""Evaluation runs API: queue a run, reset it, read its status, pass@k and trials."""

from __future__ import annotations

import uuid

from flask import g, jsonify, url_for

from blueprints.api import ApiError, bp, json_object
from blueprints.api.contract import Reply, operation, write
from blueprints.api.schemas import EvaluationRun, EvaluationRunCreate, EvaluationRunReset, Trial, validated
from models import EvaluationRun as EvaluationRunRow
from queries.runs import RunDetail, run_detail
from web.database import request_session
from writes.runs import reset_run, start_run

QUEUED = {202: Reply("Queued", EvaluationRun, headers=("Location",))}
RUN_REFUSALS = {
    404: "No such environment version or evaluator configuration in this organization",
    422: "The environment version or the evaluator holds imported results (it ran in another harness): no worker "
    "here can run it; `error` names the field, nothing was written",
}
IMPORTED_RUN = {409: "The run holds imported results: its agent ran in another harness; nothing was written"}


def run_answer(detail: RunDetail) -> EvaluationRun:
    """A run as the API shows it: status, attemptCount, resetMode, ids, passAtK and every trial."""
    return EvaluationRun.of(detail.run, trials=[Trial.of(t) for t in detail.trials])


def _accepted(run: EvaluationRunRow):
    """Answer 202 with the queued run and its URL."""
    detail = run_detail(request_session(), run.id)
    if detail is None:  # the run was just written in this transaction
        raise RuntimeError(f"run {run.id} vanished")
    response = jsonify(run_answer(detail).to_json())
    response.status_code = 202
    response.headers["Location"] = url_for("api.get_run", run_id=run.id)
    return response


@bp.post("/evaluation-runs")
@write("createEvaluationRun", QUEUED, body=EvaluationRunCreate, error_reasons=RUN_REFUSALS)
def create_run():
    """Queue a run: {"environmentVersionId", "evaluatorConfigId", "attemptCount"?} → 202 with the run."""
    body = validated(EvaluationRunCreate, json_object())
    session = request_session()
    run = start_run(session, body.environment_version_id, body.evaluator_config_id, body.attempt_count)
    session.commit()
    return _accepted(run)


@bp.get("/evaluation-runs/<uuid:run_id>")
@operation("getEvaluationRun", {200: Reply("The run", EvaluationRun)}, errors=(404,))
def get_run(run_id: uuid.UUID):
    """A run with its status, passAtK and trials."""
    detail = run_detail(request_session(), run_id)
    if detail is None:
        raise ApiError(404, "not found", f"no evaluation run {run_id}")
    return jsonify(run_answer(detail).to_json())


@bp.post("/evaluation-runs/<uuid:run_id>/reset")
@write("resetEvaluationRun", QUEUED, body=EvaluationRunReset, errors=(404,), error_reasons=IMPORTED_RUN)
def reset(run_id: uuid.UUID):
    """Enqueue a new run on the same environment version: {"mode": "new_workspace" | "new_world"} → 202."""
    raw = json_object()
    session = request_session()
    run = session.get(EvaluationRunRow, (g.org_id, run_id))
    if run is None:
        raise ApiError(404, "not found", f"no evaluation run {run_id}")
    body = validated(EvaluationRunReset, raw)
    new_run = reset_run(session, run, body.mode)
    session.commit()
    return _accepted(new_run)
