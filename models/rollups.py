"""Rollups kept in the transaction that records a trial, so aggregate pages cost O(categories)."""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, ForeignKeyConstraint, String
from sqlalchemy.orm import Mapped, mapped_column

from domain.outcome import FAILURE_CATEGORY_CHARS, STAGE_KEY_CHARS
from models.base import Base


def _version_fk() -> ForeignKeyConstraint:
    """Return the (organization_id, environment_version_id) foreign key every rollup row carries."""
    return ForeignKeyConstraint(
        ["organization_id", "environment_version_id"],
        ["environment_versions.organization_id", "environment_versions.id"],
    )


class FailureCategoryCount(Base):
    """How many trials of an environment version ended in each failure_category."""

    __tablename__ = "failure_category_counts"
    __table_args__ = (_version_fk(),)

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    environment_version_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    failure_category: Mapped[str] = mapped_column(String(FAILURE_CATEGORY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger, default=0)


class StageMetricRollup(Base):
    """Per environment version and stage_* key: trials that reported it, how many passed, the value sum."""

    __tablename__ = "stage_metric_rollups"
    __table_args__ = (_version_fk(),)

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    environment_version_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    stage_key: Mapped[str] = mapped_column(String(STAGE_KEY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger, default=0)
    passed: Mapped[int] = mapped_column(BigInteger, default=0)
    value_sum: Mapped[float] = mapped_column(default=0.0)


class EnvironmentVersionStats(Base):
    """Per environment version: runs, trials, rollouts by reward class, reward sum, lowest and highest reward.

    Export counts, mean rewards and whether a preference pair exists all read
    from this one row instead of scanning the version's history.
    """

    __tablename__ = "environment_version_stats"
    __table_args__ = (_version_fk(),)

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    environment_version_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    runs: Mapped[int] = mapped_column(BigInteger, default=0)
    trials: Mapped[int] = mapped_column(BigInteger, default=0)
    rollouts: Mapped[int] = mapped_column(BigInteger, default=0)
    scored: Mapped[int] = mapped_column(BigInteger, default=0)
    successes: Mapped[int] = mapped_column(BigInteger, default=0)
    zero_rewards: Mapped[int] = mapped_column(BigInteger, default=0)
    reward_sum: Mapped[float] = mapped_column(default=0.0)
    min_reward: Mapped[float | None]
    max_reward: Mapped[float | None]


def _evaluator_fk() -> ForeignKeyConstraint:
    """Return the (organization_id, evaluator_config_id) foreign key of the per-evaluator rollups."""
    return ForeignKeyConstraint(
        ["organization_id", "evaluator_config_id"], ["evaluator_configs.organization_id", "evaluator_configs.id"]
    )


class EvaluatorCategoryCount(Base):
    """How many trials of an environment version by one evaluator configuration ended in each failure_category
    ('' for those with none: their sum is the evaluator's trials of the version).

    Written by the trigger of migration 0027 in the statement that inserts the trials: never by the app.
    """

    __tablename__ = "evaluator_category_counts"
    __table_args__ = (_version_fk(), _evaluator_fk())

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    environment_version_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    evaluator_config_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    failure_category: Mapped[str] = mapped_column(String(FAILURE_CATEGORY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger)


class EvaluatorStageRollup(Base):
    """Per environment version, evaluator configuration and stage_* key: trials that reported it, how many passed,
    the value sum (as StageMetricRollup counts them). Written by the trigger of migration 0027, never by the app."""

    __tablename__ = "evaluator_stage_rollups"
    __table_args__ = (_version_fk(), _evaluator_fk())

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    environment_version_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    evaluator_config_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    stage_key: Mapped[str] = mapped_column(String(STAGE_KEY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger)
    passed: Mapped[int] = mapped_column(BigInteger)
    value_sum: Mapped[float]
