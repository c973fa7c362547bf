"""A Harbor dataset's write: a folder of Harbor task folders (read by domain.harbor_dataset) becomes one environment
per task folder, named after it, whose version is the one these files already are or a new one (add_harbor_task),
and one dataset version of those tasks in folder order (add_dataset_version: the same tasks, the same version).

An environment of a task folder's name is used when it holds no version or only Harbor-task versions; one holding
versions of another kind (built-in, MCP, imported results) is refused naming the folder (409), before anything is
written. Everything happens in the caller's transaction, so a refusal anywhere writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from domain.datasets import DatasetRefused, TaskInput
from domain.harbor_dataset import read_dataset_tasks, survey_dataset_archive
from models.datasets import Dataset, DatasetVersion
from models.environments import Environment, EnvironmentVersion
from writes.datasets import add_dataset_version
from writes.environments import add_harbor_task, create_environment

IMPORT_LOCK_SEED = 44  # hashtextextended(org, 44): one Harbor dataset import at a time in an organization
KIND_WORDS = {"builtin": "built-in versions", "mcp": "MCP versions", "external": "versions of imported results"}


@dataclass(frozen=True)
class ImportedTask:
    """One task folder of the import: the environment named after it and its version, and whether each is new."""

    folder: str
    environment: Environment
    version: EnvironmentVersion
    new_environment: bool
    new_version: bool


@dataclass(frozen=True)
class HarborDatasetImport:
    """What an import made or found: the dataset version, whether it is new, and its tasks in order."""

    version: DatasetVersion
    new: bool
    tasks: tuple[ImportedTask, ...]


def _environments(session: Session, folders: tuple[str, ...]) -> dict[str, Environment]:
    """The environments named like the task folders, or DatasetRefused (409) for one holding another kind's
    versions."""
    found = {e.name: e for e in session.scalars(select(Environment).where(Environment.name.in_(folders)))}
    kind = func.coalesce(EnvironmentVersion.spec["kind"].astext, "builtin")
    others = session.execute(
        select(Environment.name, func.min(kind))
        .join(
            EnvironmentVersion,
            (EnvironmentVersion.organization_id == Environment.organization_id)
            & (EnvironmentVersion.environment_id == Environment.id),
        )
        .where(Environment.name.in_(folders), kind != "harbor-task")
        .group_by(Environment.name)
        .order_by(Environment.name)
    ).first()
    if others is not None:
        name, other = others
        raise DatasetRefused(
            name,
            f"names the environment {name!r}, which holds {KIND_WORDS.get(other, other + ' versions')}, not "
            "Harbor tasks: rename the task folder or that environment",
            status=409,
        )
    return found


def import_harbor_dataset(session: Session, dataset: Dataset, data: bytes) -> HarborDatasetImport:
    """Import the tar or tar.gz `data` of a folder of Harbor task folders as a version of `dataset`: TaskRefused
    naming the entry when the archive or a task cannot be kept, DatasetRefused naming the task folder whose name an
    environment of another kind holds; the archive's headers are read whole before anything is written."""
    layout = survey_dataset_archive(data)
    session.execute(  # two imports at once: the second waits, then finds the first's environments
        text("SELECT pg_advisory_xact_lock(hashtextextended(:org, :seed))"),
        {"org": str(dataset.organization_id), "seed": IMPORT_LOCK_SEED},
    )
    environments = _environments(session, layout.folders)
    imported: dict[str, ImportedTask] = {}
    for folder, tree in read_dataset_tasks(data, layout):
        environment = environments.get(folder)
        if environment is None:
            environment = create_environment(session, dataset.organization_id, folder)
        version, new = add_harbor_task(session, environment, tree, folder)
        imported[folder] = ImportedTask(folder, environment, version, folder not in environments, new)
    tasks = [TaskInput(imported[folder].version.id, None, folder, folder) for folder in layout.folders]
    dataset_version, new = add_dataset_version(session, dataset, tasks)
    return HarborDatasetImport(dataset_version, new, tuple(imported[folder] for folder in layout.folders))
