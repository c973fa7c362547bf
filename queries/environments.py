"""Environment pages: the list with rollup figures and trends, one environment, and its export counts; and a
version's spec and a configuration's agent with their env values opened, as the worker runs them.

Every figure comes from environment_version_stats (one row per version) or
from index range scans of each version's newest runs, so the cost follows the
number of versions, not the size of the history.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from db.session import secrets_key_of
from domain.agents import ran_elsewhere as agent_ran_elsewhere
from domain.secret_env import open_env, row_name
from domain.specs import ran_elsewhere as spec_ran_elsewhere
from models import Environment, EnvironmentVersion, EvaluationRun, EvaluatorConfig
from models.evaluations import Artifact
from queries.rows import all_by_name
from queries.runs import run_label_sql

PAGE_SIZE = 50
TREND_RUNS = 12


@dataclass(frozen=True)
class TrendPoint:
    """A completed run on a pass@1 trend: its place in run order (created, then id), its name and its pass@1."""

    created_at: datetime
    run_id: uuid.UUID
    label: str  # the run's readable name: "admin-console v2 · novice · #3"
    pass_at_1: float

    @property
    def order(self) -> tuple[datetime, uuid.UUID]:
        """Where the run falls among runs: by creation, runs created in the same instant by id."""
        return self.created_at, self.run_id


@dataclass(frozen=True)
class LatestRun:
    """The newest completed run of an environment (ties in created_at broken by id), whose pass@1 the list shows."""

    id: uuid.UUID
    label: str
    evaluator_name: str
    pass_at_1: float | None


@dataclass(frozen=True)
class EnvironmentSummary:
    """One row of the environments page."""

    id: uuid.UUID
    name: str
    description: str
    latest_version: int | None
    runs: int
    trials: int
    mean_reward: float | None
    latest_run: LatestRun | None
    trend: dict[str, list[TrendPoint]]  # evaluator name → its newest completed runs, oldest first

    @property
    def latest_pass_at_1(self) -> float | None:
        """pass@1 of the newest completed run (see LatestRun)."""
        return self.latest_run.pass_at_1 if self.latest_run else None


# The newest completed run of each environment: the newest of each version (a backward range scan of the
# version's runs by created_at), then the newest of those; runs created in one instant (one transaction) are
# told apart by id, so the figure never changes while nobody runs anything.
ENVIRONMENT_LIST = text(
    f"""
    SELECT g.*, latest.id AS latest_run_id, latest.label AS latest_run_label,
           latest.evaluator AS latest_evaluator, latest.pass_at_1 AS latest_pass_at_1
    FROM (
        SELECT e.organization_id, e.id, e.name, e.description, max(v.version) AS latest_version,
               coalesce(sum(s.runs), 0) AS runs, coalesce(sum(s.trials), 0) AS trials,
               sum(s.reward_sum) / nullif(sum(s.scored), 0) AS mean_reward
        FROM environments e
        LEFT JOIN environment_versions v ON v.organization_id = e.organization_id AND v.environment_id = e.id
        LEFT JOIN environment_version_stats s
               ON s.organization_id = v.organization_id AND s.environment_version_id = v.id
        GROUP BY e.organization_id, e.id
        ORDER BY e.name, e.id
        LIMIT :limit OFFSET :offset
    ) g
    LEFT JOIN LATERAL (
        SELECT r.id, {run_label_sql()} AS label, c.name AS evaluator, (r.pass_at_k ->> '1')::float8 AS pass_at_1
        FROM environment_versions v
        CROSS JOIN LATERAL (
            SELECT er.id, er.pass_at_k, er.created_at, er.evaluator_config_id, er.sequence_number
            FROM evaluation_runs er
            WHERE er.organization_id = v.organization_id AND er.environment_version_id = v.id
              AND er.status = 'completed'
            ORDER BY er.created_at DESC, er.id DESC LIMIT 1
        ) r
        JOIN evaluator_configs c ON c.organization_id = v.organization_id AND c.id = r.evaluator_config_id
        JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
        WHERE v.organization_id = g.organization_id AND v.environment_id = g.id
        ORDER BY r.created_at DESC, r.id DESC LIMIT 1
    ) latest ON TRUE
    ORDER BY g.name, g.id
    """
)

# pass@1 of each evaluator's newest completed runs of each version (one backward range scan of the completed-runs-
# by-evaluator index per version and evaluator): one trend line per evaluator.
TRENDS = text(
    f"""
    SELECT v.environment_id, c.name, (r.pass_at_k ->> '1')::float8, r.created_at, r.id, {run_label_sql()}
    FROM environment_versions v
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    JOIN evaluator_configs c ON c.organization_id = v.organization_id
    CROSS JOIN LATERAL (
        SELECT er.id, er.pass_at_k, er.created_at, er.sequence_number FROM evaluation_runs er
        WHERE er.organization_id = v.organization_id AND er.environment_version_id = v.id
          AND er.evaluator_config_id = c.id AND er.status = 'completed' AND er.pass_at_k ? '1'
        ORDER BY er.created_at DESC, er.id DESC LIMIT :runs
    ) r
    WHERE v.organization_id = :org AND v.environment_id = ANY(:environment_ids)
    ORDER BY r.created_at, r.id
    """
)


def pass_at_1_trends(
    session: Session, org: uuid.UUID, environment_ids: list[uuid.UUID]
) -> dict[uuid.UUID, dict[str, list[TrendPoint]]]:
    """Per environment, per evaluator: its newest TREND_RUNS completed runs (of any version), oldest first."""
    trends: dict[uuid.UUID, dict[str, list[TrendPoint]]] = {e: {} for e in environment_ids}
    if environment_ids:  # one statement, only when there is something to draw
        rows = session.execute(TRENDS, {"org": org, "runs": TREND_RUNS, "environment_ids": environment_ids})
        for environment_id, evaluator, pass_at_1, created_at, run_id, label in rows:
            trends[environment_id].setdefault(evaluator, []).append(TrendPoint(created_at, run_id, label, pass_at_1))
    return {e: {name: points[-TREND_RUNS:] for name, points in lines.items()} for e, lines in trends.items()}


def list_environments(session: Session, page: int = 1) -> tuple[list[EnvironmentSummary], bool]:
    """One page of the organization's environments with their figures; and whether another page follows."""
    rows = session.execute(ENVIRONMENT_LIST, {"limit": PAGE_SIZE + 1, "offset": (page - 1) * PAGE_SIZE}).all()
    rows, more = rows[:PAGE_SIZE], len(rows) > PAGE_SIZE
    trends = pass_at_1_trends(session, session.info["org_id"], [row.id for row in rows])
    summaries = [
        EnvironmentSummary(
            row.id,
            row.name,
            row.description,
            row.latest_version,
            row.runs,
            row.trials,
            row.mean_reward,
            LatestRun(row.latest_run_id, row.latest_run_label, row.latest_evaluator, row.latest_pass_at_1)
            if row.latest_run_id
            else None,
            trends[row.id],
        )
        for row in rows
    ]
    return summaries, more


@dataclass(frozen=True)
class VersionSummary:
    """A version of an environment with its rollup figures and its newest completed run's pass@k."""

    id: uuid.UUID
    version: int
    spec: dict[str, Any]
    spec_sha256: str
    created_at: datetime
    runs: int
    trials: int
    mean_reward: float | None
    pass_at_k: dict[str, float] | None


@dataclass(frozen=True)
class RunSummary:
    """One row of an environment's recent runs."""

    id: uuid.UUID
    label: str
    version: int
    evaluator_name: str
    attempt_count: int
    reset_mode: str
    status: str
    pass_at_1: float | None
    mean_reward: float | None
    created_at: datetime


@dataclass(frozen=True)
class EnvironmentDetail:
    """An environment with its immutable versions, the org's evaluator configs and a page of recent runs."""

    environment: Environment
    versions: list[VersionSummary]
    evaluators: list[EvaluatorConfig]
    runs: list[RunSummary]
    older_runs_cursor: uuid.UUID | None
    trend: dict[str, list[TrendPoint]]  # evaluator name → its newest completed runs, oldest first

    @property
    def imported_ids(self) -> set[uuid.UUID]:
        """Versions and evaluators of imported results: listed, marked, never preselected (no worker runs them)."""
        return {v.id for v in self.versions if spec_ran_elsewhere(v.spec)} | {
            c.id for c in self.evaluators if agent_ran_elsewhere(c.agent)
        }

    @property
    def default_version_id(self) -> uuid.UUID | None:
        """The version the start form preselects: the newest one a worker can run."""
        return next((v.id for v in self.versions if v.id not in self.imported_ids), None)

    @property
    def imported_only(self) -> bool:
        """The newest version holds imported results (its versions come from another harness, not from a form)."""
        return bool(self.versions) and spec_ran_elsewhere(self.versions[0].spec)

    @property
    def default_evaluator_id(self) -> uuid.UUID | None:
        """The evaluator the start form preselects: the first (by name) a worker can run."""
        return next((c.id for c in self.evaluators if c.id not in self.imported_ids), None)


VERSIONS = text(
    """
    SELECT v.id, v.version, v.spec, v.spec_sha256, v.created_at, coalesce(s.runs, 0) AS runs,
           coalesce(s.trials, 0) AS trials, s.reward_sum / nullif(s.scored, 0) AS mean_reward,
           (SELECT er.pass_at_k FROM evaluation_runs er
            WHERE er.organization_id = v.organization_id AND er.environment_version_id = v.id
              AND er.status = 'completed'
            ORDER BY er.created_at DESC, er.id DESC LIMIT 1) AS pass_at_k
    FROM environment_versions v
    LEFT JOIN environment_version_stats s ON s.organization_id = v.organization_id AND s.environment_version_id = v.id
    WHERE v.organization_id = :org AND v.environment_id = :environment_id
    ORDER BY v.version DESC
    """
)

# Newest runs of an environment: the newest `limit` of each version (one index range each), then the newest
# overall; `before` pages back by (created_at, id).
RECENT_RUNS = text(
    f"""
    SELECT r.id, {run_label_sql()} AS label, v.version, c.name AS evaluator_name, r.attempt_count, r.reset_mode,
           r.status, (r.pass_at_k ->> '1')::float8 AS pass_at_1, r.mean_reward, r.created_at
    FROM environment_versions v
    CROSS JOIN LATERAL (
        SELECT * FROM evaluation_runs er
        WHERE er.organization_id = v.organization_id AND er.environment_version_id = v.id
          AND (CAST(:before_at AS timestamptz) IS NULL
               OR (er.created_at, er.id) < (CAST(:before_at AS timestamptz), CAST(:before_id AS uuid)))
        ORDER BY er.created_at DESC, er.id DESC LIMIT :limit
    ) r
    JOIN evaluator_configs c ON c.organization_id = r.organization_id AND c.id = r.evaluator_config_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE v.organization_id = :org AND v.environment_id = :environment_id
    ORDER BY r.created_at DESC, r.id DESC
    LIMIT :limit
    """
)


def environment_detail(
    session: Session, environment_id: uuid.UUID, before: uuid.UUID | None = None, runs_limit: int = 20
) -> EnvironmentDetail | None:
    """The environment page's data (runs older than run `before` when paging), or None when not in the org."""
    environment = session.scalar(select(Environment).where(Environment.id == environment_id))
    if environment is None:
        return None
    org = environment.organization_id
    versions = all_by_name(VersionSummary, session.execute(VERSIONS, {"org": org, "environment_id": environment.id}))
    evaluators = session.scalars(
        select(EvaluatorConfig).where(EvaluatorConfig.organization_id == org).order_by(EvaluatorConfig.name)
    ).all()
    before_at = None
    if before is not None:
        before_at = session.execute(
            text("SELECT created_at FROM evaluation_runs WHERE id = :id"), {"id": before}
        ).scalar()
    rows = session.execute(
        RECENT_RUNS,
        {
            "org": org,
            "environment_id": environment.id,
            "limit": runs_limit + 1,
            "before_at": before_at,
            "before_id": before,
        },
    ).all()
    runs = all_by_name(RunSummary, rows[:runs_limit])
    cursor = runs[-1].id if len(rows) > runs_limit else None
    trend = pass_at_1_trends(session, org, [environment.id])[environment.id]
    return EnvironmentDetail(environment, versions, list(evaluators), runs, cursor, trend)


def find_environment(session: Session, environment_id: uuid.UUID) -> Environment | None:
    """The environment, as the session's organization sees it."""
    return session.scalar(select(Environment).where(Environment.id == environment_id))


def runnable_spec(session: Session, version: EnvironmentVersion) -> dict[str, Any]:
    """The version's spec with its env values in plaintext, for the worker (SecretsKeyError if they do not open)."""
    row = row_name("environment_versions", version.organization_id, version.id)
    return open_env(version.spec, version.secret_env, secrets_key_of(session), row)


def task_files(session: Session, sha256: str) -> bytes | None:
    """A Harbor task's stored files (the canonical tar whose sha256 a harbor-task version's spec names), or None."""
    body: bytes | None = session.scalar(
        select(Artifact.body).where(Artifact.sha256 == sha256, Artifact.content_type == "application/x-tar").limit(1)
    )
    return body


def runnable_agent(session: Session, config: EvaluatorConfig) -> dict[str, Any]:
    """The configuration's agent with its env values in plaintext, for the worker to run."""
    row = row_name("evaluator_configs", config.organization_id, config.id)
    return open_env(config.agent, config.secret_env, secrets_key_of(session), row)


def versions_of(session: Session, environment_id: uuid.UUID) -> list[EnvironmentVersion]:
    """The environment's versions, oldest first."""
    return list(
        session.scalars(
            select(EnvironmentVersion)
            .where(EnvironmentVersion.environment_id == environment_id)
            .order_by(EnvironmentVersion.version)
        )
    )


@dataclass(frozen=True)
class EvaluatorRow:
    """An evaluator configuration as the evaluators page lists it, with how many runs it has."""

    config: EvaluatorConfig
    runs: int


def list_evaluators(session: Session) -> list[EvaluatorRow]:
    """The organization's evaluator configurations by name, each with its number of runs."""
    runs = (
        select(func.count())
        .select_from(EvaluationRun)
        .where(EvaluationRun.evaluator_config_id == EvaluatorConfig.id)
        .scalar_subquery()
    )
    rows = session.execute(select(EvaluatorConfig, runs).order_by(EvaluatorConfig.name)).all()
    return [EvaluatorRow(config, count) for config, count in rows]


@dataclass(frozen=True)
class CatalogCounts:
    """How far the organization got: its environments, evaluators, runs and datasets (and its first environment)."""

    environments: int
    evaluators: int
    runs: int
    datasets: int
    first_environment_id: uuid.UUID | None


CATALOG_COUNTS = text(
    """
    SELECT (SELECT count(*) FROM environments) AS environments, (SELECT count(*) FROM evaluator_configs) AS evaluators,
           (SELECT count(*) FROM (SELECT 1 FROM evaluation_runs LIMIT 1) r) AS runs,
           (SELECT count(*) FROM (SELECT 1 FROM datasets LIMIT 1) d) AS datasets,
           (SELECT id FROM environments ORDER BY created_at, id LIMIT 1) AS first_environment_id
    """
)


def catalog_counts(session: Session) -> CatalogCounts:
    """The first-run checklist's counts, in one statement (runs and datasets only as far as "any")."""
    return all_by_name(CatalogCounts, session.execute(CATALOG_COUNTS))[0]


@dataclass(frozen=True)
class EnvironmentName:
    """An environment a run can start on: its id and name."""

    id: uuid.UUID
    name: str


def environments_with_versions(session: Session, limit: int = 20) -> list[EnvironmentName]:
    """The organization's environments that have a version (a run needs one), by name, at most `limit`."""
    has_version = select(EnvironmentVersion.id).where(EnvironmentVersion.environment_id == Environment.id).exists()
    rows = session.execute(
        select(Environment.id, Environment.name).where(has_version).order_by(Environment.name).limit(limit)
    )
    return [EnvironmentName(row.id, row.name) for row in rows]
