"""The datasets API's bodies: what POST /datasets and POST /datasets/{id}/versions take, and the datasets, versions
(a Harbor dataset upload's with its task folders) and tasks they answer (beside schemas.py; the same contract builds
them into /api/v1/openapi.json)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import Field

from domain.datasets import DATASET_DESCRIPTION, DATASET_NAME, MAX_DATASET_TASKS, TASK_COUNT, WORLD_SEED
from domain.rules import UUID_RULE
from web.validation import ApiModel

Name = Annotated[str, DATASET_NAME]
WorldSeed = Annotated[int, WORLD_SEED, Field(description="The world the version draws (built-in and MCP versions)")]


class DatasetCreate(ApiModel):
    """POST /datasets: a new dataset of the organization."""

    name: Name
    description: Annotated[str, DATASET_DESCRIPTION] = ""


class DatasetTaskInput(ApiModel):
    """One task: an environment version and, for kinds that draw worlds (built-in, MCP), its world seed; a
    Harbor-task version takes none."""

    environment_version_id: Annotated[uuid.UUID, UUID_RULE]
    world_seed: WorldSeed | None = None


class DatasetVersionCreate(ApiModel):
    """POST /datasets/{datasetId}/versions: the ordered tasks, or one environment version with `worldSeeds` or
    `count` (world seeds 1..count), or a Harbor-task version alone. The same tasks answer the existing version."""

    tasks: Annotated[
        list[DatasetTaskInput] | None, Field(min_length=1, max_length=MAX_DATASET_TASKS, description="In order")
    ] = None
    environment_version_id: Annotated[
        uuid.UUID | None, UUID_RULE, Field(description="Instead of tasks: every task is of this version")
    ] = None
    world_seeds: Annotated[
        list[WorldSeed] | None, Field(min_length=1, max_length=MAX_DATASET_TASKS, description="One task per seed")
    ] = None
    count: Annotated[int | None, TASK_COUNT, Field(description="Tasks of world seeds 1..count")] = None


class Dataset(ApiModel):
    """A dataset with its latest version's number and task count (null before its first version)."""

    id: uuid.UUID
    name: str
    description: str
    created_at: datetime
    latest_version: int | None
    task_count: int | None


class DatasetVersion(ApiModel):
    """An immutable dataset version: its number, how many tasks, and the sha256 of its ordered tasks."""

    id: uuid.UUID
    dataset_id: uuid.UUID
    version: int = Field(ge=1)
    task_count: int = Field(ge=1, le=MAX_DATASET_TASKS)
    tasks_sha256: str = Field(
        pattern="^[0-9a-f]{64}$",
        description="sha256 of the ordered tasks' environment version ids and world seeds: the same tasks, the same "
        "version",
    )
    created_at: datetime


class HarborDatasetTask(ApiModel):
    """One task folder of a Harbor dataset upload: the environment named after it and the version its files are."""

    folder: str
    environment_id: uuid.UUID
    environment_version_id: uuid.UUID
    version: int = Field(ge=1, description="The environment version's number")
    new_environment: bool = Field(description="The environment was made by this upload")
    new_version: bool = Field(description="The version was made by this upload (else these files already were it)")


class HarborDatasetVersion(DatasetVersion):
    """The dataset version a Harbor dataset upload is, and its task folders in order (sorted by name)."""

    tasks: list[HarborDatasetTask]


class DatasetDetail(Dataset):
    """A dataset and every version of it, oldest first."""

    versions: list[DatasetVersion]


class DatasetTask(ApiModel):
    """One task of a dataset version, in order, with its environment and version number."""

    position: int = Field(ge=1)
    environment_version_id: uuid.UUID
    environment_id: uuid.UUID
    environment_name: str
    version: int = Field(ge=1, description="The environment version's number")
    kind: str = Field(description="builtin, mcp or harbor-task")
    world_seed: int | None = Field(description="null for a Harbor-task version (one task by itself)")
    task: str = Field(
        description="What a trial of this task is asked: a built-in world's text drawn from its seed, a Harbor task's "
        "instruction.md, or for an MCP server words saying the server draws it when the task runs"
    )


class DatasetVersionTasks(DatasetVersion):
    """A dataset version and its ordered tasks."""

    tasks: list[DatasetTask]
