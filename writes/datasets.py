"""Datasets' writes: a dataset, and a version of it from a checked task list (the same tasks answer the version
that already holds them). The rules that need the database live here: every environment version is the
organization's, a world seed goes only where the kind draws worlds."""

from __future__ import annotations

import uuid

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from domain.datasets import DatasetRefused, TaskInput, misplaced_seeds, refuse_any, repeated_tasks, tasks_sha256
from domain.specs import draws_worlds, ran_elsewhere
from models.base import new_id
from models.datasets import Dataset, DatasetTask, DatasetVersion
from queries.datasets import specs_of_versions


def create_dataset(session: Session, org_id: uuid.UUID, name: str, description: str = "") -> Dataset:
    """Add a dataset to the organization (its name unique there; the caller answers a taken one)."""
    dataset = Dataset(organization_id=org_id, id=new_id(), name=name, description=description)
    session.add(dataset)
    session.flush()
    return dataset


def check_tasks(session: Session, tasks: list[TaskInput]) -> None:
    """Refuse (DatasetRefused; DatasetRefusals naming each when there are several) a list with a task twice, an
    environment version the organization has not (404), an imported version, or a world seed where the kind draws
    none (or none where it does); several in the order of the tasks they name."""
    refusals = repeated_tasks(tasks)
    specs = specs_of_versions(session, {t.environment_version_id for t in tasks})
    for task in tasks:
        spec = specs.get(task.environment_version_id)
        if spec is None:
            refusals.append(
                DatasetRefused(
                    task.version_field,
                    f"names no environment version of this organization: {task.environment_version_id}",
                    status=404,
                )
            )
        elif ran_elsewhere(spec):
            refusals.append(
                DatasetRefused(
                    task.version_field,
                    "is a version of imported results (it ran in another harness) and cannot be a task",
                )
            )
    runnable = {version_id: draws_worlds(spec) for version_id, spec in specs.items() if not ran_elsewhere(spec)}
    refusals += misplaced_seeds(tasks, runnable)
    position: dict[str, int] = {}  # the first task each field names: the refusals in the list's order
    for i, task in enumerate(tasks):
        position.setdefault(task.version_field, i)
        position.setdefault(task.seed_field, i)
    refuse_any(sorted(refusals, key=lambda refused: position.get(refused.field, len(tasks))))


def add_dataset_version(session: Session, dataset: Dataset, tasks: list[TaskInput]) -> tuple[DatasetVersion, bool]:
    """The version holding `tasks` (checked with check_tasks first), and whether it is new: the same ordered tasks
    are the version this dataset already has; others are a new version, numbered after the newest."""
    check_tasks(session, tasks)
    digest = tasks_sha256(tasks)
    session.execute(  # two POSTs of one list at once: the second waits, then finds the first's version
        select(Dataset.id)
        .where(Dataset.organization_id == dataset.organization_id, Dataset.id == dataset.id)
        .with_for_update()
    )
    mine = (DatasetVersion.organization_id == dataset.organization_id) & (DatasetVersion.dataset_id == dataset.id)
    same = session.scalar(select(DatasetVersion).where(mine, DatasetVersion.tasks_sha256 == digest))
    if same is not None:
        return same, False
    latest = session.scalar(select(DatasetVersion.version).where(mine).order_by(DatasetVersion.version.desc()))
    version = DatasetVersion(
        organization_id=dataset.organization_id,
        id=new_id(),
        dataset_id=dataset.id,
        version=(latest or 0) + 1,
        tasks_sha256=digest,
        task_count=len(tasks),
    )
    session.add(version)
    session.flush()
    session.execute(
        insert(DatasetTask),
        [
            {
                "organization_id": dataset.organization_id,
                "id": new_id(),
                "dataset_version_id": version.id,
                "position": position,
                "environment_version_id": task.environment_version_id,
                "world_seed": task.world_seed,
            }
            for position, task in enumerate(tasks, start=1)
        ],
    )
    return version, True
