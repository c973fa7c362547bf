"""Dataset runs API: run an evaluator on every task of a dataset version, read its progress and figures, retry the
tasks that ended in errors."""

from __future__ import annotations

import uuid
from typing import Annotated

from flask import g, jsonify, request, url_for

from blueprints.api import ApiError, bp, json_object
from blueprints.api.contract import Reply, operation, write
from blueprints.api.dataset_run_schemas import DatasetRun, DatasetRunCreate, DatasetRunRetried, DatasetRunSummary
from blueprints.api.schemas import validated
from domain.rules import UUID_RULE
from models import DatasetRun as DatasetRunRow
from queries.dataset_runs import dataset_run_view, list_dataset_runs
from web.database import request_session
from web.validation import QueryModel
from writes.dataset_runs import retry_errored_tasks, start_dataset_run

REFUSALS = {
    404: "No such dataset version or evaluator configuration in this organization",
    422: "The evaluator is imported (its agent ran in another harness): no worker here can run it; nothing was written",
}
NOTHING_TO_RETRY = {409: "No finished task ended in an infrastructure error; nothing was written"}


def _answer(dataset_run_id: uuid.UUID) -> DatasetRun:
    view = dataset_run_view(request_session(), dataset_run_id)
    if view is None:
        raise ApiError(404, "not found", f"no dataset run {dataset_run_id}")
    return DatasetRun.of_view(view)


@bp.post("/dataset-runs")
@write(
    "createDatasetRun",
    {202: Reply("Queued: one evaluation run per task", DatasetRun, headers=("Location",))},
    body=DatasetRunCreate,
    error_reasons=REFUSALS,
)
def create_dataset_run():
    """Run an evaluator on every task of a dataset version: {"datasetVersionId", "evaluatorConfigId",
    "attemptCount"?} → 202; one evaluation run per task is queued, each with the task's world seed."""
    body = validated(DatasetRunCreate, json_object())
    session = request_session()
    dataset_run, _ = start_dataset_run(session, body.dataset_version_id, body.evaluator_config_id, body.attempt_count)
    answer = _answer(dataset_run.id)
    session.commit()
    response = jsonify(answer.to_json())
    response.status_code = 202
    response.headers["Location"] = url_for("api.get_dataset_run", dataset_run_id=dataset_run.id)
    return response


class DatasetRunQuery(QueryModel):
    """GET /dataset-runs: optionally the dataset runs of one dataset version."""

    dataset_version_id: Annotated[uuid.UUID | None, UUID_RULE] = None


@bp.get("/dataset-runs")
@operation(
    "listDatasetRuns",
    {200: Reply("The newest dataset runs", list[DatasetRunSummary])},
    query=DatasetRunQuery,
    errors=(400,),
)
def list_dataset_runs_api():
    """The organization's newest 100 dataset runs (of one dataset version with `datasetVersionId`), newest first."""
    query = validated(DatasetRunQuery, request.args.to_dict())
    found = list_dataset_runs(request_session(), query.dataset_version_id)
    return jsonify([DatasetRunSummary.of(ref).to_json() for ref in found])


@bp.get("/dataset-runs/<uuid:dataset_run_id>")
@operation("getDatasetRun", {200: Reply("The dataset run", DatasetRun)}, errors=(404,))
def get_dataset_run(dataset_run_id: uuid.UUID):
    """A dataset run: status, progress, passAtK, meanReward and every task with its evaluation run."""
    return jsonify(_answer(dataset_run_id).to_json())


@bp.post("/dataset-runs/<uuid:dataset_run_id>/retry")
@write(
    "retryDatasetRunErrors",
    {202: Reply("The tasks that ended in errors are queued again", DatasetRunRetried)},
    errors=(404,),
    error_reasons=NOTHING_TO_RETRY,
)
def retry_dataset_run(dataset_run_id: uuid.UUID):
    """Queue again every finished task that ended in an environment or agent infrastructure error (never a scored
    failure), each a new run of the same task in a fresh workspace → 202 with how many."""
    session = request_session()
    found = session.get(DatasetRunRow, (g.org_id, dataset_run_id))
    if found is None:
        raise ApiError(404, "not found", f"no dataset run {dataset_run_id}")
    retried = retry_errored_tasks(session, found)
    answer = DatasetRunRetried(retried=retried, dataset_run=_answer(dataset_run_id))
    session.commit()
    return jsonify(answer.to_json()), 202
