"""Runs and their trials as the run page and the runs API show them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from models import Environment, EnvironmentVersion, EvaluationRun, EvaluationTrial, EvaluatorConfig


@dataclass(frozen=True)
class RunTrial:
    """One trial of a run."""

    id: uuid.UUID
    trial_number: int
    status: str
    reward: float | None
    failure_category: str | None
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
    trials: list[RunTrial]

    @property
    def stage_keys(self) -> list[str]:
        """Every stage_* key any trial of the run reported, sorted."""
        return sorted({key for trial in self.trials for key in trial.stages})

    @property
    def finished(self) -> bool:
        """True once the run will not change any more."""
        return self.run.status in ("completed", "failed", "cancelled")


def stages_of(metrics: dict[str, Any]) -> dict[str, float]:
    """Return only the stage_* keys of a trial's metrics, sorted by key."""
    return {key: value for key, value in sorted(metrics.items()) if key.startswith("stage_")}


def run_detail(session: Session, run_id: uuid.UUID) -> RunDetail | None:
    """Return the run (as the session's organization sees it) with its trials in order, or None."""
    row = session.execute(
        select(EvaluationRun, Environment.id, Environment.name, EnvironmentVersion.version, EvaluatorConfig.name)
        .join(EvaluationRun.environment_version)
        .join(EnvironmentVersion.environment)
        .join(EvaluationRun.evaluator_config)
        .where(EvaluationRun.id == run_id)
    ).one_or_none()
    if row is None:
        return None
    run = row[0]
    trials = session.execute(
        select(
            EvaluationTrial.id,
            EvaluationTrial.trial_number,
            EvaluationTrial.status,
            EvaluationTrial.reward,
            EvaluationTrial.failure_category,
            EvaluationTrial.metrics,
            EvaluationTrial.trajectory_artifact_id,
        )
        .where(EvaluationTrial.organization_id == run.organization_id, EvaluationTrial.evaluation_run_id == run.id)
        .order_by(EvaluationTrial.trial_number)
    ).all()
    return RunDetail(
        run,
        row[1],
        row[2],
        row[3],
        row[4],
        [
            RunTrial(
                t.id,
                t.trial_number,
                t.status,
                t.reward,
                t.failure_category,
                stages_of(t.metrics),
                t.trajectory_artifact_id,
            )
            for t in trials
        ],
    )
