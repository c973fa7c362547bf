"""Datasets (migration 0040): a dataset of the organization, its immutable versions, and each version's ordered
tasks (an environment version and, for kinds that draw worlds, a fixed world seed)."""

from __future__ import annotations

import uuid

from sqlalchemy import CheckConstraint, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from domain.datasets import MAX_DATASET_TASKS
from models.base import Base, OrgRoot, OrgScoped, Timestamped, org_fk


class Dataset(OrgRoot, Timestamped, Base):
    """A named set of tasks an organization evaluates agents on; its tasks live in its versions."""

    __tablename__ = "datasets"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")


class DatasetVersion(OrgScoped, Timestamped, Base):
    """One immutable version of a dataset: its number, how many tasks, and the sha256 of its ordered tasks (the same
    tasks are the same version; a trigger forbids edits)."""

    __tablename__ = "dataset_versions"
    __table_args__ = (
        UniqueConstraint("organization_id", "dataset_id", "version"),
        UniqueConstraint("organization_id", "dataset_id", "tasks_sha256"),
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("tasks_sha256 ~ '^[0-9a-f]{64}$'", name="tasks_sha256_hex"),
        CheckConstraint(f"task_count BETWEEN 1 AND {MAX_DATASET_TASKS}", name="task_count_range"),
        org_fk("dataset_id", "datasets"),
    )

    dataset_id: Mapped[uuid.UUID]
    version: Mapped[int] = mapped_column(Integer)
    tasks_sha256: Mapped[str] = mapped_column(String(64))
    task_count: Mapped[int] = mapped_column(Integer)


class DatasetTask(OrgScoped, Base):
    """One task of a dataset version, at its position (1..): an environment version and its world seed (None for a
    Harbor-task version, one task by itself). A version holds a task once."""

    __tablename__ = "dataset_tasks"
    __table_args__ = (
        UniqueConstraint("organization_id", "dataset_version_id", "position"),
        UniqueConstraint(
            "organization_id",
            "dataset_version_id",
            "environment_version_id",
            "world_seed",
            name="uq_dataset_tasks_task_once_per_version",
            postgresql_nulls_not_distinct=True,
        ),
        CheckConstraint("position >= 1", name="position_positive"),
        CheckConstraint("world_seed IS NULL OR world_seed >= 0", name="world_seed_range"),
        Index("ix_dataset_tasks_organization_id_environment_version_id", "organization_id", "environment_version_id"),
        org_fk("dataset_version_id", "dataset_versions"),
        org_fk("environment_version_id", "environment_versions"),
    )

    dataset_version_id: Mapped[uuid.UUID]
    position: Mapped[int] = mapped_column(Integer)
    environment_version_id: Mapped[uuid.UUID]
    world_seed: Mapped[int | None] = mapped_column(Integer)
