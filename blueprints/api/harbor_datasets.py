"""Harbor datasets API: a folder of Harbor task folders, uploaded as a tar.gz, becomes one environment per task
folder and a version of the dataset (writes.harbor_datasets)."""

from __future__ import annotations

import uuid

from flask import jsonify, request
from sqlalchemy import select

from blueprints.api import ApiError, bp
from blueprints.api.contract import Reply, created, write
from blueprints.api.dataset_schemas import HarborDatasetTask, HarborDatasetVersion
from blueprints.api.datasets import refusal
from domain.datasets import MAX_DATASET_TASKS, DatasetRefused
from domain.harbor_dataset import MAX_DATASET_ENTRIES, MAX_DATASET_TREE_BYTES, MAX_DATASET_UPLOAD_BYTES
from domain.harbor_task import MAX_ENTRIES, MAX_TREE_BYTES, TaskRefused
from models import Dataset as DatasetRow
from web.database import request_session
from web.limits import expensive
from writes.harbor_datasets import import_harbor_dataset

MB = 1024 * 1024
DATASET_UPLOAD = {  # bytes to a generated client (format: binary)
    "type": "string",
    "format": "binary",
    "description": "A folder of Harbor task folders (what `harbor run -p` takes: each sub-folder holding "
    "instruction.md, task.toml, environment/, tests/, solution/) as a tar.gz or tar, at most "
    f"{MAX_DATASET_UPLOAD_BYTES // MB} MB as sent and {MAX_DATASET_TREE_BYTES // MB} MB of files uncompressed: "
    f"at most {MAX_DATASET_TASKS} task folders and {MAX_DATASET_ENTRIES} entries, each task at most "
    f"{MAX_TREE_BYTES // MB} MB of files and {MAX_ENTRIES} entries",
}


@bp.post("/datasets/<uuid:dataset_id>/versions/harbor")
@write(
    "uploadHarborDataset",
    {
        200: Reply("These tasks are already a version of this dataset", HarborDatasetVersion),
        **created(HarborDatasetVersion),
    },
    body=Reply("A folder of Harbor task folders", DATASET_UPLOAD, "application/gzip"),
    errors=(404, 429),
    error_reasons={
        400: "An archive or a task that cannot be kept (`field` names the entry: a path in the archive, .., a link, "
        "`<task-folder>/instruction.md` missing, `<task-folder>/task.toml`, a task folder scattered through the "
        "archive or whose name cannot name an environment; `body` for the archive itself: no task folder, over "
        f"{MAX_DATASET_TASKS} task folders, over {MAX_DATASET_TREE_BYTES // MB} MB uncompressed); nothing was stored",
        409: "A task folder (`field`) names an environment that holds versions of another kind than Harbor tasks; "
        "nothing was stored",
    },
)
@expensive()
def upload_harbor_dataset(dataset_id: uuid.UUID):
    """A folder of Harbor task folders (a tar.gz) becomes a version of the dataset, one environment per task folder.

    Each task folder's environment is named after it and its version is the one these files already are, else a new
    one; the dataset version holds the tasks in folder order (the same tasks, the same version: 200)."""
    session = request_session()
    dataset = session.scalar(select(DatasetRow).where(DatasetRow.id == dataset_id))
    if dataset is None:
        raise ApiError(404, "not found", f"no dataset {dataset_id}")
    data = request.get_data(cache=False)
    if not data:
        raise ApiError(400, "empty body", "send the folder of task folders as a tar.gz (tar -czf - -C parent folder)")
    try:
        imported = import_harbor_dataset(session, dataset, data)
    except TaskRefused as refused:
        raise ApiError(400, "invalid task", str(refused), field=refused.entry or "body") from None
    except DatasetRefused as refused:
        raise refusal(refused) from None
    tasks = [
        HarborDatasetTask.of(
            task,
            environment_id=task.environment.id,
            environment_version_id=task.version.id,
            version=task.version.version,
        )
        for task in imported.tasks
    ]
    reply = jsonify(HarborDatasetVersion.of(imported.version, tasks=tasks).to_json())
    session.commit()
    return reply, 201 if imported.new else 200
