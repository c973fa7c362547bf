"""Datasets (migration 0040): a dataset of the organization, its immutable versions, and each version's ordered
tasks (an environment version and, for kinds that draw worlds, a fixed world seed); dataset runs (migration 0041):
one evaluator on every task of a version, and their per-task rollup."""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, CheckConstraint, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from domain.datasets import MAX_DATASET_TASKS
from domain.vocabulary import MAX_ATTEMPTS, MIN_ATTEMPTS
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


class DatasetRun(OrgRoot, Timestamped, Base):
    """One evaluator configuration on every task of a dataset version: attemptCount trials per task, one evaluation
    run per task (evaluation_runs.dataset_run_id). Immutable; its figures are its tasks' rollup rows."""

    __tablename__ = "dataset_runs"
    __table_args__ = (
        CheckConstraint(f"attempt_count BETWEEN {MIN_ATTEMPTS} AND {MAX_ATTEMPTS}", name="attempt_count_range"),
        CheckConstraint(f"task_count BETWEEN 1 AND {MAX_DATASET_TASKS}", name="task_count_range"),
        org_fk("dataset_version_id", "dataset_versions"),
        org_fk("evaluator_config_id", "evaluator_configs"),
        # The leaderboard: each evaluator's newest dataset run of a version.
        Index(
            "ix_dataset_runs_version_evaluator_created",
            "organization_id",
            "dataset_version_id",
            "evaluator_config_id",
            "created_at",
            "id",
        ),
        Index(
            "ux_dataset_runs_org_submission_key",
            "organization_id",
            "submission_key",
            unique=True,
            postgresql_where=text("submission_key IS NOT NULL"),
        ),
    )

    dataset_version_id: Mapped[uuid.UUID]
    evaluator_config_id: Mapped[uuid.UUID]
    attempt_count: Mapped[int] = mapped_column(Integer)
    task_count: Mapped[int] = mapped_column(Integer)
    submission_key: Mapped[uuid.UUID | None]


class DatasetRunTask(Base):
    """The rollup of one task of a dataset run: its current evaluation run (a retry points it at a new one and
    starts the counts again) and that run's trials, successes, scored trials, reward sum and sum of squares,
    trials that ended in infrastructure errors, tokens, the start of its task text, and its trials per failure
    category and per stage_* key.

    writes.runs.RECORD_TRIAL adds to it in the statement that records the trial: never a scan of trials.
    """

    __tablename__ = "dataset_run_tasks"
    __table_args__ = (
        CheckConstraint("position >= 1", name="position_positive"),
        CheckConstraint(
            "trials >= 0 AND successes BETWEEN 0 AND trials AND scored BETWEEN 0 AND trials AND errors >= 0 "
            "AND retries >= 0 AND tokens >= 0",
            name="counts",
        ),
        org_fk("dataset_run_id", "dataset_runs"),
        org_fk("environment_version_id", "environment_versions"),
        org_fk("evaluation_run_id", "evaluation_runs"),
        Index("ux_dataset_run_tasks_evaluation_run", "organization_id", "evaluation_run_id", unique=True),
        # Each task's counts by an index-only scan: the leaderboard and a dataset run's totals (migration 0041).
        Index(
            "ix_dataset_run_tasks_tallies",
            "organization_id",
            "dataset_run_id",
            "position",
            postgresql_include=[
                "trials",
                "successes",
                "scored",
                "reward_sum",
                "reward_square_sum",
                "tokens",
                "evaluation_run_id",
            ],
        ),
    )

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    dataset_run_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    environment_version_id: Mapped[uuid.UUID]
    world_seed: Mapped[int | None] = mapped_column(Integer)
    evaluation_run_id: Mapped[uuid.UUID]
    retries: Mapped[int] = mapped_column(Integer, server_default="0", default=0)
    trials: Mapped[int] = mapped_column(Integer, server_default="0", default=0)
    successes: Mapped[int] = mapped_column(Integer, server_default="0", default=0)
    scored: Mapped[int] = mapped_column(Integer, server_default="0", default=0)
    reward_sum: Mapped[float] = mapped_column(server_default="0", default=0.0)
    reward_square_sum: Mapped[float] = mapped_column(server_default="0", default=0.0)
    errors: Mapped[int] = mapped_column(Integer, server_default="0", default=0)
    tokens: Mapped[int] = mapped_column(BigInteger, server_default="0", default=0)
    task: Mapped[str | None] = mapped_column(Text)
    # Trials per failure_category, and per stage_* key [trials, passed, value sum]: the capability gap and partial
    # rewards of the dataset run.
    categories: Mapped[dict[str, int]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"), default=dict)
    stages: Mapped[dict[str, list[float]]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"), default=dict)
    # Every change of the row adds to it (a trial, a retry, a trial's category replaced): the state queries.kept
    # keeps a dataset run's computed figures under.
    revision: Mapped[int] = mapped_column(BigInteger, server_default="0", default=0)
