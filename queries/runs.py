"""Runs and their trials as the run page and the runs API show them; the run a form submission queued, and the
trials a resumed run already has."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import literal_column, select, text
from sqlalchemy.orm import Session

from domain.specs import pipeline_order
from models import Environment, EnvironmentVersion, EvaluationRun, EvaluationTrial, EvaluatorConfig
from queries.dataset_runs import DatasetRunRef, find_dataset_run
from queries.outcomes import TrialOutcome
from queries.rows import by_name


def run_label_sql(run: str = "r", environment: str = "e", version: str = "v", evaluator: str = "c") -> str:
    """The one readable name of a run, as an SQL expression: "admin-console v2 · scripted-expert · #3".

    `#n` is the run's stored sequence number within its environment version (1 for the first run queued on it;
    numbered on insert, migration 0020). The arguments are the aliases of the run's evaluation_runs,
    environments, environment_versions and evaluator_configs rows in the query.
    """
    return (
        f"{environment}.name || ' v' || {version}.version || ' · ' || {evaluator}.name || ' · #' || "
        f"{run}.sequence_number"
    )


@dataclass(frozen=True, kw_only=True)
class RunTrial(TrialOutcome):
    """One trial of a run."""

    stages: dict[str, float]
    trajectory_artifact_id: uuid.UUID | None


@dataclass(frozen=True)
class RunDetail:
    """A run with its environment, version, evaluator and every trial recorded so far."""

    run: EvaluationRun
    environment_id: uuid.UUID
    environment_name: str
    version: int
    evaluator_name: str
    label: str
    reset_of_label: str | None
    trials: list[RunTrial]
    imported: bool = False  # its evaluator or version holds results of another harness: no worker here runs it
    stage_pipeline: tuple[str, ...] = ()  # the stage keys of its trials in the version's pipeline order
    dataset_run: DatasetRunRef | None = None  # the dataset run it is one task of (its task: run.dataset_position)

    @property
    def resettable(self) -> bool:
        """True when the page offers Reset: the run has finished and a worker here can run it again."""
        return self.finished and not self.imported

    @property
    def stage_keys(self) -> list[str]:
        """Every stage_* key any trial of the run reported, in the version's pipeline order (as every page)."""
        keys = {key for trial in self.trials for key in trial.stages}
        rank = {key: index for index, key in enumerate(self.stage_pipeline)}
        return sorted(keys, key=lambda key: (rank.get(key, len(rank)), key))

    @property
    def finished(self) -> bool:
        """True once the run will not change any more."""
        return self.run.status in ("completed", "failed", "cancelled")

    def progress(self, now: datetime | None = None) -> RunProgress:
        """Where the run is at `now` (default: the present): the trial and step in hand, times and an estimate."""
        return run_progress(self, now or datetime.now(UTC))


@dataclass(frozen=True)
class RunProgress:
    """What the run page says about a run: done and pending trials, times, and when finished a summary."""

    done: int
    total: int
    current_trial: int | None  # the trial the worker is in (running runs only)
    current_step: int | None  # the agent's step in it, when the worker has reported one
    elapsed_s: float | None  # since a worker first claimed the run, or it was queued (to its end once finished)
    trial_elapsed_s: float | None  # since the current trial began
    mean_trial_s: float | None  # over the finished trials with both times
    remaining_s: float | None  # the estimate: mean trial time for each trial not finished, less the current one's
    succeeded: int
    mean_reward: float | None
    categories: list[tuple[str, int]]  # failure categories, most frequent first
    pending: list[int]  # trial numbers not recorded yet, in order (the rows the table reserves for them)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return max(0.0, (end - start).total_seconds()) if start is not None and end is not None else None


def run_progress(detail: RunDetail, now: datetime) -> RunProgress:
    """The run page's progress figures, from the run's row and its recorded trials (no further query)."""
    run, trials = detail.run, detail.trials
    recorded = {t.trial_number for t in trials}
    running = run.status == "running"
    current_trial = current_step = trial_elapsed = None
    missing = [n for n in range(1, run.attempt_count + 1) if n not in recorded]
    if running:
        current_trial = missing[0] if missing else None
        if current_trial is not None and run.current_trial == current_trial:
            current_step = run.current_step
            trial_elapsed = _seconds(run.current_trial_started_at, now)
    durations = [t.duration_s for t in trials if t.duration_s is not None]
    mean_trial = sum(durations) / len(durations) if durations else None
    remaining = None
    if running and mean_trial is not None:
        left = run.attempt_count - len(trials)
        remaining = max(0.0, mean_trial * left - min(trial_elapsed or 0.0, mean_trial))
    end = run.finished_at if detail.finished else now
    scored = [t.reward for t in trials if t.reward is not None]
    categories = Counter(t.failure_category for t in trials if t.failure_category)
    return RunProgress(
        done=len(trials),
        total=run.attempt_count,
        current_trial=current_trial,
        current_step=current_step,
        elapsed_s=_seconds(run.started_at or run.created_at, end),
        trial_elapsed_s=trial_elapsed,
        mean_trial_s=mean_trial,
        remaining_s=remaining,
        succeeded=sum(1 for reward in scored if reward == 1),
        mean_reward=run.mean_reward if run.mean_reward is not None else (sum(scored) / len(scored) if scored else None),
        categories=sorted(categories.items(), key=lambda item: (-item[1], item[0])),
        pending=missing,
    )


def version_stages_passed_sql(version: str = "v") -> str:
    """An SQL expression for the version's stage counts from its rollup (jsonb: stage key → trials that passed it),
    which `pipeline_order` orders an MCP or external version's stages by; `version` is the environment_versions
    alias (a scalar subquery: a few rows of stage_metric_rollups, the statement count stays the same)."""
    return (
        "(SELECT jsonb_object_agg(m.stage_key, m.passed) FROM stage_metric_rollups m "
        f"WHERE m.organization_id = {version}.organization_id AND m.environment_version_id = {version}.id)"
    )


def stages_of(
    metrics: dict[str, Any], spec: Any = None, version_passed: dict[str, int] | None = None
) -> dict[str, float]:
    """Return only the stage_* keys of a trial's metrics, in its version's pipeline order (`pipeline_order` of the
    version's spec and stage counts)."""
    stages = {key: value for key, value in metrics.items() if key.startswith("stage_")}
    return {key: stages[key] for key in pipeline_order(spec, sorted(stages), version_passed)}


def run_detail(session: Session, run_id: uuid.UUID) -> RunDetail | None:
    """Return the run (as the session's organization sees it) with its trials in order, or None."""
    label: Any = literal_column(
        run_label_sql(
            EvaluationRun.__tablename__,
            Environment.__tablename__,
            EnvironmentVersion.__tablename__,
            EvaluatorConfig.__tablename__,
        )
    )
    row = session.execute(
        select(
            EvaluationRun,
            Environment.id.label("environment_id"),
            Environment.name.label("environment_name"),
            EnvironmentVersion.version,
            EvaluatorConfig.name.label("evaluator_name"),
            label.label("label"),
            EvaluatorConfig.agent["kind"].astext.label("agent_kind"),
            EnvironmentVersion.spec["kind"].astext.label("spec_kind"),
            EnvironmentVersion.spec,
            literal_column(version_stages_passed_sql(EnvironmentVersion.__tablename__)).label("version_passed"),
        )
        .join(EvaluationRun.environment_version)
        .join(EnvironmentVersion.environment)
        .join(EvaluationRun.evaluator_config)
        .where(EvaluationRun.id == run_id)
    ).one_or_none()
    if row is None:
        return None
    run = row.EvaluationRun
    spec, version_passed = row.spec, row.version_passed or {}
    reset_of_label = None
    if run.reset_of_run_id is not None:
        reset_of_label = session.execute(
            text(
                f"""SELECT {run_label_sql()} FROM evaluation_runs r
                JOIN environment_versions v ON v.organization_id = r.organization_id AND v.id = r.environment_version_id
                JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
                JOIN evaluator_configs c ON c.organization_id = r.organization_id AND c.id = r.evaluator_config_id
                WHERE r.id = :id"""
            ),
            {"id": run.reset_of_run_id},
        ).scalar()
    dataset_run = find_dataset_run(session, run.dataset_run_id) if run.dataset_run_id is not None else None
    trials = session.execute(
        select(
            EvaluationTrial.id,
            EvaluationTrial.trial_number,
            EvaluationTrial.status,
            EvaluationTrial.reward,
            EvaluationTrial.failure_category,  # a reviewer's over the verifier's (migration 0033)
            EvaluationTrial.metrics,
            EvaluationTrial.trajectory_artifact_id,
            EvaluationTrial.started_at,
            EvaluationTrial.finished_at,
        )
        .where(EvaluationTrial.organization_id == run.organization_id, EvaluationTrial.evaluation_run_id == run.id)
        .order_by(EvaluationTrial.trial_number)
    ).all()
    return RunDetail(
        run=run,
        environment_id=row.environment_id,
        environment_name=row.environment_name,
        version=row.version,
        evaluator_name=row.evaluator_name,
        label=row.label,
        reset_of_label=reset_of_label,
        trials=[
            by_name(RunTrial, t, read=("metrics",), stages=stages_of(t.metrics, spec, version_passed)) for t in trials
        ],
        imported="external" in (row.agent_kind, row.spec_kind),
        stage_pipeline=tuple(
            pipeline_order(
                spec, sorted({key for t in trials for key in t.metrics if key.startswith("stage_")}), version_passed
            )
        ),
        dataset_run=dataset_run,
    )


def recorded_trial_numbers(session: Session, run: EvaluationRun) -> set[int]:
    """Trial numbers already written for `run` (a resumed run only runs the others)."""
    rows = session.scalars(
        select(EvaluationTrial.trial_number).where(
            EvaluationTrial.organization_id == run.organization_id, EvaluationTrial.evaluation_run_id == run.id
        )
    )
    return set(rows)


@dataclass(frozen=True)
class LatestReset:
    """The newest run that resets a run: its id, status and when it was queued."""

    id: uuid.UUID
    status: str
    created_at: datetime


def latest_reset(session: Session, run_id: uuid.UUID) -> LatestReset | None:
    """The newest reset of `run_id` (by creation, then id), or None when it was never reset."""
    row = session.execute(
        select(EvaluationRun.id, EvaluationRun.status, EvaluationRun.created_at)
        .where(EvaluationRun.reset_of_run_id == run_id)
        .order_by(EvaluationRun.created_at.desc(), EvaluationRun.id.desc())
        .limit(1)
    ).first()
    return LatestReset(row.id, row.status, row.created_at) if row else None
