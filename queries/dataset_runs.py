"""Dataset runs as their page, the API, compare and the leaderboard show them, read from their rollup rows
(dataset_run_tasks, kept by writes.runs.RECORD_TRIAL) joined to each task's current run: never a scan of trials.

A task's key is its identity, `<environment version id>:<world seed>` (`:` alone for a Harbor task): two dataset
runs hold the same task when they ran the same version on the same world, so compare pairs them task by task
whichever dataset version listed it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from domain import task_stats
from domain.agents import ran_elsewhere
from domain.specs import stage_order
from domain.task_stats import TaskEstimate, TaskTally
from models.environments import EnvironmentVersion
from queries.kept import Kept
from queries.rows import all_by_name, by_name

FINISHED = ("completed", "failed", "cancelled")


def task_key(environment_version_id: uuid.UUID, world_seed: int | None) -> str:
    """A dataset task's identity across dataset runs and versions: its environment version and world seed."""
    return f"{environment_version_id}:{'' if world_seed is None else world_seed}"


@dataclass(frozen=True)
class DatasetRunRef:
    """A dataset run with the names it shows: its dataset and version, and its evaluator (checkpoint and step)."""

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

    @property
    def label(self) -> str:
        """How pages name it: the evaluator on the dataset version."""
        return f"{self.evaluator_name} on {self.dataset_name} v{self.version}"

    @property
    def evaluator_label(self) -> str:
        """The evaluator with its checkpoint and step when it has them: "policy (checkpoint ckpt-9, step 9000)"."""
        marks = [f"checkpoint {self.checkpoint}"] if self.checkpoint else []
        marks += [f"step {self.step}"] if self.step is not None else []
        return f"{self.evaluator_name} ({', '.join(marks)})" if marks else self.evaluator_name

    @property
    def title(self) -> str:
        """Its page's title: the evaluator (checkpoint and step) on the dataset version."""
        return f"{self.evaluator_label} on {self.dataset_name} v{self.version}"


@dataclass(frozen=True)
class DatasetRunTask:
    """One task of a dataset run: where it stands (its current run's status) and that run's counts."""

    position: int
    environment_version_id: uuid.UUID
    environment_id: uuid.UUID
    environment_name: str
    version: int
    world_seed: int | None
    evaluation_run_id: uuid.UUID
    sequence_number: int
    status: str
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    retries: int
    trials: int
    successes: int
    scored: int
    reward_sum: float
    reward_square_sum: float
    errors: int
    tokens: int
    task: str | None

    @property
    def key(self) -> str:
        """The task's identity (task_key)."""
        return task_key(self.environment_version_id, self.world_seed)

    @property
    def finished(self) -> bool:
        """Its current run has ended (completed, failed or cancelled)."""
        return self.status in FINISHED

    @property
    def ended_in_errors(self) -> bool:
        """Finished, and its run failed or a trial ended in an infrastructure error (what a retry runs again)."""
        return self.finished and (self.errors > 0 or self.status != "completed")

    @property
    def mean_reward(self) -> float | None:
        """The mean of its scored trials' rewards."""
        return self.reward_sum / self.scored if self.scored else None

    @property
    def tally(self) -> TaskTally:
        """Its trials as the task-clustered statistics read them."""
        return TaskTally(self.trials, self.successes, self.scored, self.reward_sum, self.reward_square_sum)


@dataclass(frozen=True)
class DatasetRunTotals:
    """What a dataset run's tasks add up to, summed in PostgreSQL over its rollup rows: tasks (done, completed, still
    untouched, ended in errors), trials, tokens, the versions they are of, when the first began, and each task's
    tally by task key (tasks with no trial left out)."""

    tasks: int
    tasks_done: int
    completed: int
    untouched: int  # queued and never retried
    errored_tasks: int
    trials_done: int
    tokens: int
    versions: int
    revision: int  # every change of a task's row adds one: the state of the rollup rows
    started_at: datetime | None
    tallies: dict[str, TaskTally]
    now: datetime  # the transaction's time, the ETA's


@dataclass(frozen=True)
class DatasetRunView:
    """A dataset run with its totals and the figures they give (status, progress, pass@k and mean reward with
    task-clustered 95% intervals, an estimate of the time left), and its first tasks in order."""

    ref: DatasetRunRef
    tasks: list[DatasetRunTask]  # in the version's order: all, or the first the reader asked for
    totals: DatasetRunTotals
    # Trials per failure_category over the tasks' current runs, the most frequent first (the capability gap).
    categories: dict[str, int]
    # Per stage_* key over the tasks' current runs: (trials that reported it, passed, value sum) (partial rewards).
    stages: dict[str, tuple[int, int, float]]

    @property
    def tallies(self) -> dict[str, TaskTally]:
        """Each task's tally by task key (tasks with no trial yet are left out)."""
        return self.totals.tallies

    @property
    def tasks_done(self) -> int:
        """Tasks whose current run has finished."""
        return self.totals.tasks_done

    @property
    def trials_done(self) -> int:
        """Trials recorded by the tasks' current runs."""
        return self.totals.trials_done

    @property
    def trials_total(self) -> int:
        """Trials the dataset run asks for: attemptCount per task."""
        return self.ref.attempt_count * self.ref.task_count

    @property
    def errored_tasks(self) -> int:
        """Finished tasks that ended in errors (retry runs them again)."""
        return self.totals.errored_tasks

    @property
    def tokens(self) -> int:
        """Tokens the tasks' current runs reported."""
        return self.totals.tokens

    @property
    def status(self) -> str:
        """queued (no task begun), running, or completed (every task's run ended; failed when every one failed)."""
        totals = self.totals
        if totals.tasks_done == totals.tasks:
            return "completed" if totals.completed else "failed"
        return "queued" if totals.untouched == totals.tasks else "running"

    @cached_property
    def pass_at_k(self) -> dict[int, TaskEstimate]:
        """pass@1 over trials clustered by task, pass@k (k >= 2) over tasks with k attempts."""
        over_tasks = {k: e for k, e in task_stats.pass_at_k(self.tallies).items() if k >= 2}
        return {1: task_stats.pass_at_1(self.tallies), **over_tasks}

    @cached_property
    def mean_reward(self) -> TaskEstimate:
        """The mean of the scored trials' rewards, clustered by task."""
        return task_stats.mean_reward(self.tallies)

    @property
    def started_at(self) -> datetime | None:
        """When its first task's current run began."""
        return self.totals.started_at

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the pace so far (trials recorded since the first began), None before a trial or once
        done."""
        done, started = self.trials_done, self.started_at
        if not done or started is None or self.status in FINISHED:
            return None
        elapsed = (self.totals.now - started).total_seconds()
        return max(0.0, elapsed / done * (self.trials_total - done))


REF_COLUMNS = """
    dr.id, d.id AS dataset_id, d.name AS dataset_name, dr.dataset_version_id, dv.version,
    dr.evaluator_config_id, c.name AS evaluator_name, c.checkpoint, c.step, dr.attempt_count, dr.task_count,
    dr.created_at
"""
REF_JOINS = """
    JOIN dataset_versions dv ON dv.organization_id = dr.organization_id AND dv.id = dr.dataset_version_id
    JOIN datasets d ON d.organization_id = dv.organization_id AND d.id = dv.dataset_id
    JOIN evaluator_configs c ON c.organization_id = dr.organization_id AND c.id = dr.evaluator_config_id
"""
FIND = text(f"SELECT {REF_COLUMNS} FROM dataset_runs dr {REF_JOINS} WHERE dr.id = :id")
TASKS = text(
    """
    SELECT t.position, t.environment_version_id, v.environment_id, e.name AS environment_name, v.version,
           t.world_seed, t.evaluation_run_id, r.sequence_number, r.status, r.error, r.started_at, r.finished_at,
           t.retries, t.trials, t.successes, t.scored, t.reward_sum, t.reward_square_sum, t.errors, t.tokens, t.task
    FROM dataset_run_tasks t
    JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
    JOIN environment_versions v ON v.organization_id = t.organization_id AND v.id = t.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE t.dataset_run_id = :id AND t.position > :after AND t.position <= :last
    ORDER BY t.position
    """
)
# A dataset run's totals in one row: the joined runs are primary-key lookups, the tallies arrays (one element per
# task with a trial), so a thousand tasks cost a thousand index probes and five arrays, not a thousand rows.
TOTALS = text(
    f"""
    SELECT count(*) AS tasks, count(*) FILTER (WHERE r.status IN {FINISHED}) AS tasks_done,
           count(*) FILTER (WHERE r.status = 'completed') AS completed,
           count(*) FILTER (WHERE r.status = 'queued' AND t.retries = 0) AS untouched,
           count(*) FILTER (WHERE r.status IN {FINISHED} AND (t.errors > 0 OR r.status <> 'completed'))
               AS errored_tasks,
           coalesce(sum(t.trials), 0) AS trials_done, coalesce(sum(t.tokens), 0) AS tokens,
           count(DISTINCT t.environment_version_id) AS versions, min(r.started_at) AS started_at, now() AS now,
           coalesce(sum(t.revision), 0) AS revision,
           coalesce(array_agg(t.environment_version_id::text || ':' || coalesce(t.world_seed::text, ''))
               FILTER (WHERE t.trials > 0), '{{}}') AS keys,
           coalesce(array_agg(t.trials) FILTER (WHERE t.trials > 0), '{{}}') AS attempts,
           coalesce(array_agg(t.successes) FILTER (WHERE t.trials > 0), '{{}}') AS successes,
           coalesce(array_agg(t.scored) FILTER (WHERE t.trials > 0), '{{}}') AS scored,
           coalesce(array_agg(t.reward_sum) FILTER (WHERE t.trials > 0), '{{}}') AS reward_sums,
           coalesce(array_agg(t.reward_square_sum) FILTER (WHERE t.trials > 0), '{{}}') AS reward_square_sums
    FROM dataset_run_tasks t
    JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
    WHERE t.dataset_run_id = :id
    """
)


# The dataset run's failure categories and stage_* keys summed over its tasks' rollup rows in PostgreSQL (with
# :finished, only the tasks whose current run has ended, as compare reads a side).
OUTCOMES = text(
    f"""
    WITH task AS (
        SELECT t.categories, t.stages FROM dataset_run_tasks t
        JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
        WHERE t.dataset_run_id = :id AND (NOT :finished OR r.status IN {FINISHED})
    )
    SELECT 'category' AS what, c.key, sum(c.value::int) AS trials, 0 AS passed, 0.0 AS value_sum
    FROM task t CROSS JOIN jsonb_each_text(t.categories) c GROUP BY c.key
    UNION ALL
    SELECT 'stage', s.key, sum((s.value ->> 0)::int), sum((s.value ->> 1)::int), sum((s.value ->> 2)::float8)
    FROM task t CROSS JOIN jsonb_each(t.stages) s GROUP BY s.key
    """
)


_outcomes: Kept[tuple[dict[str, int], dict[str, tuple[int, int, float]]]] = Kept(1024)


def dataset_run_outcomes(
    session: Session, dataset_run_id: uuid.UUID, *, finished: bool = False
) -> tuple[dict[str, int], dict[str, tuple[int, int, float]]]:
    """The dataset run's trials per failure_category (the most first) and per stage_* key (trials, passed, value
    sum), over every task or with `finished` over the tasks whose current run has ended."""
    categories: dict[str, int] = {}
    stages: dict[str, tuple[int, int, float]] = {}
    for row in session.execute(OUTCOMES, {"id": dataset_run_id, "finished": finished}):
        if row.what == "category":
            categories[row.key] = int(row.trials)
        else:
            stages[row.key] = (int(row.trials), int(row.passed), float(row.value_sum))
    ordered = dict(sorted(categories.items(), key=lambda item: (-item[1], item[0])))
    return ordered, dict(sorted(stages.items()))


def find_dataset_run(session: Session, dataset_run_id: uuid.UUID) -> DatasetRunRef | None:
    """The organization's dataset run `dataset_run_id` with its names (None for an id it does not have)."""
    row = session.execute(FIND, {"id": dataset_run_id}).first()
    return by_name(DatasetRunRef, row) if row is not None else None


def dataset_run_totals(session: Session, dataset_run_id: uuid.UUID) -> DatasetRunTotals:
    """What the dataset run's tasks add up to (DatasetRunTotals)."""
    row = session.execute(TOTALS, {"id": dataset_run_id}).one()
    tallies = {
        key: TaskTally(int(n), int(wins), int(scored), float(total), float(squares))
        for key, n, wins, scored, total, squares in zip(
            row.keys, row.attempts, row.successes, row.scored, row.reward_sums, row.reward_square_sums, strict=True
        )
    }
    counts = {name: int(getattr(row, name)) for name in (
        "tasks", "tasks_done", "completed", "untouched", "errored_tasks", "trials_done", "tokens", "versions",
        "revision",
    )}  # fmt: skip
    return DatasetRunTotals(**counts, started_at=row.started_at, tallies=tallies, now=row.now)


def dataset_run_view(
    session: Session, dataset_run_id: uuid.UUID, tasks: int | None = None, after: int = 0
) -> DatasetRunView | None:
    """The dataset run with its totals and its tasks in order: all of them, or the `tasks` after position `after`
    (a page of them). None for an id the organization does not have."""
    ref = find_dataset_run(session, dataset_run_id)
    if ref is None:
        return None
    last = ref.task_count if tasks is None else after + tasks
    found = session.execute(TASKS, {"id": dataset_run_id, "after": after, "last": last})
    rows = all_by_name(DatasetRunTask, found)
    totals = dataset_run_totals(session, dataset_run_id)
    state = (dataset_run_id, totals.revision)  # queries.kept
    categories, stages = _outcomes.get(state, lambda: dataset_run_outcomes(session, dataset_run_id))
    return DatasetRunView(ref, rows, totals, categories, stages)


LIST = text(
    f"""
    SELECT {REF_COLUMNS} FROM dataset_runs dr {REF_JOINS}
    WHERE CAST(:version_id AS uuid) IS NULL OR dr.dataset_version_id = CAST(:version_id AS uuid)
    ORDER BY dr.created_at DESC, dr.id DESC LIMIT :limit
    """
)


def list_dataset_runs(
    session: Session, dataset_version_id: uuid.UUID | None = None, limit: int = 100
) -> list[DatasetRunRef]:
    """The organization's newest dataset runs (of one dataset version when given), newest first."""
    return all_by_name(DatasetRunRef, session.execute(LIST, {"version_id": dataset_version_id, "limit": limit}))


def stage_pipeline(session: Session, view: DatasetRunView) -> list[str]:
    """The stage_* keys the dataset run's trials reported, in pipeline order: the declared order of its environment
    version when every task is of one version (a built-in world's), else the order its own counts give (the stage
    most trials passed first, as domain.specs.stage_order infers an MCP version's)."""
    if not view.stages:
        return []
    spec = None
    if view.totals.versions == 1 and view.tasks:
        version_id = view.tasks[0].environment_version_id
        spec = session.scalar(select(EnvironmentVersion.spec).where(EnvironmentVersion.id == version_id))
    return stage_order(spec, {key: passed for key, (_, passed, _) in view.stages.items()})


@dataclass(frozen=True)
class DatasetVersionChoice:
    """A dataset version a dataset run can be started on: its dataset's name, number and task count."""

    id: uuid.UUID
    dataset_name: str
    version: int
    task_count: int

    @property
    def label(self) -> str:
        """How the start form names it: "shop-50 v2 (50 tasks)"."""
        return f"{self.dataset_name} v{self.version} ({self.task_count} task{'s' if self.task_count != 1 else ''})"


@dataclass(frozen=True)
class EvaluatorChoice:
    """An evaluator configuration the start form offers, with its attemptCount, checkpoint and step."""

    id: uuid.UUID
    name: str
    attempt_count: int
    checkpoint: str | None
    step: int | None
    agent: dict

    @property
    def imported(self) -> bool:
        """Its agent ran in another harness: listed and marked, never runnable here."""
        return ran_elsewhere(self.agent)


VERSION_CHOICES = text(
    """
    SELECT dv.id, d.name AS dataset_name, dv.version, dv.task_count
    FROM dataset_versions dv
    JOIN datasets d ON d.organization_id = dv.organization_id AND d.id = dv.dataset_id
    ORDER BY d.name, dv.version DESC
    """
)
EVALUATOR_CHOICES = text(
    "SELECT id, name, attempt_count, checkpoint, step, agent FROM evaluator_configs ORDER BY name, id"
)


def dataset_run_choices(session: Session) -> tuple[list[DatasetVersionChoice], list[EvaluatorChoice]]:
    """What the start form offers: the organization's dataset versions (by dataset, newest version first) and its
    evaluator configurations (by name)."""
    versions = all_by_name(DatasetVersionChoice, session.execute(VERSION_CHOICES))
    return versions, all_by_name(EvaluatorChoice, session.execute(EVALUATOR_CHOICES))
