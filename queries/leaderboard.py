"""A dataset version's leaderboard: every evaluator that ran it (its newest dataset run), ranked by pass@1, each row
tested against the best one, and the checkpoints' pass@1 against their training step.

Read from the rollup only: one statement gives each evaluator's newest dataset run of the version with its finished
tasks' tallies as arrays (dataset_run_tasks, array_agg per dataset run, as queries.compare.TASK_TALLIES does per
evaluator), so 1,000 tasks by 20 evaluators are 20 rows and the figures are numpy over columns
(domain.task_stats.TaskColumns), never an object per task nor a scan of trials.

A task counts once it is finished: its current run recorded every attempt (the common case, read from the rollup
row alone), or the run ended (completed, failed or cancelled) short of them. pass@1 and mean reward are the
task-clustered figures of those tasks, pass@k over the tasks with k attempts; each row's pass@1 is tested against
the best row's, paired by task (task_stats.compare_pass_at_1, the test compare uses: every row ran the same tasks,
keyed by position), and the table's p-values are corrected together by Holm's step-down (domain.multiple_tests): a
row is behind only when its difference survives the correction.

A process keeps the boards it computed, each under the sums its rollup rows had (RUNS: each row's finished tasks and
revisions, which every write to those rows changes): the same sums are the same board, read again without its
arrays or its tests. It keeps each dataset run's figures under its own sums too, so a board after a trial of one of
its runs reads and computes that run again (and the tests against the best row), not the others.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from domain import task_stats
from domain.comparison import ALPHA
from domain.multiple_tests import HolmDecision, holm
from domain.task_stats import TaskColumns, TaskEstimate, TaskTest
from models.datasets import DatasetVersion
from queries.kept import Kept

HOLM_METHOD = (
    f"pass@1 of each row against the best row's, paired by task (the compare test: paired t-test over task means), "
    f"Holm's step-down correction across the table's tests at alpha = {ALPHA:g}"
)

# Each evaluator's newest dataset run of the version (the rows of the board).
NEWEST = """
    WITH newest AS (
        SELECT DISTINCT ON (dr.evaluator_config_id) dr.id, dr.evaluator_config_id, dr.attempt_count, dr.task_count,
               dr.created_at
        FROM dataset_runs dr
        WHERE dr.organization_id = :org AND dr.dataset_version_id = :version_id
        ORDER BY dr.evaluator_config_id, dr.created_at DESC, dr.id DESC
    )
"""
# A task counts once its current run recorded every attempt (read from the rollup row alone) or ended short of them.
FINISHED_TASK = """
    (t.trials >= n.attempt_count OR EXISTS (
        SELECT 1 FROM evaluation_runs r
        WHERE r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
          AND r.status IN ('completed', 'failed', 'cancelled')
    ))
"""
# The board's rows: each evaluator's newest dataset run of the version with its evaluator, and the state of its
# rollup rows: its finished tasks and the sum of their revisions (every write to a row adds to its revision: a
# trial, a retry, a category replaced). Equal states, the same figures; one index range per run, no arrays built.
RUNS = text(
    f"""
    {NEWEST}
    SELECT n.id AS dataset_run_id, n.evaluator_config_id, c.name AS evaluator_name, c.checkpoint, c.step,
           n.attempt_count, n.task_count, n.created_at, done.tasks_done, done.revision
    FROM newest n
    JOIN evaluator_configs c ON c.organization_id = :org AND c.id = n.evaluator_config_id
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE {FINISHED_TASK}) AS tasks_done, coalesce(sum(t.revision), 0) AS revision
        FROM dataset_run_tasks t
        WHERE t.organization_id = :org AND t.dataset_run_id = n.id
    ) done
    ORDER BY n.id
    """
)
# The finished tasks' tallies of the dataset runs :ids as arrays (by position), one row per run.
TALLIES = text(
    f"""
    SELECT n.id AS dataset_run_id, done.*
    FROM dataset_runs n
    CROSS JOIN LATERAL (
        -- one aggregate over the run's rows in index order: the arrays are aligned, one entry per finished task
        SELECT coalesce(sum(t.tokens), 0) AS tokens,
               coalesce(array_agg(t.position), '{{}}') AS positions, coalesce(array_agg(t.trials), '{{}}') AS attempts,
               coalesce(array_agg(t.successes), '{{}}') AS successes, coalesce(array_agg(t.scored), '{{}}') AS scored,
               coalesce(array_agg(t.reward_sum), '{{}}') AS reward_sums,
               coalesce(array_agg(t.reward_square_sum), '{{}}') AS reward_square_sums
        FROM dataset_run_tasks t
        WHERE t.organization_id = :org AND t.dataset_run_id = n.id AND {FINISHED_TASK}
    ) done
    WHERE n.organization_id = :org AND n.id = ANY(CAST(:ids AS uuid[]))
    """
)
BOARDS_KEPT = 256  # boards a process keeps, the least recently asked for dropped first
# Tasks whose figures a process keeps per dataset run (about 50 bytes each), the least recently asked for run first.
RUN_TASKS_KEPT = 500_000


@dataclass(frozen=True)
class LeaderboardRow:
    """One evaluator's newest dataset run of the version: its figures over its finished tasks, its test against the
    best row (None for the best row itself, or when no test could be made) and Holm's decision on it."""

    rank: int
    dataset_run_id: uuid.UUID
    evaluator_config_id: uuid.UUID
    evaluator_name: str
    checkpoint: str | None
    step: int | None
    attempt_count: int
    task_count: int
    tasks_done: int
    trials: int
    tokens: int
    created_at: datetime
    pass_at_1: TaskEstimate
    pass_at_k: dict[int, TaskEstimate]
    mean_reward: TaskEstimate
    versus_best: TaskTest | None
    decision: HolmDecision | None

    @property
    def behind(self) -> bool:
        """Its pass@1 is below the best row's after Holm's correction across the table."""
        test = self.versus_best
        decided = self.decision is not None and self.decision.rejected
        return decided and test is not None and test.difference is not None and test.difference < 0

    @property
    def top_k(self) -> int:
        """The largest k it has pass@k for (its attempts per task)."""
        return max(self.pass_at_k, default=1)


@dataclass(frozen=True)
class Leaderboard:
    """A dataset version's rows ranked by pass@1 (the best first) and its checkpoints by step."""

    dataset_version_id: uuid.UUID
    version: int
    task_count: int
    rows: list[LeaderboardRow]

    @property
    def best(self) -> LeaderboardRow | None:
        """The row every other is tested against (None when no row has a pass@1 yet)."""
        return self.rows[0] if self.rows and self.rows[0].pass_at_1.value is not None else None

    @property
    def checkpoints(self) -> list[LeaderboardRow]:
        """The rows whose evaluator has a training step, by step (then name)."""
        stepped = [row for row in self.rows if row.step is not None]
        return sorted(stepped, key=lambda row: (row.step, row.evaluator_name, str(row.evaluator_config_id)))


def board_version(session: Session, dataset_id: uuid.UUID, version: int | None) -> DatasetVersion | None:
    """The dataset's version `version` (its latest when None); None when the organization has no such version."""
    query = select(DatasetVersion).where(DatasetVersion.dataset_id == dataset_id)
    query = query.where(DatasetVersion.version == version) if version is not None else query
    return session.scalar(query.order_by(DatasetVersion.version.desc()).limit(1))


@dataclass(frozen=True)
class RunFigures:
    """One dataset run's finished tasks as columns by position and the figures they give."""

    columns: TaskColumns
    tokens: int
    pass_at_1: TaskEstimate
    pass_at_k: dict[int, TaskEstimate]
    mean_reward: TaskEstimate

    @property
    def tasks(self) -> int:
        return len(self.columns.keys)


# The zero-padded position keys of a set of finished positions (the runs of one version mostly finished the same
# tasks, so they share one tuple), and each dataset run's figures under the state RUNS reads.
_keys: Kept[tuple[str, ...]] = Kept(64)
_runs: Kept[RunFigures] = Kept(RUN_TASKS_KEPT, weigh=lambda figures: figures.tasks + 1)


def _figures(row) -> RunFigures:
    """A TALLIES row's columns keyed by the zero-padded position (sorted as the numbers), and their figures."""
    positions = np.asarray(row.positions, dtype=np.int64)
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    # a version holds at most 10,000 tasks: five digits sort as the numbers
    keys = _keys.get(ordered.tobytes(), lambda: tuple(f"{position:05d}" for position in ordered.tolist()))

    def column(values) -> np.ndarray:
        return np.asarray(values, dtype=float)[order]

    columns = TaskColumns(
        keys,
        column(row.attempts),
        column(row.successes),
        column(row.scored),
        column(row.reward_sums),
        column(row.reward_square_sums),
        keys_sorted=True,
    )
    return RunFigures(
        columns,
        int(row.tokens),
        task_stats.pass_at_1(columns),
        task_stats.pass_at_k(columns),
        task_stats.mean_reward(columns),
    )


_boards: Kept[Leaderboard] = Kept(BOARDS_KEPT)


def leaderboard(session: Session, version: DatasetVersion) -> Leaderboard:
    """The version's leaderboard (`board`), computed once per state of its rollup: every write to a dataset run's
    task rows adds to their revision, so the sums RUNS reads name the board, and a board this process computed for
    the same sums is the same board (queries.kept)."""
    runs = session.execute(RUNS, _params(version)).all()
    state = tuple(tuple(row) for row in runs)
    return _boards.get((version.organization_id, version.id, state), lambda: board(session, version, runs))


def _params(version: DatasetVersion) -> dict[str, uuid.UUID]:
    return {"version_id": version.id, "org": version.organization_id}


def _run_key(version: DatasetVersion, row) -> tuple:
    return (version.organization_id, row.dataset_run_id, row.tasks_done, row.revision)


def board(session: Session, version: DatasetVersion, runs: Sequence[Any] | None = None) -> Leaderboard:
    """The version's leaderboard read and computed now: rows by pass@1 (then mean reward, then name), each tested
    against the first, the tests' p-values corrected together by Holm's method. `runs` are its RUNS rows when read
    already; a dataset run whose state this process computed before keeps its figures (only the runs a write
    changed are read and computed again, the tests against the best row always)."""
    params = _params(version)
    read = session.execute(RUNS, params).all() if runs is None else runs
    kept = {row.dataset_run_id: _runs.find(_run_key(version, row)) for row in read}
    figures = {run_id: found for run_id, found in kept.items() if found is not None}
    missing = [run_id for run_id in kept if run_id not in figures]
    if missing:
        for tallies in session.execute(TALLIES, {**params, "ids": missing}):
            figures[tallies.dataset_run_id] = _figures(tallies)
        for row in read:
            if row.dataset_run_id in missing:
                _runs.keep(_run_key(version, row), figures[row.dataset_run_id])
    measured = [(row, figures[row.dataset_run_id]) for row in read]

    def order(item) -> tuple:
        row, run = item
        return (
            run.pass_at_1.value is None,
            -(run.pass_at_1.value or 0.0),
            -(run.mean_reward.value or 0.0),
            row.evaluator_name,
            str(row.dataset_run_id),
        )

    measured.sort(key=order)
    best = measured[0][1] if measured and measured[0][1].pass_at_1.value is not None else None
    tests: list[TaskTest | None] = [None] * len(measured)
    if best is not None:
        for index, (_, run) in enumerate(measured[1:], start=1):
            if run.pass_at_1.value is not None:
                tests[index] = task_stats.compare_pass_at_1(best.columns, run.columns)
    tested = {i: test.p_value for i, test in enumerate(tests) if test is not None and test.p_value is not None}
    decisions: list[HolmDecision | None] = [None] * len(measured)
    for index, decision in zip(tested, holm(list(tested.values())), strict=True):
        decisions[index] = decision
    rows = [
        LeaderboardRow(
            rank=index + 1,
            dataset_run_id=row.dataset_run_id,
            evaluator_config_id=row.evaluator_config_id,
            evaluator_name=row.evaluator_name,
            checkpoint=row.checkpoint,
            step=row.step,
            attempt_count=row.attempt_count,
            task_count=row.task_count,
            tasks_done=row.tasks_done,
            trials=int(run.columns.attempts.sum()),
            tokens=run.tokens,
            created_at=row.created_at,
            pass_at_1=run.pass_at_1,
            pass_at_k=run.pass_at_k,
            mean_reward=run.mean_reward,
            versus_best=tests[index],
            decision=decisions[index],
        )
        for index, (row, run) in enumerate(measured)
    ]
    return Leaderboard(version.id, version.version, version.task_count, rows)
