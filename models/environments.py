"""Environments, their immutable versions, and evaluator configurations (agent + attemptCount)."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKeyConstraint, Integer, String, Text, UniqueConstraint, func, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship

from models.base import Base, OrgRoot, OrgScoped, Timestamped, new_id
from worker.agents import validate_agent
from worker.environments import validate_spec

MIN_ATTEMPTS, MAX_ATTEMPTS = 1, 8


class Environment(OrgRoot, Timestamped, Base):
    """A task world agents are evaluated in (e.g. admin-console); its behaviour lives in its versions."""

    __tablename__ = "environments"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")


class EnvironmentVersion(OrgScoped, Timestamped, Base):
    """One immutable version of an environment: its spec and the spec's sha256 (a trigger forbids edits)."""

    __tablename__ = "environment_versions"
    __table_args__ = (
        UniqueConstraint("organization_id", "environment_id", "version"),
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("spec_sha256 ~ '^[0-9a-f]{64}$'", name="spec_sha256_hex"),
        ForeignKeyConstraint(
            ["organization_id", "environment_id"], ["environments.organization_id", "environments.id"]
        ),
    )

    environment_id: Mapped[uuid.UUID]
    version: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB)
    spec_sha256: Mapped[str] = mapped_column(String(64))

    environment: Mapped[Environment] = relationship(viewonly=True, lazy="raise")


class EvaluatorConfig(OrgRoot, Timestamped, Base):
    """How to evaluate: which agent, how many independent attempts (attemptCount 1-8), and budgets."""

    __tablename__ = "evaluator_configs"
    __table_args__ = (
        UniqueConstraint("organization_id", "name"),
        CheckConstraint(f"attempt_count BETWEEN {MIN_ATTEMPTS} AND {MAX_ATTEMPTS}", name="attempt_count_range"),
        CheckConstraint("max_steps >= 1", name="max_steps_positive"),
        CheckConstraint("timeout_s > 0", name="timeout_positive"),
    )

    name: Mapped[str] = mapped_column(String(200))
    agent: Mapped[dict[str, Any]] = mapped_column(JSONB)
    attempt_count: Mapped[int] = mapped_column(Integer)
    max_steps: Mapped[int] = mapped_column(Integer, default=30)
    timeout_s: Mapped[float] = mapped_column(default=60.0)


def spec_sha256(spec: dict[str, Any]) -> str:
    """Return the sha256 of a spec's canonical JSON (sorted keys, no spaces): equal specs, equal hashes."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def create_environment(session: Session, org_id: uuid.UUID, name: str, description: str = "") -> Environment:
    """Add an environment to the organization."""
    environment = Environment(organization_id=org_id, id=new_id(), name=name, description=description)
    session.add(environment)
    session.flush()
    return environment


def create_environment_version(session: Session, environment: Environment, spec: Any) -> EnvironmentVersion:
    """Pin a new immutable version of `environment` (numbered after the newest); SpecError when `spec` is invalid."""
    normalised = validate_spec(spec)
    latest = session.scalar(
        select(func.max(EnvironmentVersion.version)).where(
            EnvironmentVersion.organization_id == environment.organization_id,
            EnvironmentVersion.environment_id == environment.id,
        )
    )
    version = EnvironmentVersion(
        organization_id=environment.organization_id,
        id=new_id(),
        environment_id=environment.id,
        version=(latest or 0) + 1,
        spec=normalised,
        spec_sha256=spec_sha256(normalised),
    )
    session.add(version)
    session.flush()
    return version


def create_evaluator_config(
    session: Session,
    org_id: uuid.UUID,
    name: str,
    agent: Any,
    attempt_count: int,
    *,
    max_steps: int = 30,
    timeout_s: float = 60.0,
) -> EvaluatorConfig:
    """Add an evaluator configuration: the agent (validated), attemptCount and budgets."""
    config = EvaluatorConfig(
        organization_id=org_id,
        id=new_id(),
        name=name,
        agent=validate_agent(agent),
        attempt_count=attempt_count,
        max_steps=max_steps,
        timeout_s=timeout_s,
    )
    session.add(config)
    session.flush()
    return config
