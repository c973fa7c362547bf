"""The leaderboard API's bodies: the query it takes (`version`) and the ranked rows with their test against the best
row and the checkpoints' points, beside schemas.py."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import Field

from blueprints.api.dataset_run_schemas import Figure
from blueprints.api.schemas import Interval
from domain.rules import integer_from
from queries.leaderboard import HOLM_METHOD, Leaderboard, LeaderboardRow
from web.validation import ApiModel, QueryModel

LARGEST_VERSION = 2**31 - 1  # a PostgreSQL integer


class LeaderboardQuery(QueryModel):
    """GET /datasets/{datasetId}/leaderboard: which version (the latest when left out)."""

    version: Annotated[
        int | None, integer_from(1, LARGEST_VERSION), Field(description="The dataset version; default the latest")
    ] = None


class VersusBest(ApiModel):
    """A row's pass@1 against the best row's (B - A with A the best row), paired by task, and Holm's decision across
    the table: `behind` only when the difference survives the correction."""

    method: str
    difference: float | None
    ci95: Interval | None
    p_value: float | None
    adjusted_p_value: float | None = Field(description="Holm's adjusted p-value across the table's tests")
    paired_tasks: int


class LeaderboardEntry(ApiModel):
    """One evaluator's newest dataset run of the version: its figures over its finished tasks (task-clustered 95%
    intervals), trials, tokens, the date, and its test against the best row (null for the best row)."""

    rank: int
    evaluator_config_id: uuid.UUID
    evaluator_name: str
    checkpoint: str | None
    step: int | None
    dataset_run_id: uuid.UUID
    created_at: datetime
    attempt_count: int
    tasks_done: int
    tasks_total: int
    trials: int
    tokens: int
    pass_at1: Figure
    pass_at_k: dict[str, Figure] = Field(description="pass@1 over trials clustered by task; pass@k over tasks")
    mean_reward: Figure
    versus_best: VersusBest | None
    behind: bool = Field(description="pass@1 below the best row's after Holm's correction")

    @classmethod
    def of_row(cls, row: LeaderboardRow) -> LeaderboardEntry:
        """A leaderboard row as the API shows it."""
        test, versus = row.versus_best, None
        if test is not None:
            ci = [test.low, test.high] if test.low is not None and test.high is not None else None
            versus = VersusBest(
                method=test.method,
                difference=test.difference,
                ci95=ci,
                p_value=test.p_value,
                adjusted_p_value=row.decision.adjusted_p if row.decision is not None else None,
                paired_tasks=test.paired_tasks,
            )
        return cls(
            rank=row.rank,
            evaluator_config_id=row.evaluator_config_id,
            evaluator_name=row.evaluator_name,
            checkpoint=row.checkpoint,
            step=row.step,
            dataset_run_id=row.dataset_run_id,
            created_at=row.created_at,
            attempt_count=row.attempt_count,
            tasks_done=row.tasks_done,
            tasks_total=row.task_count,
            trials=row.trials,
            tokens=row.tokens,
            pass_at1=Figure.of_estimate(row.pass_at_1),
            pass_at_k={str(k): Figure.of_estimate(e) for k, e in sorted(row.pass_at_k.items())},
            mean_reward=Figure.of_estimate(row.mean_reward),
            versus_best=versus,
            behind=row.behind,
        )


class CheckpointPoint(ApiModel):
    """pass@1 of one evaluator that has a training step, with its 95% interval."""

    step: int
    checkpoint: str | None
    evaluator_config_id: uuid.UUID
    evaluator_name: str
    pass_at1: float | None
    low: float | None
    high: float | None


class LeaderboardAnswer(ApiModel):
    """A dataset version's leaderboard: the rows by pass@1 (the best first), the method of the tests, and the
    checkpoints by step."""

    dataset_id: uuid.UUID
    dataset_version_id: uuid.UUID
    version: int
    task_count: int
    method: str = Field(description="How each row is tested against the best row")
    rows: list[LeaderboardEntry]
    checkpoints: list[CheckpointPoint] = Field(description="The evaluators with a step, ordered by step")

    @classmethod
    def of_board(cls, dataset_id: uuid.UUID, board: Leaderboard) -> LeaderboardAnswer:
        """The API's answer for a leaderboard."""
        return cls(
            dataset_id=dataset_id,
            dataset_version_id=board.dataset_version_id,
            version=board.version,
            task_count=board.task_count,
            method=HOLM_METHOD,
            rows=[LeaderboardEntry.of_row(row) for row in board.rows],
            checkpoints=[
                CheckpointPoint(
                    step=row.step,
                    checkpoint=row.checkpoint,
                    evaluator_config_id=row.evaluator_config_id,
                    evaluator_name=row.evaluator_name,
                    pass_at1=row.pass_at_1.value,
                    low=row.pass_at_1.low,
                    high=row.pass_at_1.high,
                )
                for row in board.checkpoints
                if row.step is not None
            ],
        )
