"""The dataset runs API's bodies: what POST /dataset-runs takes and the dataset run it answers (status, progress,
pass@k and mean reward with task-clustered intervals, and every task), beside schemas.py."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from domain.rules import UUID_RULE
from domain.scoring import ATTEMPT_COUNT
from domain.task_stats import TaskEstimate
from queries.dataset_runs import DatasetRunRef, DatasetRunTask, DatasetRunView
from web.validation import REPORT_MISSING, ApiModel


class DatasetRunCreate(ApiModel):
    """POST /dataset-runs: run an evaluator configuration on every task of a dataset version."""

    dataset_version_id: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING]
    evaluator_config_id: Annotated[uuid.UUID, UUID_RULE, REPORT_MISSING]
    attempt_count: Annotated[
        int | None, ATTEMPT_COUNT, Field(description="Trials per task; defaults to the configuration's attemptCount")
    ] = None


class Figure(ApiModel):
    """A figure with its task-clustered standard error, 95% interval, and the tasks and trials it read."""

    value: float | None
    stderr: float | None
    low: float | None
    high: float | None
    tasks: int
    trials: int

    @classmethod
    def of_estimate(cls, estimate: TaskEstimate) -> Figure:
        """The API's figure of a task_stats estimate."""
        return cls(
            value=estimate.value,
            stderr=estimate.stderr,
            low=estimate.low,
            high=estimate.high,
            tasks=estimate.tasks,
            trials=estimate.trials,
        )


class Progress(ApiModel):
    """Tasks and trials done of total, and the seconds left at the pace so far (null before a trial or once done)."""

    tasks_done: int
    tasks_total: int
    trials_done: int
    trials_total: int
    tasks_with_errors: int = Field(description="Finished tasks that ended in infrastructure errors (retry them)")
    eta_seconds: float | None


class StageFigure(ApiModel):
    """One stage_* key over a dataset run: trials that reported it, how many passed it (value 1), the mean value."""

    trials: int
    passed: int
    mean: float


class DatasetRunTaskAnswer(ApiModel):
    """One task: its environment version and world seed, the start of its text, its current evaluation run with
    that run's status, trials, successes, mean reward, infrastructure errors and retries."""

    position: int
    environment_version_id: uuid.UUID
    environment_name: str
    version: int
    world_seed: int | None
    task: str | None = Field(description="The start of the task's text, once a trial recorded it")
    evaluation_run_id: uuid.UUID
    status: str
    trials: int
    successes: int
    mean_reward: float | None
    errors: int
    retries: int
    tokens: int

    @staticmethod
    def fields_of(task: DatasetRunTask) -> dict[str, Any]:
        """A task row's fields (validated with the dataset run, all rows at once)."""
        return {name: getattr(task, name) for name in TASK_FIELDS}


class DatasetRunSummary(ApiModel):
    """A dataset run as a list shows it: its dataset version, evaluator (checkpoint, step), attemptCount, tasks."""

    id: uuid.UUID
    dataset_id: uuid.UUID
    dataset_name: str
    dataset_version_id: uuid.UUID
    version: int
    evaluator_config_id: uuid.UUID
    evaluator_name: str
    checkpoint: str | None
    step: int | None
    attempt_count: int
    task_count: int
    created_at: datetime


class DatasetRun(ApiModel):
    """A dataset run: its dataset version and evaluator, status, progress, passAtK ({"1": {...}, "2": …}), mean
    reward, tokens and every task in the version's order."""

    id: uuid.UUID
    dataset_id: uuid.UUID
    dataset_name: str
    dataset_version_id: uuid.UUID
    version: int
    evaluator_config_id: uuid.UUID
    evaluator_name: str
    checkpoint: str | None
    step: int | None
    attempt_count: int
    created_at: datetime
    status: str = Field(description="queued, running, completed (every task's run ended) or failed (every one failed)")
    progress: Progress
    pass_at_k: dict[str, Figure] = Field(description="pass@1 over trials clustered by task; pass@k over tasks")
    mean_reward: Figure
    tokens: int
    failure_categories: dict[str, int] = Field(description="Trials per failure_category (the capability gap)")
    stages: dict[str, StageFigure] = Field(description="Per stage_* key: trials that reported it, passed, mean")
    tasks: list[DatasetRunTaskAnswer]

    @classmethod
    def of_view(cls, view: DatasetRunView) -> DatasetRun:
        """The API's answer for a dataset run."""
        ref: DatasetRunRef = view.ref
        progress = Progress(
            tasks_done=view.tasks_done,
            tasks_total=ref.task_count,
            trials_done=view.trials_done,
            trials_total=view.trials_total,
            tasks_with_errors=view.errored_tasks,
            eta_seconds=view.eta_seconds,
        )
        return cls.of(
            ref,
            status=view.status,
            progress=progress,
            pass_at_k={str(k): Figure.of_estimate(e) for k, e in view.pass_at_k.items()},
            mean_reward=Figure.of_estimate(view.mean_reward),
            tokens=view.tokens,
            failure_categories=view.categories,
            stages={k: StageFigure(trials=t, passed=p, mean=v / t) for k, (t, p, v) in view.stages.items() if t},
            tasks=[DatasetRunTaskAnswer.fields_of(t) for t in view.tasks],
        )


TASK_FIELDS = tuple(DatasetRunTaskAnswer.model_fields)


class DatasetRunRetried(ApiModel):
    """How many tasks a retry queued again, and the dataset run."""

    retried: int
    dataset_run: DatasetRun
