"""Datasets as the API shows them: the organization's datasets with their latest version, one dataset with its
versions, a version's ordered tasks with their environments, and what a task list's environment versions are."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, true
from sqlalchemy.orm import Session

from models.datasets import Dataset, DatasetTask, DatasetVersion
from models.environments import Environment, EnvironmentVersion
from queries.rows import all_by_name


@dataclass(frozen=True)
class DatasetSummary:
    """A dataset with its latest version's number and task count (None before its first version)."""

    id: uuid.UUID
    name: str
    description: str
    created_at: datetime
    latest_version: int | None
    task_count: int | None


@dataclass(frozen=True)
class DatasetTaskRow:
    """One task of a dataset version, with the environment and version number its environment version is."""

    position: int
    environment_version_id: uuid.UUID
    environment_id: uuid.UUID
    environment_name: str
    version: int
    kind: str
    world_seed: int | None


def _latest() -> Any:
    """Each dataset's newest version (a lateral subquery keyed by the dataset)."""
    return (
        select(DatasetVersion.version, DatasetVersion.task_count)
        .where(DatasetVersion.organization_id == Dataset.organization_id, DatasetVersion.dataset_id == Dataset.id)
        .order_by(DatasetVersion.version.desc())
        .limit(1)
        .lateral()
    )


def list_datasets(session: Session, dataset_id: uuid.UUID | None = None) -> list[DatasetSummary]:
    """The organization's datasets by name (or the one `dataset_id`), each with its latest version."""
    latest = _latest()
    query = (
        select(
            Dataset.id,
            Dataset.name,
            Dataset.description,
            Dataset.created_at,
            latest.c.version.label("latest_version"),
            latest.c.task_count,
        )
        .outerjoin(latest, true())
        .order_by(Dataset.name)
    )
    if dataset_id is not None:
        query = query.where(Dataset.id == dataset_id)
    return all_by_name(DatasetSummary, session.execute(query))


def find_dataset(session: Session, dataset_id: uuid.UUID) -> DatasetSummary | None:
    """One dataset of the organization (None for an id it does not have)."""
    found = list_datasets(session, dataset_id)
    return found[0] if found else None


def dataset_versions(session: Session, dataset_id: uuid.UUID, version: int | None = None) -> list[DatasetVersion]:
    """A dataset's versions, oldest first (or the one numbered `version`)."""
    query = select(DatasetVersion).where(DatasetVersion.dataset_id == dataset_id).order_by(DatasetVersion.version)
    if version is not None:
        query = query.where(DatasetVersion.version == version)
    return list(session.scalars(query))


def dataset_tasks(session: Session, dataset_version: DatasetVersion) -> list[DatasetTaskRow]:
    """A dataset version's tasks in order, each with its environment."""
    query = (
        select(
            DatasetTask.position,
            DatasetTask.environment_version_id,
            Environment.id.label("environment_id"),
            Environment.name.label("environment_name"),
            EnvironmentVersion.version,
            func.coalesce(EnvironmentVersion.spec["kind"].astext, "builtin").label("kind"),
            DatasetTask.world_seed,
        )
        .join(
            EnvironmentVersion,
            (EnvironmentVersion.organization_id == DatasetTask.organization_id)
            & (EnvironmentVersion.id == DatasetTask.environment_version_id),
        )
        .join(
            Environment,
            (Environment.organization_id == EnvironmentVersion.organization_id)
            & (Environment.id == EnvironmentVersion.environment_id),
        )
        .where(DatasetTask.dataset_version_id == dataset_version.id)
        .order_by(DatasetTask.position)
    )
    return all_by_name(DatasetTaskRow, session.execute(query))


def specs_of_versions(session: Session, version_ids: set[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """The spec of each of `version_ids` the organization has (ids it has not are missing from the answer)."""
    rows = session.execute(
        select(EnvironmentVersion.id, EnvironmentVersion.spec).where(EnvironmentVersion.id.in_(version_ids))
    )
    return {row.id: row.spec for row in rows}
