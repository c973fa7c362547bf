"""Two sides side by side: runs, environment versions or dataset runs, their figures with intervals, and the tests of
B - A.

A side is a run (its trials), an environment version (all its runs), optionally narrowed to one evaluator, or a
dataset run (its tasks' rollup rows, dataset_run_tasks: never a scan of trials).
A whole version is read from the rollups the worker keeps (environment_version_stats, stage_metric_rollups,
failure_category_counts) and from its newest WINDOW completed runs (their trials' rewards and per-task tallies),
so the cost never follows the size of the history. A version narrowed to one evaluator has no rollup
of its own: all its figures come from that window.

The task is the unit (domain.task_stats): a side's per-task tallies come from one grouped statement over the trials
it reads (the run's, or the version window's runs), the task key being md5 of the trial's task text, grouped by
evaluator too so that a version side shows each evaluator's figures and the evaluator-mix warning its counts.
pass@1, mean reward and pass@k are the task-clustered figures of those tallies; B - A is paired by task when the
sides share their tasks (never trial n with trial n).

A dataset run's tasks are keyed by queries.dataset_runs.task_key (environment version and world seed), so two
dataset runs of one dataset version share every task and are paired on the tasks both finished; a task one side has
not finished is listed as unfinished, left out of every figure and test. Its key never meets a run's or a version's
(md5 of a task text): those comparisons are unpaired, over different draws, and say so. Dataset runs of two
different datasets get no verdict (task_verdict.different_datasets says why).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from domain import task_stats
from domain.specs import pipeline_order
from domain.task_stats import TaskEstimate, TaskRow, TaskTally, TaskTest
from domain.task_verdict import (
    TaskWarning,
    different_datasets,
    evaluator_mix_warning,
    task_verdict,
    task_warnings,
)
from queries.dataset_runs import dataset_run_outcomes, dataset_run_view
from queries.runs import run_label_sql, version_stages_passed_sql

WINDOW = 50  # newest completed runs a version side reads for per-run figures (about 400 trials at 8 per run)
HISTOGRAM_BINS = 10
TASK_ROWS = 200  # the per-task table's first rows by task key (the API's `tasks`, `tasksTruncated` past it)


class BadSide(ValueError):
    """A side the request cannot name (e.g. an evaluator filter on a run)."""


@dataclass(frozen=True)
class SideRef:
    """What one side names: a run, a version (optionally one evaluator), or a dataset run (its dataset and version;
    no environment of its own: `environment_*` and `version_id` None, `version` the dataset version's number, `spec`
    its first task's environment version's, which orders the stages)."""

    kind: str  # "run" | "version" | "dataset_run"
    id: uuid.UUID
    label: str
    environment_id: uuid.UUID | None
    environment_name: str | None
    version_id: uuid.UUID | None
    version: int
    spec: dict[str, Any]
    evaluator_id: uuid.UUID | None = None
    evaluator_name: str | None = None
    world_seed: int | None = None
    reset_of_run_id: uuid.UUID | None = None
    created_at: Any = None  # a run's creation time (a version: None), so that ticking two runs makes the older A
    version_passed: dict[str, int] | None = None  # the whole version's stage counts: its stages' pipeline order
    dataset_id: uuid.UUID | None = None  # a dataset run's dataset, name and version
    dataset_name: str | None = None
    dataset_version_id: uuid.UUID | None = None


@dataclass(frozen=True)
class EvaluatorPart:
    """One evaluator's share of a side: its runs and trials, and its own task figures."""

    id: uuid.UUID
    label: str
    runs: int
    tasks: dict[str, TaskTally] = field(repr=False, default_factory=dict)

    @property
    def trials(self) -> int:
        """The evaluator's trials on this side."""
        return sum(t.attempts for t in self.tasks.values())

    @property
    def pass_at_1(self) -> TaskEstimate:
        """This evaluator's pass@1 over its tasks."""
        return task_stats.pass_at_1(self.tasks)

    @property
    def mean_reward(self) -> TaskEstimate:
        """This evaluator's mean reward over its tasks."""
        return task_stats.mean_reward(self.tasks)


@dataclass(frozen=True)
class Side:
    """One side's figures: counts, pass@k per k, mean reward, stage and failure-category rates, histogram."""

    ref: SideRef
    runs: int
    trials: int
    successes: int
    scored: int
    pass_at_k: dict[int, TaskEstimate]
    mean_reward: TaskEstimate
    stage_trials: dict[str, int]
    stage_passed: dict[str, int]
    categories: dict[str, int]
    histogram: list[int]
    window_runs: int  # runs the per-run figures read (all of them unless capped)
    capped: bool
    rewards: list[float] = field(repr=False, default_factory=list)
    tasks: dict[str, TaskTally] = field(repr=False, default_factory=dict)  # task key → the side's tally (pooled)
    task_texts: dict[str, str] = field(repr=False, default_factory=dict)  # task key → the start of its task text
    evaluators: list[EvaluatorPart] = field(default_factory=list)
    histogram_unit: str = "trials"  # what the histogram counts: trials' rewards, or a dataset run's task means
    # A dataset run's tasks not finished yet (task key → its run's status, and its trials so far), and each task's
    # current evaluation run (where its trials are).
    unfinished: dict[str, tuple[str, TaskTally]] = field(repr=False, default_factory=dict)
    task_runs: dict[str, uuid.UUID] = field(repr=False, default_factory=dict)

    @property
    def pass_at_1(self) -> TaskEstimate:
        """pass@1 over the side's tasks (the trials its task figures read) with the clustered standard error."""
        return self.pass_at_k[1]

    def stage_rate(self, key: str) -> float | None:
        """Share of trials reporting `key` that passed it."""
        trials = self.stage_trials.get(key, 0)
        return self.stage_passed.get(key, 0) / trials if trials else None

    def category_rate(self, category: str) -> float | None:
        """Trials that ended in `category`, per trial."""
        return self.categories.get(category, 0) / self.trials if self.trials else None


@dataclass(frozen=True)
class Comparison:
    """Both sides, the pairing of their tasks, the tests of B - A with the task as the unit, and the warnings."""

    a: Side
    b: Side
    pairing: task_stats.Pairing
    pass_at_1: TaskTest
    mean_reward: TaskTest
    warnings: list[TaskWarning]
    task_rows: list[TaskRow]
    tasks_truncated: bool
    no_verdict: str | None = None  # why the sides get no verdict at all (dataset runs of different datasets)

    @property
    def paired(self) -> bool:
        """True when both sides share their tasks and the tests are paired by task."""
        return self.pairing.paired

    @property
    def ks(self) -> list[int]:
        """Every k either side has pass@k for."""
        return sorted(set(self.a.pass_at_k) | set(self.b.pass_at_k))

    @property
    def stage_keys(self) -> list[str]:
        """Stage keys of both sides in their versions' pipeline order (A's version decides, B's extra keys follow):
        the order the run, trial and partial-reward pages show, whichever runs or evaluator a side reads."""
        order = pipeline_order(self.a.ref.spec, self.a.stage_passed, self.a.ref.version_passed)
        extra = [key for key in self.b.stage_passed if key not in self.a.stage_passed]
        return order + pipeline_order(self.b.ref.spec, extra, self.b.ref.version_passed)

    @property
    def categories(self) -> list[str]:
        """Failure categories of either side, the most frequent first."""
        both = {
            c: self.a.categories.get(c, 0) + self.b.categories.get(c, 0)
            for c in {*self.a.categories, *self.b.categories}
        }
        return sorted(both, key=lambda c: (-both[c], c))

    @property
    def pass_at_1_verdict(self) -> str:
        """The verdict on pass@1 in words (method, tasks read, power in tasks), or why there is none."""
        return self.no_verdict or task_verdict(self.pass_at_1, "pass@1")

    @property
    def mean_reward_verdict(self) -> str:
        """The verdict on mean reward in words, or why there is none."""
        return self.no_verdict or task_verdict(self.mean_reward, "mean reward")

    @property
    def evaluator_verdicts(self) -> list[tuple[EvaluatorPart, EvaluatorPart, TaskTest, str]]:
        """For each evaluator both sides ran (by id), B - A of pass@1 over that evaluator's trials alone, in words:
        like compared with like when the sides' mixes differ."""
        held_b = {e.id: e for e in self.b.evaluators}
        answer: list[tuple[EvaluatorPart, EvaluatorPart, TaskTest, str]] = []
        if self.no_verdict:
            return answer
        for part_a in self.a.evaluators:
            part_b = held_b.get(part_a.id)
            if part_b is not None and (len(self.a.evaluators) > 1 or len(self.b.evaluators) > 1):
                test = task_stats.compare_pass_at_1(part_a.tasks, part_b.tasks)
                answer.append((part_a, part_b, test, task_verdict(test, "pass@1")))
        return answer

    def task_text(self, key: str) -> str:
        """The start of task `key`'s text, from whichever side holds it."""
        return self.a.task_texts.get(key) or self.b.task_texts.get(key) or ""


# The run, environment version or dataset run an id names, in one statement (each branch a primary-key lookup; a
# dataset run's spec is its first task's version's).
SIDE_REF = text(
    f"""
    SELECT 'run' AS kind, r.id, {run_label_sql()} AS label, e.id AS environment_id, e.name AS environment_name,
           v.id AS version_id, v.version, v.spec, c.id AS evaluator_id, c.name AS evaluator_name, r.world_seed,
           r.reset_of_run_id, r.created_at, {version_stages_passed_sql()} AS version_passed,
           NULL::uuid AS dataset_id, NULL AS dataset_name, NULL::uuid AS dataset_version_id
    FROM evaluation_runs r
    JOIN environment_versions v ON v.organization_id = r.organization_id AND v.id = r.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    JOIN evaluator_configs c ON c.organization_id = r.organization_id AND c.id = r.evaluator_config_id
    WHERE r.id = :id
    UNION ALL
    SELECT 'version', v.id, NULL, e.id, e.name, v.id, v.version, v.spec, NULL, NULL, NULL, NULL, NULL,
           {version_stages_passed_sql()}, NULL, NULL, NULL
    FROM environment_versions v JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE v.id = :id
    UNION ALL
    SELECT 'dataset_run', dr.id, c.name || ' on ' || d.name || ' v' || dv.version, NULL, NULL, NULL, dv.version,
           (SELECT v.spec FROM dataset_tasks t
            JOIN environment_versions v ON v.organization_id = t.organization_id AND v.id = t.environment_version_id
            WHERE t.organization_id = dr.organization_id AND t.dataset_version_id = dr.dataset_version_id
            ORDER BY t.position LIMIT 1),
           c.id, c.name, NULL, NULL, dr.created_at, NULL, d.id, d.name, dv.id
    FROM dataset_runs dr
    JOIN dataset_versions dv ON dv.organization_id = dr.organization_id AND dv.id = dr.dataset_version_id
    JOIN datasets d ON d.organization_id = dv.organization_id AND d.id = dv.dataset_id
    JOIN evaluator_configs c ON c.organization_id = dr.organization_id AND c.id = dr.evaluator_config_id
    WHERE dr.id = :id
    """
)


def find_side(session: Session, side_id: uuid.UUID, evaluator_id: uuid.UUID | None = None) -> SideRef | None:
    """The run, environment version or dataset run `side_id` names (None when the organization has none of them).

    Raises BadSide for an evaluator filter on a run or a dataset run; answers None for an evaluator not in the
    organization.
    """
    found = session.execute(SIDE_REF, {"id": side_id}).first()
    if found is None:
        return None
    if found.kind == "dataset_run":
        if evaluator_id is not None:
            raise BadSide("an evaluator filter narrows an environment version, not a dataset run")
        return SideRef(
            "dataset_run", found.id, found.label, None, None, None, found.version, found.spec or {},
            found.evaluator_id, found.evaluator_name, created_at=found.created_at, dataset_id=found.dataset_id,
            dataset_name=found.dataset_name, dataset_version_id=found.dataset_version_id,
        )  # fmt: skip
    if found.kind == "run":
        if evaluator_id is not None:
            raise BadSide("an evaluator filter narrows an environment version, not a run")
        return SideRef(
            "run", found.id, found.label, found.environment_id, found.environment_name, found.version_id,
            found.version, found.spec, found.evaluator_id, found.evaluator_name, found.world_seed,
            found.reset_of_run_id, found.created_at, found.version_passed,
        )  # fmt: skip
    version = found
    label = f"{version.environment_name} v{version.version}"
    evaluator_name = None
    if evaluator_id is not None:
        evaluator_name = session.execute(
            text("SELECT name FROM evaluator_configs WHERE id = :id"), {"id": evaluator_id}
        ).scalar()
        if evaluator_name is None:
            return None
        label += f" · {evaluator_name}"
    return SideRef(
        "version", version.id, label, version.environment_id, version.environment_name, version.id,
        version.version, version.spec, evaluator_id, evaluator_name, version_passed=version.version_passed,
    )  # fmt: skip


# A side's per-task tallies in one statement over the runs it reads, one row per evaluator (its name, its runs, and
# its tasks' tallies as arrays, so that hundreds of tasks cost no more than a row each in PostgreSQL's array output):
# the task key is md5 of the task text, successes are trials with reward 1 (as the rollups count them).
TASK_TALLIES = text(
    """
    WITH per_task AS (
        SELECT r.evaluator_config_id AS evaluator_id, md5(t.task) AS task, left(min(t.task), 120) AS text,
               count(*) AS attempts, count(*) FILTER (WHERE t.reward = 1) AS successes, count(t.reward) AS scored,
               coalesce(sum(t.reward), 0) AS reward_sum, coalesce(sum(t.reward * t.reward), 0) AS reward_square_sum
        FROM evaluation_trials t
        JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id
        WHERE t.evaluation_run_id = ANY(:run_ids) AND r.id = ANY(:run_ids)  -- both sides by index, never a run scan
        GROUP BY 1, 2
    ), runs AS (
        SELECT r.evaluator_config_id AS evaluator_id, count(*) AS runs FROM evaluation_runs r
        WHERE r.id = ANY(:run_ids) GROUP BY 1
    )
    SELECT c.id, c.name, runs.runs,
           coalesce(array_agg(p.task) FILTER (WHERE p.task IS NOT NULL), '{}') AS tasks,
           coalesce(array_agg(p.text) FILTER (WHERE p.task IS NOT NULL), '{}') AS texts,
           coalesce(array_agg(p.attempts) FILTER (WHERE p.task IS NOT NULL), '{}') AS attempts,
           coalesce(array_agg(p.successes) FILTER (WHERE p.task IS NOT NULL), '{}') AS successes,
           coalesce(array_agg(p.scored) FILTER (WHERE p.task IS NOT NULL), '{}') AS scored,
           coalesce(array_agg(p.reward_sum) FILTER (WHERE p.task IS NOT NULL), '{}') AS reward_sums,
           coalesce(array_agg(p.reward_square_sum) FILTER (WHERE p.task IS NOT NULL), '{}') AS reward_square_sums
    FROM runs
    JOIN evaluator_configs c ON c.id = runs.evaluator_id
    LEFT JOIN per_task p ON p.evaluator_id = runs.evaluator_id
    GROUP BY c.id, c.name, runs.runs
    ORDER BY c.name, c.id
    """
)


def task_figures(session: Session, run_ids: list[uuid.UUID]) -> dict[str, Any]:
    """The pooled per-task tallies of `run_ids`' trials, the start of each task's text, and each evaluator's runs and
    tallies."""
    pooled: dict[str, TaskTally] = {}
    texts: dict[str, str] = {}
    evaluators: list[EvaluatorPart] = []
    for row in session.execute(TASK_TALLIES, {"run_ids": run_ids}):
        tallies = {
            task: TaskTally(int(n), int(wins), int(scored), float(total), float(squares))
            for task, n, wins, scored, total, squares in zip(
                row.tasks, row.attempts, row.successes, row.scored, row.reward_sums, row.reward_square_sums,
                strict=True,
            )
        }  # fmt: skip
        for task, tally in tallies.items():
            earlier = pooled.get(task)
            pooled[task] = tally if earlier is None else _add(earlier, tally)
        texts = dict(zip(row.tasks, row.texts, strict=True)) | texts
        evaluators.append(EvaluatorPart(row.id, row.name, int(row.runs), tallies))
    return {"tasks": pooled, "task_texts": texts, "evaluators": evaluators}


def _add(total: TaskTally, part: TaskTally) -> TaskTally:
    return TaskTally(
        total.attempts + part.attempts,
        total.successes + part.successes,
        total.scored + part.scored,
        total.reward_sum + part.reward_sum,
        total.reward_square_sum + part.reward_square_sum,
    )


def _task_estimates(tasks: dict[str, TaskTally]) -> dict[str, Any]:
    """pass@1 (over trials, clustered by task), pass@k for k >= 2 (over tasks with k attempts) and mean reward."""
    over_tasks = {k: e for k, e in task_stats.pass_at_k(tasks).items() if k >= 2}
    return {
        "pass_at_k": {1: task_stats.pass_at_1(tasks), **over_tasks},
        "mean_reward": task_stats.mean_reward(tasks),
    }


RUN_TRIALS = text(
    """
    SELECT trial_number, reward, failure_category, metrics FROM evaluation_trials
    WHERE evaluation_run_id = ANY(:run_ids) ORDER BY evaluation_run_id, trial_number
    """
)
# A version side in one statement: its newest :window completed runs (whether more exist, their ids, their scored
# trials' rewards as one array) and, unless narrowed to one evaluator,
# its rollups. Every part is an index range scan bounded by the window or the version's stage and category keys.
VERSION_FIGURES = text(
    """
    WITH fetched AS (
        SELECT r.id, r.pass_at_k, r.created_at FROM evaluation_runs r
        WHERE r.environment_version_id = :version_id AND r.status = 'completed'
          AND (CAST(:evaluator_id AS uuid) IS NULL OR r.evaluator_config_id = CAST(:evaluator_id AS uuid))
        ORDER BY r.created_at DESC, r.id DESC LIMIT :window + 1
    ), w AS (SELECT * FROM fetched ORDER BY created_at DESC, id DESC LIMIT :window)
    SELECT 'window' AS what, NULL AS key, (SELECT count(*) FROM fetched) AS a, 0 AS b, 0 AS c, 0 AS d,
           NULL::float8[] AS vals, (SELECT coalesce(array_agg(id), '{}') FROM w) AS ids
    UNION ALL
    SELECT 'rewards', NULL, 0, 0, 0, 0, coalesce(array_agg(t.reward), '{}'), NULL FROM evaluation_trials t
    WHERE CAST(:evaluator_id AS uuid) IS NULL AND t.evaluation_run_id IN (SELECT id FROM w) AND t.reward IS NOT NULL
    UNION ALL
    SELECT 'stats', NULL, s.runs, s.trials, s.successes, s.scored, NULL, NULL FROM environment_version_stats s
    WHERE CAST(:evaluator_id AS uuid) IS NULL AND s.environment_version_id = :version_id
    UNION ALL
    SELECT 'stage', m.stage_key, m.trials, m.passed, 0, 0, NULL, NULL FROM stage_metric_rollups m
    WHERE CAST(:evaluator_id AS uuid) IS NULL AND m.environment_version_id = :version_id AND m.trials > 0
    UNION ALL
    SELECT 'category', f.failure_category, f.trials, 0, 0, 0, NULL, NULL FROM failure_category_counts f
    WHERE CAST(:evaluator_id AS uuid) IS NULL AND f.environment_version_id = :version_id AND f.trials > 0
    """
)


def _histogram(rewards: list[float]) -> list[int]:
    counts, _ = np.histogram(np.asarray(rewards, dtype=float), bins=HISTOGRAM_BINS, range=(0.0, 1.0))
    return [int(c) for c in counts]


def _trial_figures(rows) -> dict[str, Any]:
    """Counts, stage and category tallies of trial rows (trial_number, reward, failure_category, metrics)."""
    stage_trials: dict[str, int] = {}
    stage_passed: dict[str, int] = {}
    categories: dict[str, int] = {}
    rewards = [row.reward for row in rows if row.reward is not None]
    for row in rows:
        for key, value in row.metrics.items():
            if key.startswith("stage_"):
                stage_trials[key] = stage_trials.get(key, 0) + 1
                stage_passed[key] = stage_passed.get(key, 0) + int(value == 1)
        if row.failure_category:
            categories[row.failure_category] = categories.get(row.failure_category, 0) + 1
    return {
        "trials": len(rows),
        "successes": sum(1 for row in rows if row.reward == 1),
        "scored": len(rewards),
        "rewards": rewards,
        "stage_trials": stage_trials,
        "stage_passed": stage_passed,
        "categories": categories,
    }


def _run_side(session: Session, ref: SideRef) -> Side:
    rows = session.execute(RUN_TRIALS, {"run_ids": [ref.id]}).all()
    figures = _trial_figures(rows)
    tasks = task_figures(session, [ref.id])
    return Side(
        ref,
        runs=1,
        histogram=_histogram(figures["rewards"]),
        window_runs=1,
        capped=False,
        **_task_estimates(tasks["tasks"]),
        **tasks,
        **figures,
    )


def _version_side(session: Session, ref: SideRef) -> Side:
    fetched, run_ids, rewards = 0, [], []
    runs, trials, successes, scored = 0, 0, 0, 0
    stage_trials: dict[str, int] = {}
    stage_passed: dict[str, int] = {}
    categories: dict[str, int] = {}
    params = {"version_id": ref.id, "evaluator_id": ref.evaluator_id, "window": WINDOW}
    for row in session.execute(VERSION_FIGURES, params):
        if row.what == "window":
            fetched, run_ids = row.a, row.ids
        elif row.what == "rewards":
            rewards = row.vals
        elif row.what == "stats":
            runs, trials, successes, scored = row.a, row.b, row.c, row.d
        elif row.what == "stage":
            stage_trials[row.key], stage_passed[row.key] = row.a, row.b
        else:
            categories[row.key] = row.a
    if ref.evaluator_id is None:
        figures: dict[str, Any] = {
            "trials": trials, "successes": successes, "scored": scored, "rewards": rewards,
            "stage_trials": stage_trials, "stage_passed": stage_passed, "categories": categories,
        }  # fmt: skip
    else:  # no rollup of its own: the window's trials
        runs = len(run_ids)
        figures = _trial_figures(session.execute(RUN_TRIALS, {"run_ids": run_ids}).all())
    tasks = task_figures(session, run_ids)
    return Side(
        ref,
        runs=runs,
        histogram=_histogram(figures["rewards"]),
        window_runs=len(run_ids),
        capped=fetched > WINDOW,
        **_task_estimates(tasks["tasks"]),
        **tasks,
        **figures,
    )


def _dataset_run_side(session: Session, ref: SideRef) -> Side:
    """A dataset run's figures from its tasks' rollup rows: the finished tasks' tallies, stages and categories; the
    histogram over its tasks' mean rewards (the rollup keeps no trial's reward)."""
    view = dataset_run_view(session, ref.id)
    assert view is not None, f"dataset run {ref.id} vanished"
    finished = [t for t in view.tasks if t.finished and t.trials]
    tasks = {t.key: t.tally for t in finished}
    categories, stages = dataset_run_outcomes(session, ref.id, finished=True)
    stage_trials = {key: trials for key, (trials, _, _) in stages.items()}
    stage_passed = {key: passed for key, (_, passed, _) in stages.items()}
    means = [m for m in (t.mean_reward for t in finished) if m is not None]
    return Side(
        ref,
        runs=len(finished),
        trials=sum(t.trials for t in finished),
        successes=sum(t.successes for t in finished),
        scored=sum(t.scored for t in finished),
        stage_trials=stage_trials,
        stage_passed=stage_passed,
        categories=categories,
        histogram=_histogram(means),
        window_runs=len(finished),
        capped=False,
        tasks=tasks,
        task_texts={t.key: (t.task or f"{t.environment_name} v{t.version}, world seed {t.world_seed}")[:120]
                    for t in view.tasks},
        evaluators=[EvaluatorPart(ref.evaluator_id, ref.evaluator_name or "", len(finished), tasks)]
        if ref.evaluator_id is not None
        else [],
        histogram_unit="tasks",
        unfinished={t.key: (t.status, t.tally) for t in view.tasks if not t.finished},
        task_runs={t.key: t.evaluation_run_id for t in view.tasks},
        **_task_estimates(tasks),
    )  # fmt: skip


def side_figures(session: Session, ref: SideRef) -> Side:
    """The figures of one side."""
    if ref.kind == "dataset_run":
        return _dataset_run_side(session, ref)
    return _run_side(session, ref) if ref.kind == "run" else _version_side(session, ref)


def _no_verdict(a: SideRef, b: SideRef) -> str | None:
    """Why the sides get no verdict: dataset runs of two different datasets (None when a verdict is due)."""
    if a.kind == b.kind == "dataset_run" and a.dataset_id != b.dataset_id:
        return different_datasets(a.dataset_name or "", b.dataset_name or "")
    return None


def _untested(test: TaskTest) -> TaskTest:
    """A test left undone: what the sides hold, no figures."""
    return replace(
        test, method="none", difference=None, low=None, high=None, p_value=None, stderr=None, df=None, power=None
    )


def compare(session: Session, a_ref: SideRef, b_ref: SideRef) -> Comparison:
    """Both sides' figures, the tests of B - A with the task as the unit (paired by task when the sides share their
    tasks), the per-task table and the warnings (one task, attempts that differ, evaluator mixes that differ)."""
    a, b = side_figures(session, a_ref), side_figures(session, b_ref)
    warnings = task_warnings(a.tasks, b.tasks)
    # a dataset run is one evaluator by construction: one against another is no mix of evaluators
    single = len(a.evaluators) <= 1 and len(b.evaluators) <= 1 and "dataset_run" in (a_ref.kind, b_ref.kind)
    mix = evaluator_mix_warning({e.label: e.trials for e in a.evaluators}, {e.label: e.trials for e in b.evaluators})
    if mix is not None and not single:
        warnings.insert(0, mix)
    order = {key: n for n, key in enumerate(a.task_runs)} | {
        key: len(a.task_runs) + n for n, key in enumerate(b.task_runs) if key not in a.task_runs
    }  # a dataset run's tasks in its version's order
    rows, truncated = task_stats.task_table(
        a.tasks,
        b.tasks,
        TASK_ROWS,
        unfinished_a={k: t for k, (_, t) in a.unfinished.items()},
        unfinished_b={k: t for k, (_, t) in b.unfinished.items()},
        order=order,
    )
    pass_at_1 = task_stats.compare_pass_at_1(a.tasks, b.tasks)
    reward = task_stats.compare_mean_reward(a.tasks, b.tasks)
    no_verdict = _no_verdict(a_ref, b_ref)
    if no_verdict:
        pass_at_1, reward = _untested(pass_at_1), _untested(reward)
    return Comparison(
        a,
        b,
        task_stats.pairing(a.tasks, b.tasks),
        pass_at_1,
        reward,
        warnings,
        rows,
        truncated,
        no_verdict,
    )


@dataclass(frozen=True)
class Choice:
    """One entry of the compare picker's menus: an id, its label, and the environment (and version) it belongs to."""

    kind: str  # "environment" | "version" | "run" | "evaluator" | "dataset_run"
    id: uuid.UUID
    label: str
    environment_id: uuid.UUID | None
    version_id: uuid.UUID | None


PICKER_RUNS = 100  # newest completed runs (and newest dataset runs) the picker's menus offer

# The picker's menus in one statement: environments, their versions (newest first), evaluators, the newest runs and
# the newest dataset runs (of any environment).
CHOICES = text(
    f"""
    SELECT 'environment' AS kind, e.id, e.name AS label, e.id AS environment_id, NULL::uuid AS version_id,
           0 AS rank, e.name AS sort
    FROM environments e
    UNION ALL
    SELECT 'version', v.id, e.name || ' v' || v.version, e.id, v.id, v.version, e.name
    FROM environment_versions v JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE CAST(:environment_id AS uuid) IS NULL OR e.id = CAST(:environment_id AS uuid)
    UNION ALL
    SELECT 'evaluator', c.id, c.name, NULL, NULL, 0, c.name FROM evaluator_configs c
    UNION ALL
    SELECT * FROM (
        SELECT 'run', r.id, {run_label_sql()}, e.id, v.id, 0, to_char(r.created_at, 'YYYYMMDDHH24MISSUS')
        FROM evaluation_runs r
        JOIN environment_versions v ON v.organization_id = r.organization_id AND v.id = r.environment_version_id
        JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
        JOIN evaluator_configs c ON c.organization_id = r.organization_id AND c.id = r.evaluator_config_id
        WHERE r.status = 'completed' AND (CAST(:environment_id AS uuid) IS NULL OR e.id = CAST(:environment_id AS uuid))
        ORDER BY r.created_at DESC, r.id DESC LIMIT :runs
    ) runs
    UNION ALL
    SELECT * FROM (
        SELECT 'dataset_run', dr.id,
               c.name || ' on ' || d.name || ' v' || dv.version || ' · '
               || to_char(dr.created_at, 'YYYY-MM-DD HH24:MI'),
               NULL::uuid, NULL::uuid, 0, to_char(dr.created_at, 'YYYYMMDDHH24MISSUS')
        FROM dataset_runs dr
        JOIN dataset_versions dv ON dv.organization_id = dr.organization_id AND dv.id = dr.dataset_version_id
        JOIN datasets d ON d.organization_id = dv.organization_id AND d.id = dv.dataset_id
        JOIN evaluator_configs c ON c.organization_id = dr.organization_id AND c.id = dr.evaluator_config_id
        ORDER BY dr.created_at DESC, dr.id DESC LIMIT :runs
    ) dataset_runs
    """
)


def compare_choices(session: Session, environment_id: uuid.UUID | None = None) -> dict[str, list[Choice]]:
    """The compare picker's menus: environments, versions (each environment's newest first), evaluators, the
    newest PICKER_RUNS completed runs and dataset runs (newest first), versions and runs narrowed to `environment_id`
    when given."""
    menus: dict[str, list[tuple[Any, Choice]]] = {
        "environment": [], "version": [], "evaluator": [], "run": [], "dataset_run": [],
    }  # fmt: skip
    for row in session.execute(CHOICES, {"environment_id": environment_id, "runs": PICKER_RUNS}):
        choice = Choice(row.kind, row.id, row.label, row.environment_id, row.version_id)
        order: Any = {
            "environment": (row.sort, str(row.id)),
            "version": (row.sort, -row.rank),
            "evaluator": (row.sort, str(row.id)),
            "run": (row.sort,),
            "dataset_run": (row.sort,),
        }[row.kind]
        menus[row.kind].append((order, choice))
    answer = {kind: [choice for _, choice in sorted(items, key=lambda item: item[0])] for kind, items in menus.items()}
    answer["run"].reverse()  # newest first
    answer["dataset_run"].reverse()
    return answer
