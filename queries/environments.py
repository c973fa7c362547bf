"""Environment listings: each environment of the current organization with its newest version."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from models import Environment, EnvironmentVersion, EvaluatorConfig


@dataclass(frozen=True)
class EnvironmentSummary:
    """One row of the environments page."""

    id: uuid.UUID
    name: str
    description: str
    latest_version: int | None
    created_at: datetime


def list_environments(session: Session) -> list[EnvironmentSummary]:
    """Return every environment the session's organization can see, by name, with its latest version number."""
    latest = (
        select(func.max(EnvironmentVersion.version))
        .where(
            EnvironmentVersion.organization_id == Environment.organization_id,
            EnvironmentVersion.environment_id == Environment.id,
        )
        .scalar_subquery()
    )
    rows = session.execute(
        select(Environment.id, Environment.name, Environment.description, latest, Environment.created_at).order_by(
            Environment.name
        )
    )
    return [EnvironmentSummary(*row) for row in rows]


@dataclass(frozen=True)
class RunSummary:
    """One row of an environment's recent runs."""

    id: uuid.UUID
    version: int
    evaluator_name: str
    attempt_count: int
    reset_mode: str
    status: str
    pass_at_1: float | None
    created_at: datetime


@dataclass(frozen=True)
class EnvironmentDetail:
    """An environment with its immutable versions, the org's evaluator configs and recent runs."""

    environment: Environment
    versions: list[EnvironmentVersion]
    evaluators: list[EvaluatorConfig]
    runs: list[RunSummary]


# Newest runs of an environment: the newest `limit` of each version (one index range each), then the newest overall.
RECENT_RUNS = text(
    """
    SELECT r.id, v.version, c.name, r.attempt_count, r.reset_mode, r.status, (r.pass_at_k ->> '1')::float8,
           r.created_at
    FROM environment_versions v
    CROSS JOIN LATERAL (
        SELECT * FROM evaluation_runs er
        WHERE er.organization_id = v.organization_id AND er.environment_version_id = v.id
        ORDER BY er.created_at DESC LIMIT :limit
    ) r
    JOIN evaluator_configs c ON c.organization_id = r.organization_id AND c.id = r.evaluator_config_id
    WHERE v.organization_id = :org AND v.environment_id = :environment_id
    ORDER BY r.created_at DESC, r.id DESC
    LIMIT :limit
    """
)


def environment_detail(session: Session, environment_id: uuid.UUID, runs_limit: int = 20) -> EnvironmentDetail | None:
    """Return the environment page's data, or None when the session's organization has no such environment."""
    environment = session.scalar(select(Environment).where(Environment.id == environment_id))
    if environment is None:
        return None
    org = environment.organization_id
    versions = session.scalars(
        select(EnvironmentVersion)
        .where(EnvironmentVersion.organization_id == org, EnvironmentVersion.environment_id == environment.id)
        .order_by(EnvironmentVersion.version.desc())
    ).all()
    evaluators = session.scalars(
        select(EvaluatorConfig).where(EvaluatorConfig.organization_id == org).order_by(EvaluatorConfig.name)
    ).all()
    runs = session.execute(RECENT_RUNS, {"org": org, "environment_id": environment.id, "limit": runs_limit}).all()
    return EnvironmentDetail(environment, list(versions), list(evaluators), [RunSummary(*row) for row in runs])
