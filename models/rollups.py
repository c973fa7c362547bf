"""Rollups kept in the transaction that records a trial, so aggregate pages cost O(categories)."""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, ForeignKeyConstraint, String
from sqlalchemy.orm import Mapped, mapped_column

from domain.outcome import FAILURE_CATEGORY_CHARS, STAGE_KEY_CHARS
from models.base import Base, org_fk


def version_fks() -> tuple[ForeignKeyConstraint, ...]:
    """The foreign key of every rollup row: (organization_id, environment_version_id)."""
    return (org_fk("environment_version_id", "environment_versions"),)


def evaluator_fks() -> tuple[ForeignKeyConstraint, ...]:
    """The foreign keys of a per-evaluator rollup row: to the version and to the evaluator configuration."""
    return (*version_fks(), org_fk("evaluator_config_id", "evaluator_configs"))


class VersionRollup:
    """A rollup row of an environment version: its key starts (organization_id, environment_version_id)."""

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True, sort_order=-2)
    environment_version_id: Mapped[uuid.UUID] = mapped_column(primary_key=True, sort_order=-2)


class EvaluatorRollup(VersionRollup):
    """A rollup row of an environment version by one evaluator configuration: its key goes on with the latter."""

    evaluator_config_id: Mapped[uuid.UUID] = mapped_column(primary_key=True, sort_order=-1)


class FailureCategoryCount(VersionRollup, Base):
    """How many trials of an environment version ended in each failure_category."""

    __tablename__ = "failure_category_counts"
    __table_args__ = version_fks()

    failure_category: Mapped[str] = mapped_column(String(FAILURE_CATEGORY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger, default=0)


class StageMetricRollup(VersionRollup, Base):
    """Per environment version and stage_* key: trials that reported it, how many passed, the value sum."""

    __tablename__ = "stage_metric_rollups"
    __table_args__ = version_fks()

    stage_key: Mapped[str] = mapped_column(String(STAGE_KEY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger, default=0)
    passed: Mapped[int] = mapped_column(BigInteger, default=0)
    value_sum: Mapped[float] = mapped_column(default=0.0)


class EnvironmentVersionStats(VersionRollup, Base):
    """Per environment version: runs, trials, rollouts by reward class, reward sum, lowest and highest reward.

    Export counts, mean rewards and whether a preference pair exists all read
    from this one row instead of scanning the version's history.
    """

    __tablename__ = "environment_version_stats"
    __table_args__ = version_fks()

    runs: Mapped[int] = mapped_column(BigInteger, default=0)
    trials: Mapped[int] = mapped_column(BigInteger, default=0)
    rollouts: Mapped[int] = mapped_column(BigInteger, default=0)
    scored: Mapped[int] = mapped_column(BigInteger, default=0)
    successes: Mapped[int] = mapped_column(BigInteger, default=0)
    zero_rewards: Mapped[int] = mapped_column(BigInteger, default=0)
    reward_sum: Mapped[float] = mapped_column(default=0.0)
    min_reward: Mapped[float | None]
    max_reward: Mapped[float | None]


class EvaluatorCategoryCount(EvaluatorRollup, Base):
    """How many trials of an environment version by one evaluator configuration ended in each failure_category
    ('' for those with none: their sum is the evaluator's trials of the version).

    Written by the trigger of migration 0027 in the statement that inserts the trials: never by the app.
    """

    __tablename__ = "evaluator_category_counts"
    __table_args__ = evaluator_fks()

    failure_category: Mapped[str] = mapped_column(String(FAILURE_CATEGORY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger)


class EvaluatorStageRollup(EvaluatorRollup, Base):
    """Per environment version, evaluator configuration and stage_* key: trials that reported it, how many passed,
    the value sum (as StageMetricRollup counts them). Written by the trigger of migration 0027, never by the app."""

    __tablename__ = "evaluator_stage_rollups"
    __table_args__ = evaluator_fks()

    stage_key: Mapped[str] = mapped_column(String(STAGE_KEY_CHARS), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger)
    passed: Mapped[int] = mapped_column(BigInteger)
    value_sum: Mapped[float]
