"""Capability gap and partial rewards: aggregates read from the rollups the worker keeps, never invented."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.specs import pipeline_order
from queries.filters import TrialFilters
from queries.rows import all_by_name, by_name


@dataclass(frozen=True)
class VersionOption:
    """An environment version to filter by."""

    environment_id: uuid.UUID
    environment_name: str
    version_id: uuid.UUID
    version: int


@dataclass(frozen=True)
class EvaluatorOption:
    """An evaluator configuration (the agent) to filter by."""

    id: uuid.UUID
    name: str


@dataclass(frozen=True)
class CategoryCount:
    """How many trials ended in a failure_category, within an environment version (or overall)."""

    failure_category: str
    trials: int
    environment_id: uuid.UUID | None = None
    environment_name: str | None = None
    version_id: uuid.UUID | None = None
    version: int | None = None
    version_trials: int = 0  # every trial of the version, failed or not (the rate's denominator)

    @property
    def rate(self) -> float | None:
        """Share of the version's trials that ended in this category."""
        return self.trials / self.version_trials if self.version_trials else None


@dataclass(frozen=True)
class CapabilityGap:
    """failure_category counts overall and per environment version, under the chosen filters."""

    overall: list[CategoryCount]
    by_version: list[CategoryCount]
    options: list[VersionOption]
    evaluators: list[EvaluatorOption] = field(default_factory=list)

    @property
    def versions(self) -> list[CategoryCount]:
        """One count per version in the matrix's column order (environment, version), carrying its trials."""
        return list({count.version_id: count for count in self.by_version}.values())

    @property
    def matrix(self) -> dict[tuple[str, uuid.UUID | None], CategoryCount]:
        """(failure_category, version id) → the count in that cell of the category x version matrix."""
        return {(count.failure_category, count.version_id): count for count in self.by_version}

    @property
    def environments(self) -> list[tuple[uuid.UUID, str]]:
        """Distinct (id, name) of the environments among the options, in order."""
        return list(dict.fromkeys((o.environment_id, o.environment_name) for o in self.options))

    @property
    def total(self) -> int:
        """All failed trials counted."""
        return sum(count.trials for count in self.overall)


VERSION_OPTIONS = text(
    """
    SELECT e.id AS environment_id, e.name AS environment_name, v.id AS version_id, v.version
    FROM environment_versions v
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    ORDER BY e.name, v.version
    """
)


def version_options(session: Session) -> list[VersionOption]:
    """Every environment version of the organization, for filter menus."""
    return all_by_name(VersionOption, session.execute(VERSION_OPTIONS))


EVALUATOR_OPTIONS_LIMIT = 500  # as the trials explorer's menus (queries.trials.CHOICES_LIMIT)


def evaluator_options(session: Session) -> list[EvaluatorOption]:
    """The organization's evaluator configurations by name (the first EVALUATOR_OPTIONS_LIMIT), for filter menus."""
    rows = session.execute(
        text("SELECT id, name FROM evaluator_configs ORDER BY name, id LIMIT :limit"),
        {"limit": EVALUATOR_OPTIONS_LIMIT},
    )
    return all_by_name(EvaluatorOption, rows)


def find_evaluator(session: Session, evaluator_id: uuid.UUID) -> EvaluatorOption | None:
    """The evaluator configuration as the session's organization sees it, or None (unknown or another's)."""
    row = session.execute(text("SELECT id, name FROM evaluator_configs WHERE id = :id"), {"id": evaluator_id}).first()
    return by_name(EvaluatorOption, row) if row else None


GAP = """
    SELECT c.failure_category, c.trials, e.id AS environment_id, e.name AS environment_name, v.id AS version_id,
           v.version, coalesce(s.trials, 0) AS version_trials
    FROM failure_category_counts c
    JOIN environment_versions v ON v.organization_id = c.organization_id AND v.id = c.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    LEFT JOIN environment_version_stats s
           ON s.organization_id = v.organization_id AND s.environment_version_id = v.id
    WHERE {where}
    ORDER BY e.name, v.version, c.trials DESC, c.failure_category
"""

# The same figures for one evaluator, from evaluator_category_counts (migration 0027): the version's denominator is
# the sum of the evaluator's rows, '' holding its trials without a category.
GAP_OF_EVALUATOR = """
    WITH per_version AS (
        SELECT c.environment_version_id, c.failure_category, c.trials,
               sum(c.trials) OVER (PARTITION BY c.environment_version_id) AS version_trials
        FROM evaluator_category_counts c
        JOIN environment_versions v ON v.organization_id = c.organization_id AND v.id = c.environment_version_id
        WHERE c.evaluator_config_id = :evaluator_id AND {where}
    )
    SELECT c.failure_category, c.trials, e.id AS environment_id, e.name AS environment_name, v.id AS version_id,
           v.version, c.version_trials::bigint AS version_trials
    FROM per_version c
    JOIN environment_versions v ON v.id = c.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE c.failure_category <> '' AND c.trials > 0
    ORDER BY e.name, v.version, c.trials DESC, c.failure_category
"""


def capability_gap(
    session: Session,
    environment_id: uuid.UUID | None = None,
    version_id: uuid.UUID | None = None,
    evaluator_id: uuid.UUID | None = None,
) -> CapabilityGap:
    """Counts of the real failure_category values, from failure_category_counts (O(categories x versions)); narrowed
    to one evaluator, from evaluator_category_counts (the same, per evaluator)."""
    filters = TrialFilters(environment_id=environment_id, environment_version_id=version_id)
    if evaluator_id is None:
        where = filters.conditions("c", versions="v").also("c.trials > 0")
        rows = session.execute(text(GAP.format(where=where.sql)), where.params).all()
    else:
        where = filters.conditions("c", versions="v")
        rows = session.execute(
            text(GAP_OF_EVALUATOR.format(where=where.sql)), {**where.params, "evaluator_id": evaluator_id}
        ).all()
    by_version = all_by_name(CategoryCount, rows)
    totals: dict[str, int] = {}
    for count in by_version:
        totals[count.failure_category] = totals.get(count.failure_category, 0) + count.trials
    overall = [CategoryCount(name, n) for name, n in sorted(totals.items(), key=lambda item: (-item[1], item[0]))]
    return CapabilityGap(overall, by_version, version_options(session), evaluator_options(session))


@dataclass(frozen=True)
class StageSummary:
    """One stage_* key of a version: trials that reported it, share that passed (value 1), mean value."""

    stage_key: str
    trials: int
    passed: int
    mean_value: float

    @property
    def pass_share(self) -> float:
        """Share of reporting trials whose stage value was 1."""
        return self.passed / self.trials if self.trials else 0.0


def _stage_summary(row: Any) -> StageSummary:
    """A StageSummary from a row that also names its version (and spec)."""
    return StageSummary(stage_key=row.stage_key, trials=row.trials, passed=row.passed, mean_value=row.mean_value)


def version_stages(
    session: Session, version_id: uuid.UUID, evaluator_id: uuid.UUID | None = None
) -> list[StageSummary]:
    """The stage_* keys the worker wrote for a version, from stage_metric_rollups, in pipeline order (empty when
    none yet): the order the environment declares, or for MCP and external versions the order trials reach them.
    Narrowed to one evaluator, that evaluator's trials of the version (from evaluator_stage_rollups)."""
    return versions_stages(session, [version_id], evaluator_id)[version_id]


# One evaluator's stage figures, from evaluator_stage_rollups (migration 0027: as stage_metric_rollups, per evaluator).
EVALUATOR_STAGES = text(
    """SELECT environment_version_id, stage_key, trials, passed, value_sum / nullif(trials, 0) AS mean_value
       FROM evaluator_stage_rollups
       WHERE evaluator_config_id = :evaluator_id AND environment_version_id = ANY(:ids) AND trials > 0"""
)


def versions_stages(
    session: Session, version_ids: list[uuid.UUID], evaluator_id: uuid.UUID | None = None
) -> dict[uuid.UUID, list[StageSummary]]:
    """`version_stages` of several versions in one statement (two when narrowed to an evaluator): version id → its
    stages (empty list when none). The order is always the whole version's (its rollup's counts), so narrowing to
    an evaluator changes the figures, never the order."""
    rows = session.execute(
        text(
            """SELECT m.environment_version_id, m.stage_key, m.trials, m.passed,
                      m.value_sum / nullif(m.trials, 0) AS mean_value, v.spec
               FROM stage_metric_rollups m
               JOIN environment_versions v ON v.organization_id = m.organization_id AND v.id = m.environment_version_id
               WHERE m.environment_version_id = ANY(:ids) AND m.trials > 0"""
        ),
        {"ids": list(version_ids)},
    ).all()
    found: dict[uuid.UUID, dict[str, StageSummary]] = {version_id: {} for version_id in version_ids}
    specs: dict[uuid.UUID, Any] = {}
    for row in rows:
        found[row.environment_version_id][row.stage_key] = _stage_summary(row)
        specs[row.environment_version_id] = row.spec
    version_passed = {
        version_id: {k: s.passed for k, s in summaries.items()} for version_id, summaries in found.items()
    }
    if evaluator_id is not None:
        narrowed: dict[uuid.UUID, dict[str, StageSummary]] = {version_id: {} for version_id in version_ids}
        for row in session.execute(EVALUATOR_STAGES, {"evaluator_id": evaluator_id, "ids": list(version_ids)}):
            narrowed[row.environment_version_id][row.stage_key] = _stage_summary(row)
        found = narrowed
    return {
        version_id: [
            summaries[key] for key in pipeline_order(specs.get(version_id), summaries, version_passed[version_id])
        ]
        for version_id, summaries in found.items()
    }
