"""Datasets API: datasets, their immutable versions (ordered tasks, checked once) and each version's tasks."""

from __future__ import annotations

import uuid

from flask import g, jsonify
from sqlalchemy import select

from blueprints.api import ApiError, bp, json_object
from blueprints.api.contract import Reply, created, operation, write
from blueprints.api.dataset_schemas import (
    Dataset,
    DatasetCreate,
    DatasetDetail,
    DatasetTask,
    DatasetVersion,
    DatasetVersionCreate,
    DatasetVersionTasks,
)
from blueprints.api.schemas import validated
from domain.datasets import DatasetRefused, requested_tasks
from models import Dataset as DatasetRow
from queries.datasets import dataset_tasks, dataset_versions, find_dataset, list_datasets, task_texts
from web.database import request_session
from writes.datasets import add_dataset_version, create_dataset

LARGEST_VERSION = 2**31 - 1  # a PostgreSQL integer: a larger number is no version
TASKS_REFUSED = {
    400: "A task list refused (`field` names it: tasks[i].worldSeed, worldSeeds[i], count, …): empty or over 10,000 "
    "tasks, a task twice, a world seed on a Harbor-task version or none on a built-in or MCP one; nothing was written",
    404: "No such dataset, or a task's environment version (`field` names it) is not this organization's",
}


def refusal(refused: DatasetRefused) -> ApiError:
    """A refused task list as the API answers it, naming the field."""
    error = {404: "not found", 409: "name taken"}.get(refused.status, f"invalid {refused.field}")
    return ApiError(refused.status, error, str(refused), field=refused.field)


@bp.get("/datasets")
@operation("listDatasets", {200: Reply("The organization's datasets", list[Dataset])})
def list_datasets_api():
    """The organization's datasets by name, each with its latest version number and task count."""
    return jsonify([Dataset.of(d).to_json() for d in list_datasets(request_session())])


@bp.post("/datasets")
@write("createDataset", created(Dataset), body=DatasetCreate, error_reasons={409: "A dataset of that name exists"})
def create_dataset_api():
    """Create a dataset: {"name", "description"?} → 201; a taken name answers 409."""
    body = validated(DatasetCreate, json_object())
    session = request_session()
    if session.scalar(select(DatasetRow.id).where(DatasetRow.name == body.name)):
        raise ApiError(409, "name taken", f"a dataset named {body.name!r} already exists")
    dataset = create_dataset(session, g.org_id, body.name, body.description)
    reply = jsonify(Dataset.of(dataset, latest_version=None, task_count=None).to_json())
    session.commit()
    return reply, 201


@bp.get("/datasets/<uuid:dataset_id>")
@operation("getDataset", {200: Reply("The dataset and its versions", DatasetDetail)}, errors=(404,))
def get_dataset(dataset_id: uuid.UUID):
    """A dataset with every version of it, oldest first."""
    session = request_session()
    dataset = find_dataset(session, dataset_id)
    if dataset is None:
        raise ApiError(404, "not found", f"no dataset {dataset_id}")
    versions = [DatasetVersion.of(v) for v in dataset_versions(session, dataset_id)]
    return jsonify(DatasetDetail.of(dataset, versions=versions).to_json())


@bp.post("/datasets/<uuid:dataset_id>/versions")
@write(
    "createDatasetVersion",
    {200: Reply("These tasks are already a version of this dataset", DatasetVersion), **created(DatasetVersion)},
    body=DatasetVersionCreate,
    error_reasons=TASKS_REFUSED,
)
def create_dataset_version(dataset_id: uuid.UUID):
    """Pin a version of the dataset: {"tasks": [{"environmentVersionId", "worldSeed"?}]}, or {"environmentVersionId",
    "worldSeeds": [..]} or {"environmentVersionId", "count": N} (seeds 1..N) → 201; the same tasks → 200 with the
    version that holds them."""
    raw = json_object()
    session = request_session()
    dataset = session.scalar(select(DatasetRow).where(DatasetRow.id == dataset_id))
    if dataset is None:
        raise ApiError(404, "not found", f"no dataset {dataset_id}")
    try:
        version, new = add_dataset_version(session, dataset, requested_tasks(raw))
    except DatasetRefused as refused:
        raise refusal(refused) from None
    reply = jsonify(DatasetVersion.of(version).to_json())
    session.commit()
    return reply, 201 if new else 200


@bp.get("/datasets/<uuid:dataset_id>/versions/<int:version>")
@operation("getDatasetVersion", {200: Reply("The version's ordered tasks", DatasetVersionTasks)}, errors=(404,))
def get_dataset_version(dataset_id: uuid.UUID, version: int):
    """A dataset version's tasks in order, each with its environment, version number, world seed and text."""
    session = request_session()
    found = dataset_versions(session, dataset_id, version) if version <= LARGEST_VERSION else []
    if not found:
        raise ApiError(404, "not found", f"no version {version} of dataset {dataset_id}")
    rows = dataset_tasks(session, found[0])
    texts = task_texts(session, [(t.environment_version_id, t.world_seed) for t in rows])
    tasks = [DatasetTask.of(t, task=text) for t, text in zip(rows, texts, strict=True)]
    return jsonify(DatasetVersionTasks.of(found[0], tasks=tasks).to_json())
