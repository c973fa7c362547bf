"""Two sides side by side: runs or environment versions, their figures with intervals, and the tests of B - A.

A side is a run (its trials), or an environment version (all its runs), optionally narrowed to one evaluator.
A whole version is read from the rollups the worker keeps (environment_version_stats, stage_metric_rollups,
failure_category_counts) and from its newest WINDOW completed runs (their stored pass@k and their trials'
rewards), so the cost never follows the size of the history. A version narrowed to one evaluator has no rollup
of its own: all its figures come from that window.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from domain import comparison as stats
from domain.specs import stage_order
from queries.runs import run_label_sql

WINDOW = 50  # newest completed runs a version side reads for per-run figures (about 400 trials at 8 per run)
HISTOGRAM_BINS = 10


class BadSide(ValueError):
    """A side the request cannot name (e.g. an evaluator filter on a run)."""


@dataclass(frozen=True)
class SideRef:
    """What one side names: a run, or a version (optionally one evaluator)."""

    kind: str  # "run" | "version"
    id: uuid.UUID
    label: str
    environment_id: uuid.UUID
    environment_name: str
    version_id: uuid.UUID
    version: int
    spec: dict[str, Any]
    evaluator_id: uuid.UUID | None = None
    evaluator_name: str | None = None
    world_seed: int | None = None
    reset_of_run_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Side:
    """One side's figures: counts, pass@k per k, mean reward, stage and failure-category rates, histogram."""

    ref: SideRef
    runs: int
    trials: int
    successes: int
    scored: int
    pass_at_k: dict[int, stats.Estimate]
    mean_reward: stats.Estimate
    stage_trials: dict[str, int]
    stage_passed: dict[str, int]
    categories: dict[str, int]
    histogram: list[int]
    window_runs: int  # runs the per-run figures read (all of them unless capped)
    capped: bool
    rewards: list[float] = field(repr=False, default_factory=list)
    outcomes: dict[int, tuple[bool, float | None]] = field(repr=False, default_factory=dict)  # trial → (won, reward)

    def stage_rate(self, key: str) -> float | None:
        """Share of trials reporting `key` that passed it."""
        trials = self.stage_trials.get(key, 0)
        return self.stage_passed.get(key, 0) / trials if trials else None

    def category_rate(self, category: str) -> float | None:
        """Trials that ended in `category`, per trial."""
        return self.categories.get(category, 0) / self.trials if self.trials else None


@dataclass(frozen=True)
class Pair:
    """One task both sides attempted (trial n of each run in the same world)."""

    trial_number: int
    a: bool
    b: bool
    a_reward: float | None
    b_reward: float | None

    @property
    def outcome(self) -> str:
        """both / A only / B only / neither."""
        return {(True, True): "both", (True, False): "A only", (False, True): "B only"}.get((self.a, self.b), "neither")


@dataclass(frozen=True)
class Comparison:
    """Both sides, the same-task pairs when there are any, and the tests of B - A."""

    a: Side
    b: Side
    pairs: list[Pair]
    pass_at_1: stats.Test
    mean_reward: stats.Test

    @property
    def paired(self) -> bool:
        """True when both sides ran the same tasks and the tests are paired."""
        return bool(self.pairs)

    @property
    def ks(self) -> list[int]:
        """Every k either side has pass@k for."""
        return sorted(set(self.a.pass_at_k) | set(self.b.pass_at_k))

    @property
    def stage_keys(self) -> list[str]:
        """Stage keys of both sides in pipeline order (A's version decides, B's extra keys follow)."""
        passed = {**self.b.stage_passed, **self.a.stage_passed}
        order = stage_order(self.a.ref.spec, {k: v for k, v in passed.items() if k in self.a.stage_passed})
        rest = stage_order(self.b.ref.spec, {k: v for k, v in passed.items() if k not in self.a.stage_passed})
        return order + rest

    @property
    def categories(self) -> list[str]:
        """Failure categories of either side, the most frequent first."""
        both = {
            c: self.a.categories.get(c, 0) + self.b.categories.get(c, 0)
            for c in {*self.a.categories, *self.b.categories}
        }
        return sorted(both, key=lambda c: (-both[c], c))

    @property
    def pair_counts(self) -> dict[str, int]:
        """How many pairs fell in each outcome."""
        counts = {"both": 0, "A only": 0, "B only": 0, "neither": 0}
        for pair in self.pairs:
            counts[pair.outcome] += 1
        return counts

    @property
    def pass_at_1_verdict(self) -> str:
        """The verdict on pass@1 in words."""
        per_side = len(self.pairs) if self.pairs else min(self.a.trials, self.b.trials)
        return stats.verdict(self.pass_at_1, "pass@1", per_side)

    @property
    def mean_reward_verdict(self) -> str:
        """The verdict on mean reward in words."""
        per_side = len(self.pairs) if self.pairs else min(len(self.a.rewards), len(self.b.rewards))
        return stats.verdict(self.mean_reward, "mean reward", per_side)


# The run or the environment version an id names, in one statement (each branch a primary-key lookup).
SIDE_REF = text(
    f"""
    SELECT 'run' AS kind, r.id, {run_label_sql()} AS label, e.id AS environment_id, e.name AS environment_name,
           v.id AS version_id, v.version, v.spec, c.id AS evaluator_id, c.name AS evaluator_name, r.world_seed,
           r.reset_of_run_id
    FROM evaluation_runs r
    JOIN environment_versions v ON v.organization_id = r.organization_id AND v.id = r.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    JOIN evaluator_configs c ON c.organization_id = r.organization_id AND c.id = r.evaluator_config_id
    WHERE r.id = :id
    UNION ALL
    SELECT 'version', v.id, NULL, e.id, e.name, v.id, v.version, v.spec, NULL, NULL, NULL, NULL
    FROM environment_versions v JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE v.id = :id
    """
)


def find_side(session: Session, side_id: uuid.UUID, evaluator_id: uuid.UUID | None = None) -> SideRef | None:
    """The run or environment version `side_id` names (None when the organization has neither).

    Raises BadSide for an evaluator filter on a run; answers None for an evaluator not in the organization.
    """
    found = session.execute(SIDE_REF, {"id": side_id}).first()
    if found is None:
        return None
    if found.kind == "run":
        if evaluator_id is not None:
            raise BadSide("an evaluator filter narrows an environment version, not a run")
        return SideRef(
            "run", found.id, found.label, found.environment_id, found.environment_name, found.version_id,
            found.version, found.spec, found.evaluator_id, found.evaluator_name, found.world_seed,
            found.reset_of_run_id,
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
        version.version, version.spec, evaluator_id, evaluator_name,
    )  # fmt: skip


RUN_TRIALS = text(
    """
    SELECT trial_number, reward, failure_category, metrics FROM evaluation_trials
    WHERE evaluation_run_id = ANY(:run_ids) ORDER BY evaluation_run_id, trial_number
    """
)
# A version side in one statement: its newest :window completed runs (whether more exist, their ids, their stored
# pass@k gathered per k, their scored trials' rewards, each as one array) and, unless narrowed to one evaluator,
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
    SELECT 'passAtK', p.key, 0, 0, 0, 0, array_agg(p.value::float8), NULL
    FROM w CROSS JOIN LATERAL jsonb_each_text(w.pass_at_k) p GROUP BY p.key
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
    won = [row.reward == 1 for row in rows]
    pass_at_k = stats.pass_at_k_table_over_trials(won, range(2, len(rows) + 1))
    return Side(
        ref,
        runs=1,
        pass_at_k={1: stats.proportion(figures["successes"], figures["trials"]), **pass_at_k},
        mean_reward=stats.mean(figures["rewards"]),
        histogram=_histogram(figures["rewards"]),
        window_runs=1,
        capped=False,
        outcomes={row.trial_number: (row.reward == 1, row.reward) for row in rows},
        **figures,
    )


def _version_side(session: Session, ref: SideRef) -> Side:
    fetched, run_ids, rewards = 0, [], []
    runs, trials, successes, scored = 0, 0, 0, 0
    per_k: dict[int, list[float]] = {}
    stage_trials: dict[str, int] = {}
    stage_passed: dict[str, int] = {}
    categories: dict[str, int] = {}
    params = {"version_id": ref.id, "evaluator_id": ref.evaluator_id, "window": WINDOW}
    for row in session.execute(VERSION_FIGURES, params):
        if row.what == "window":
            fetched, run_ids = row.a, row.ids
        elif row.what == "passAtK":
            if int(row.key) >= 2:
                per_k[int(row.key)] = row.vals
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
    pass_at_k = stats.pass_at_k_table_over_runs(dict(sorted(per_k.items())))
    return Side(
        ref,
        runs=runs,
        pass_at_k={1: stats.proportion(figures["successes"], figures["trials"]), **pass_at_k},
        mean_reward=stats.mean(figures["rewards"]),
        histogram=_histogram(figures["rewards"]),
        window_runs=len(run_ids),
        capped=fetched > WINDOW,
        **figures,
    )


def side_figures(session: Session, ref: SideRef) -> Side:
    """The figures of one side."""
    return _run_side(session, ref) if ref.kind == "run" else _version_side(session, ref)


def same_tasks(a: SideRef, b: SideRef) -> bool:
    """True when both sides are runs in the same world of one version (a new_workspace reset keeps it)."""
    return a.kind == b.kind == "run" and a.version_id == b.version_id and a.world_seed == b.world_seed


def compare(session: Session, a_ref: SideRef, b_ref: SideRef) -> Comparison:
    """Both sides' figures and the tests of B - A (paired when both ran the same tasks)."""
    a, b = side_figures(session, a_ref), side_figures(session, b_ref)
    pairs: list[Pair] = []
    if same_tasks(a_ref, b_ref) and a_ref.id != b_ref.id:
        pairs = [
            Pair(n, a.outcomes[n][0], b.outcomes[n][0], a.outcomes[n][1], b.outcomes[n][1])
            for n in sorted(set(a.outcomes) & set(b.outcomes))
        ]
    if pairs:
        pass_at_1 = stats.mcnemar_pass_at_1([(p.a, p.b) for p in pairs])
        scored = [(p.a_reward, p.b_reward) for p in pairs if p.a_reward is not None and p.b_reward is not None]
        mean_reward = stats.paired_mean_reward(scored)
    else:
        pass_at_1 = stats.unpaired_pass_at_1(a.successes, a.trials, b.successes, b.trials)
        mean_reward = stats.welch_mean_reward(a.rewards, b.rewards)
    return Comparison(a, b, pairs, pass_at_1, mean_reward)
