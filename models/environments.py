"""Environments, their immutable versions, and evaluator configurations (agent + attemptCount)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column, relationship

from domain.vocabulary import MAX_ATTEMPTS, MIN_ATTEMPTS
from models.base import Base, OrgRoot, OrgScoped, Timestamped, org_fk


def once_per_submission(table: str) -> Index:
    """One row per submitted page form: a second POST with the form's key finds the first one's row (migration
    0034; writes.once)."""
    return Index(
        f"ux_{table}_org_submission_key",
        "organization_id",
        "submission_key",
        unique=True,
        postgresql_where=text("submission_key IS NOT NULL"),
    )


class Environment(OrgRoot, Timestamped, Base):
    """A task world agents are evaluated in (e.g. admin-console); its behaviour lives in its versions."""

    __tablename__ = "environments"
    __table_args__ = (UniqueConstraint("organization_id", "name"), once_per_submission("environments"))

    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    submission_key: Mapped[uuid.UUID | None]


class EnvironmentVersion(OrgScoped, Timestamped, Base):
    """One immutable version of an environment: its spec and the spec's sha256 (a trigger forbids edits).

    `spec` shows env names only (values "***"); the values are sealed in `secret_env` (domain.secret_env).
    """

    __tablename__ = "environment_versions"
    __table_args__ = (
        UniqueConstraint("organization_id", "environment_id", "version"),
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("spec_sha256 ~ '^[0-9a-f]{64}$'", name="spec_sha256_hex"),
        org_fk("environment_id", "environments"),
        once_per_submission("environment_versions"),
    )

    environment_id: Mapped[uuid.UUID]
    version: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB)
    spec_sha256: Mapped[str] = mapped_column(String(64))
    secret_env: Mapped[bytes | None] = mapped_column(LargeBinary)
    submission_key: Mapped[uuid.UUID | None]

    environment: Mapped[Environment] = relationship(viewonly=True, lazy="raise")


class EvaluatorConfig(OrgRoot, Timestamped, Base):
    """How to evaluate: which agent, how many independent attempts (attemptCount 1-8), and budgets.

    `agent` shows env names only (values "***"); the values are sealed in `secret_env`; a trigger forbids
    changing either (a changed secret is a new evaluator configuration).
    """

    __tablename__ = "evaluator_configs"
    __table_args__ = (
        UniqueConstraint("organization_id", "name"),
        CheckConstraint(f"attempt_count BETWEEN {MIN_ATTEMPTS} AND {MAX_ATTEMPTS}", name="attempt_count_range"),
        CheckConstraint("max_steps >= 1", name="max_steps_positive"),
        CheckConstraint("timeout_s > 0", name="timeout_positive"),
        CheckConstraint("step >= 0", name="step_non_negative"),
        once_per_submission("evaluator_configs"),
    )

    name: Mapped[str] = mapped_column(String(200))
    agent: Mapped[dict[str, Any]] = mapped_column(JSONB)
    attempt_count: Mapped[int] = mapped_column(Integer)
    max_steps: Mapped[int] = mapped_column(Integer, default=30)
    timeout_s: Mapped[float] = mapped_column(default=60.0)
    secret_env: Mapped[bytes | None] = mapped_column(LargeBinary)
    submission_key: Mapped[uuid.UUID | None]
    # The training checkpoint this evaluator evaluates and its step (migration 0041): the dataset page's chart.
    checkpoint: Mapped[str | None] = mapped_column(String(200))
    step: Mapped[int | None] = mapped_column(BigInteger)
