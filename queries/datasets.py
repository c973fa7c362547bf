"""Datasets as the API and the pages show them: the organization's datasets with their latest version, one dataset
with its versions, a version's ordered tasks with their environments (a page of them, for a version of 10,000),
what a task list's environment versions are, the versions a task may be of, and each task's text."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, true
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

from domain.datasets import task_text
from domain.harbor_task import instruction_of
from domain.specs import validate_spec
from models.datasets import Dataset, DatasetTask, DatasetVersion
from models.environments import Environment, EnvironmentVersion
from models.evaluations import Artifact
from queries.rows import all_by_name

TASK_TAR = "application/x-tar"  # a Harbor task's stored files (writes.environments.TASK_CONTENT_TYPE)


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


def version_holding(session: Session, dataset_id: uuid.UUID, tasks_sha256: str) -> int | None:
    """The number of the dataset's version that holds the tasks of this sha256 (domain.datasets.tasks_sha256), if one
    does."""
    number: int | None = session.scalar(
        select(DatasetVersion.version).where(
            DatasetVersion.dataset_id == dataset_id, DatasetVersion.tasks_sha256 == tasks_sha256
        )
    )
    return number


def dataset_tasks(
    session: Session, dataset_version: DatasetVersion, after: int = 0, limit: int | None = None
) -> list[DatasetTaskRow]:
    """A dataset version's tasks in order, each with its environment: all of them, or the `limit` after position
    `after` (a page)."""
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
        .where(DatasetTask.dataset_version_id == dataset_version.id, DatasetTask.position > after)
        .order_by(DatasetTask.position)
        .limit(limit)
    )
    return all_by_name(DatasetTaskRow, session.execute(query))


def specs_of_versions(session: Session, version_ids: set[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """The spec of each of `version_ids` the organization has (ids it has not are missing from the answer)."""
    rows = session.execute(
        select(EnvironmentVersion.id, EnvironmentVersion.spec).where(EnvironmentVersion.id.in_(version_ids))
    )
    return {row.id: row.spec for row in rows}


@dataclass(frozen=True)
class VersionChoice:
    """An environment version a dataset task may be of: its environment, number and kind."""

    id: uuid.UUID
    environment_name: str
    version: int
    kind: str


def _versions() -> Any:
    """Environment versions with their environment's name and kind, as VersionChoice's columns."""
    kind = func.coalesce(EnvironmentVersion.spec["kind"].astext, "builtin")
    return select(
        EnvironmentVersion.id,
        Environment.name.label("environment_name"),
        EnvironmentVersion.version,
        kind.label("kind"),
    ).join(
        Environment,
        (Environment.organization_id == EnvironmentVersion.organization_id)
        & (Environment.id == EnvironmentVersion.environment_id),
    )


def version_choices(session: Session, limit: int) -> list[VersionChoice]:
    """The organization's environment versions a task may be of (imported results excepted), by environment name and
    newest version first; at most `limit`."""
    query = (
        _versions()
        .where(func.coalesce(EnvironmentVersion.spec["kind"].astext, "builtin") != "external")
        .order_by(Environment.name, Environment.id, EnvironmentVersion.version.desc())
        .limit(limit)
    )
    return all_by_name(VersionChoice, session.execute(query))


def versions_named(session: Session, version_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, VersionChoice]:
    """Each of `version_ids` the organization has, with its environment's name, number and kind."""
    wanted = set(version_ids)
    if not wanted:
        return {}
    found = all_by_name(VersionChoice, session.execute(_versions().where(EnvironmentVersion.id.in_(wanted))))
    return {choice.id: choice for choice in found}


def harbor_instructions(session: Session, tree_sha256s: Iterable[str]) -> dict[str, str]:
    """Each stored Harbor task's instruction.md by its tree's sha256 (a tree the organization has not stored is
    missing from the answer); the tars are read one at a time."""
    wanted = sorted(set(tree_sha256s))
    if not wanted:
        return {}
    rows = session.execute(
        select(Artifact.sha256, Artifact.body)
        .where(Artifact.sha256.in_(wanted), Artifact.content_type == TASK_TAR, Artifact.body.is_not(None))
        .ext(distinct_on(Artifact.sha256))
        .order_by(Artifact.sha256),
        execution_options={"yield_per": 1},
    )
    return {row.sha256: instruction_of(row.body) for row in rows}


def task_texts(session: Session, tasks: Sequence[tuple[uuid.UUID, int | None]]) -> list[str]:
    """The text each of `tasks` (environment version id, world seed) asks, in order: drawn from the seed for a
    built-in world, a Harbor task's instruction.md, words for an MCP server's (domain.datasets.task_text). Every
    version is read once, every Harbor task's files once."""
    stored = specs_of_versions(session, {version_id for version_id, _ in tasks})
    specs = {
        version_id: validate_spec(spec) if spec.get("kind", "builtin") == "builtin" else spec
        for version_id, spec in stored.items()
    }
    instructions = harbor_instructions(
        session, (spec["treeSha256"] for spec in specs.values() if spec.get("kind") == "harbor-task")
    )
    return [
        task_text(specs[version_id], seed, instructions.get(specs[version_id].get("treeSha256", "")))
        for version_id, seed in tasks
    ]
