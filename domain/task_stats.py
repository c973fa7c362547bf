"""Statistics of a comparison with the task as the unit: clustered intervals, tests paired by task, pass@k over tasks.

Attempts of one task are not independent samples of an agent's ability (Miller 2024, "Adding Error Bars to
Evals"), so every figure here reads per-task tallies (`TaskTally`: attempts, successes, scored trials, the sum
and the sum of squares of the rewards), what one grouped SQL query gives without reading every trial:

    SELECT task_hash, count(*), count(*) FILTER (WHERE succeeded), count(reward), sum(reward), sum(reward * reward)
    FROM ... GROUP BY task_hash

The methods, as the compare page states them (the *_METHOD constants):

* a side's pass@1 and mean reward: the mean over its trials (scored trials for the reward) with the cluster-robust
  standard error over tasks (CR0: SE = sqrt(Σ_tasks (Σ_trials in task (x - x̄))²) / N, N the trials) and the t
  95% interval with tasks - 1 degrees of freedom, clipped to [0, 1]. A side of one task keeps the exact figures
  of that task (Clopper-Pearson for pass@1, the t interval over its trials for the reward), marked `one_task`.
* B - A when both sides hold the same tasks (at least MIN_PAIRED_TASKS shared, and the shared tasks at least half
  of each side's): the mean over shared tasks of the per-task difference of means, its standard error over those
  tasks and the paired t-test (`scipy.stats.ttest_rel`); tasks only one side holds are listed, not paired.
  Otherwise the unpaired difference with SE = sqrt(SE_A² + SE_B²) and a t-test with Welch-Satterthwaite degrees of
  freedom (each side's tasks - 1). When a side holds one task, the exact tests over trials: Fisher's for pass@1,
  Welch's t-test for the reward. When the values a t-test would read have no spread (every shared task moved by
  the same amount, every task of a side alike), an exact test takes over: the sign test over shared tasks, the
  Mann-Whitney test over task means (over trials for one task), never "p = 0" from a zero standard error.
* pass@k: for each k, the mean over the tasks with at least k attempts of the unbiased estimator with that task's
  own attempts, with the t 95% interval over those tasks; no entry for a k no task reaches.
* power: the normal-approximation number of tasks per side (paired: shared tasks) that would detect a difference
  of DETECTABLE at alpha = 0.05 two-sided with 80% power, from the clustered variance (the design effect), never
  counted in trials.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np
from scipy import stats

from domain.comparison import ALPHA, CONFIDENCE, DETECTABLE, POWER, Estimate, Test, normal_quantile, proportion
from domain.comparison import unpaired_pass_at_1 as trial_pass_at_1_test
from domain.scoring import unbiased_pass_at_ks
from domain.vocabulary import MAX_ATTEMPTS

MIN_PAIRED_TASKS = 2  # fewer shared tasks cannot give a paired test's standard error

METHOD = "cluster-robust (CR0) standard error over tasks, t 95% interval with tasks - 1 degrees of freedom"
PASS_AT_1_METHOD = f"share of trials that succeeded; {METHOD}"
REWARD_METHOD = f"mean of the scored trials' rewards; {METHOD}"
PASS_AT_K_METHOD = "mean over tasks with at least k attempts of the unbiased estimator, t 95% interval over those tasks"
ONE_TASK_PASS_AT_1_METHOD = "exact Clopper-Pearson interval over the trials of one task"
ONE_TASK_REWARD_METHOD = "t interval over the scored trials of one task"
PAIRED_METHOD = "paired t-test over task means"
UNPAIRED_METHOD = "t-test on task-clustered standard errors (Welch-Satterthwaite degrees of freedom)"
ONE_TASK_REWARD_TEST = "Welch's t-test over the trials of one task"
# When the values a t-test reads have no spread its statistic is undefined; these exact tests take over, so that
# two tasks that each moved from 0/1 to 1/1 are not "p = 0".
SIGN_TEST = "exact sign test over shared tasks (their differences have no spread for a t-test)"
RANK_TEST = "exact Mann-Whitney test over task means (no spread for a t-test)"
ONE_TASK_RANK_TEST = "exact Mann-Whitney test over the trials of one task (no spread for a t-test)"
NO_SPREAD = 1e-12  # a standard error at most this is no spread (rounding in sums of rewards)
POWER_METHOD = (
    "normal-approximation sample size in tasks from the task-clustered variance (design effect), "
    "alpha = 0.05 two-sided, 80% power"
)


@dataclass(frozen=True)
class TaskTally:
    """One task's trials on one side: attempts, successes, and the scored trials' count, reward sum and squares."""

    attempts: int
    successes: int
    scored: int = 0
    reward_sum: float = 0.0
    reward_square_sum: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.successes <= self.attempts or not 0 <= self.scored <= self.attempts:
            raise ValueError(f"a task's tally needs 0 <= successes, scored <= attempts: {self}")


@dataclass(frozen=True)
class TaskColumns:
    """Per-task tallies as columns, one entry per task in `keys`' order (what a grouped statement's arrays give):
    the figures of a dict of TaskTally without an object per task, for tables of many sides of many tasks (the
    leaderboard). Every function here that takes tallies takes these too."""

    keys: tuple[str, ...]
    attempts: np.ndarray
    successes: np.ndarray
    scored: np.ndarray
    reward_sum: np.ndarray
    reward_square_sum: np.ndarray
    keys_sorted: bool = False  # the keys are in sorted order already: no figure sorts them again

    @classmethod
    def of(cls, tasks: Mapping[str, TaskTally]) -> TaskColumns:
        """The columns of a dict of tallies."""
        values = list(tasks.values())
        return cls(
            tuple(tasks),
            np.asarray([t.attempts for t in values], dtype=float),
            np.asarray([t.successes for t in values], dtype=float),
            np.asarray([t.scored for t in values], dtype=float),
            np.asarray([t.reward_sum for t in values], dtype=float),
            np.asarray([t.reward_square_sum for t in values], dtype=float),
        )

    def held(self) -> set[str]:
        """The tasks with at least one attempt."""
        return {key for key, n in zip(self.keys, self.attempts.tolist(), strict=True) if n > 0}


Tallies = Mapping[str, TaskTally] | TaskColumns  # per-task tallies, as a dict or as columns


def _columns(tasks: Tallies) -> TaskColumns:
    return tasks if isinstance(tasks, TaskColumns) else TaskColumns.of(tasks)


def tally(trials: Iterable[tuple[str, bool, float | None]]) -> dict[str, TaskTally]:
    """Per-task tallies of (task key, succeeded, reward or None) trials, for callers that hold trials."""
    counts: dict[str, list[float]] = {}
    for task, succeeded, reward in trials:
        row = counts.setdefault(task, [0, 0, 0, 0.0, 0.0])
        row[0] += 1
        row[1] += bool(succeeded)
        if reward is not None:
            row[2] += 1
            row[3] += reward
            row[4] += reward * reward
    return {
        task: TaskTally(int(n), int(wins), int(scored), total, squares)
        for task, (n, wins, scored, total, squares) in counts.items()
    }


@dataclass(frozen=True)
class TaskEstimate(Estimate):
    """A side's figure with its 95% interval, standard error, and the tasks and trials it reads.

    `one_task` marks a figure read from one task: its interval is that task's exact one and says nothing about
    other tasks (`one_task_note` words it).
    """

    stderr: float | None = None
    tasks: int = 0
    trials: int = 0
    method: str = ""

    @property
    def one_task(self) -> bool:
        """True when the figure reads a single task."""
        return self.tasks == 1


@dataclass(frozen=True)
class TaskPower:
    """How many tasks per side (paired: shared tasks) would detect a difference of `detectable`, and how many more."""

    tasks_per_side: int
    more_tasks_per_side: int
    design_effect: float | None  # clustered variance over the variance of as many independent trials
    detectable: float = DETECTABLE
    method: str = POWER_METHOD


@dataclass(frozen=True)
class TaskTest(Test):
    """A two-sided test of B - A with the task as the unit (`unit` "trial" for the exact tests of one task).

    Besides `Test`'s method, difference, 95% interval and p-value: the difference's standard error, the number of
    tasks paired (0 when unpaired) and shared (0 when the sides share no task: different draws), the tasks only one
    side holds, each side's tasks, the degrees of freedom and
    the power in tasks (`needed_per_side`, in trials, stays None).
    """

    stderr: float | None = None
    paired_tasks: int = 0
    shared_tasks: int = 0
    unit: str = "task"
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    tasks_a: int = 0
    tasks_b: int = 0
    df: float | None = None
    power: TaskPower | None = None

    @property
    def one_task(self) -> bool:
        """True when a side holds a single task, so the test is over that task's trials."""
        return self.unit == "trial"


@dataclass(frozen=True)
class Pairing:
    """Which tasks the two sides share, which only one holds, and whether B - A is paired by task."""

    shared: tuple[str, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    paired: bool


@dataclass(frozen=True)
class _Clusters:
    """One figure's per-task counts, sums and sums of squares (tasks with no trial for the figure left out)."""

    keys: tuple[str, ...]
    n: np.ndarray
    total: np.ndarray
    squares: np.ndarray = field(repr=False)

    @property
    def trials(self) -> int:
        return int(self.n.sum())

    @property
    def mean(self) -> float:
        return float(self.total.sum() / self.n.sum())

    def task_means(self) -> dict[str, float]:
        return {key: float(t / n) for key, t, n in zip(self.keys, self.total, self.n, strict=True)}

    def cr0_stderr(self) -> float:
        """sqrt(Σ_tasks (Σ_trials (x - x̄))²) / N, where a task's sum of residuals is its total - n·x̄."""
        residuals = self.total - self.n * self.mean
        return float(math.sqrt(float(np.sum(residuals**2))) / self.trials)

    def trial_variance(self) -> float:
        """The variance of the trials' values as if independent (divisor N - 1; 0 for one trial)."""
        if self.trials < 2:
            return 0.0
        spread = float(self.squares.sum()) - self.trials * self.mean**2
        return max(0.0, spread / (self.trials - 1))


def _sorted_where(columns: TaskColumns, mask: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """The keys of the tasks `mask` selects, sorted, and their indices in the columns."""
    chosen = np.flatnonzero(mask)
    if columns.keys_sorted:
        every = len(chosen) == len(columns.keys)
        return (columns.keys if every else tuple(columns.keys[i] for i in chosen.tolist())), chosen
    keys = [columns.keys[i] for i in chosen.tolist()]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return tuple(keys[i] for i in order), chosen[np.asarray(order, dtype=int)]


def _pass_clusters(tasks: Tallies) -> _Clusters:
    columns = _columns(tasks)
    keys, at = _sorted_where(columns, columns.attempts > 0)
    wins = columns.successes[at]
    return _Clusters(keys, columns.attempts[at], wins, wins)


def _reward_clusters(tasks: Tallies) -> _Clusters:
    columns = _columns(tasks)
    keys, at = _sorted_where(columns, columns.scored > 0)
    return _Clusters(keys, columns.scored[at], columns.reward_sum[at], columns.reward_square_sum[at])


def _clip(value: float, low: float, high: float) -> float:
    return float(min(high, max(low, value)))


@cache  # a handful of distinct df values; each ppf costs about 50 µs
def _t_quantile(df: float) -> float:
    return float(stats.t.ppf(1 - (1 - CONFIDENCE) / 2, df))


def _clustered(c: _Clusters, method: str) -> TaskEstimate:
    """The CR0 figure with its t interval over tasks (tasks - 1 df), for two tasks or more."""
    value, se, tasks = c.mean, c.cr0_stderr(), len(c.keys)
    half = _t_quantile(tasks - 1) * se
    return TaskEstimate(value, _clip(value - half, 0, 1), _clip(value + half, 0, 1), se, tasks, c.trials, method)


def pass_at_1(tasks: Tallies) -> TaskEstimate:
    """A side's pass@1 (the share of its trials that succeeded) with the CR0 standard error over tasks.

    One task: the exact Clopper-Pearson interval of its trials, the binomial standard error, `one_task` True.
    No trial: value None.
    """
    c = _pass_clusters(tasks)
    if not c.keys:
        return TaskEstimate(None, method=PASS_AT_1_METHOD)
    if len(c.keys) == 1:
        exact = proportion(int(c.total[0]), c.trials)
        se = math.sqrt(c.mean * (1 - c.mean) / c.trials)
        return TaskEstimate(exact.value, exact.low, exact.high, se, 1, c.trials, ONE_TASK_PASS_AT_1_METHOD)
    return _clustered(c, PASS_AT_1_METHOD)


def mean_reward(tasks: Tallies) -> TaskEstimate:
    """A side's mean reward over its scored trials with the CR0 standard error over tasks.

    One task: the t interval over its scored trials (none for a single trial), `one_task` True. No scored trial:
    value None.
    """
    c = _reward_clusters(tasks)
    if not c.keys:
        return TaskEstimate(None, method=REWARD_METHOD)
    if len(c.keys) == 1:
        value, n = c.mean, c.trials
        if n < 2:
            return TaskEstimate(value, None, None, None, 1, n, ONE_TASK_REWARD_METHOD)
        se = math.sqrt(c.trial_variance() / n)
        half = _t_quantile(n - 1) * se
        return TaskEstimate(
            value, _clip(value - half, 0, 1), _clip(value + half, 0, 1), se, 1, n, ONE_TASK_REWARD_METHOD
        )
    return _clustered(c, REWARD_METHOD)


def pass_at_k(tasks: Tallies, ks: Iterable[int] | None = None) -> dict[int, TaskEstimate]:
    """pass@k for each k (default 1 … MAX_ATTEMPTS): the mean over tasks with at least k attempts of the unbiased
    estimator with each task's own attempts, its standard error over those tasks (sd / sqrt(tasks)) and the t 95%
    interval, clipped to [0, 1]; `tasks` and `trials` say what it read. No entry for a k no task reaches. k = 1 here
    weights tasks equally; `pass_at_1` weights trials (they agree when every task has the same attempts).
    """
    columns = _columns(tasks)
    usable = columns.attempts > 0
    if not usable.any():
        return {}
    attempts = columns.attempts[usable].astype(int)
    wins = columns.successes[usable].astype(int)
    wanted = [k for k in (range(1, MAX_ATTEMPTS + 1) if ks is None else sorted(set(ks))) if 1 <= k <= attempts.max()]
    every_k = unbiased_pass_at_ks(wins, attempts, max(wanted, default=0))  # one pass over the tasks for every k
    reach = ~np.isnan(every_k)  # (k, task): the task has k attempts
    filled = np.where(reach, every_k, 0.0)
    counts = reach.sum(axis=1)
    means = filled.sum(axis=1) / np.maximum(counts, 1)
    squares = (np.where(reach, filled - means[:, np.newaxis], 0.0) ** 2).sum(axis=1)
    trials_read = np.where(reach, attempts, 0).sum(axis=1)
    table: dict[int, TaskEstimate] = {}
    for k in wanted:
        value, count, trials = float(means[k - 1]), int(counts[k - 1]), int(trials_read[k - 1])
        if count < 2:
            table[k] = TaskEstimate(value, None, None, None, count, trials, PASS_AT_K_METHOD)
            continue
        se = math.sqrt(float(squares[k - 1]) / (count - 1)) / math.sqrt(count)
        half = _t_quantile(count - 1) * se
        table[k] = TaskEstimate(
            value, _clip(value - half, 0, 1), _clip(value + half, 0, 1), se, count, trials, PASS_AT_K_METHOD
        )
    return table


def _held(tasks: Tallies) -> set[str]:
    if isinstance(tasks, TaskColumns):
        return tasks.held()
    return {k for k, t in tasks.items() if t.attempts > 0}


def _held_in_order(tasks: TaskColumns) -> tuple[str, ...]:
    return _sorted_where(tasks, tasks.attempts > 0)[0]


def pairing(a: Tallies, b: Tallies) -> Pairing:
    """The tasks the sides share and those only one holds (sorted); paired when at least MIN_PAIRED_TASKS are shared
    and the shared tasks are at least half of each side's tasks (tasks with no attempt are not held)."""
    if isinstance(a, TaskColumns) and isinstance(b, TaskColumns) and a.keys_sorted and b.keys_sorted:
        held = _held_in_order(a)
        if held == _held_in_order(b):  # the same tasks (a leaderboard's rows): nothing to sort or intersect
            return Pairing(held, (), (), len(held) >= MIN_PAIRED_TASKS)
    held_a, held_b = _held(a), _held(b)
    shared = held_a & held_b
    paired = len(shared) >= MIN_PAIRED_TASKS and 2 * len(shared) >= max(len(held_a), len(held_b))
    return Pairing(tuple(sorted(shared)), tuple(sorted(held_a - held_b)), tuple(sorted(held_b - held_a)), paired)


def _z_sum() -> float:
    return normal_quantile(1 - ALPHA / 2) + normal_quantile(POWER)


def _design_effect(c: _Clusters) -> float | None:
    naive = c.trial_variance() / c.trials
    return c.cr0_stderr() ** 2 / naive if naive > 0 else None


def _unpaired_power(ca: _Clusters, cb: _Clusters) -> TaskPower | None:
    """Tasks per side for DETECTABLE from each side's variance per task (SE² x tasks: the trials' variance x the
    design effect / attempts per task)."""
    per_task = ca.cr0_stderr() ** 2 * len(ca.keys) + cb.cr0_stderr() ** 2 * len(cb.keys)
    if per_task <= 0:
        return None
    needed = math.ceil(_z_sum() ** 2 * per_task / DETECTABLE**2)
    effects = [e for e in (_design_effect(ca), _design_effect(cb)) if e is not None]
    effect = float(np.mean(effects)) if effects else None
    return TaskPower(needed, max(0, needed - min(len(ca.keys), len(cb.keys))), effect)


def _base(
    method: str,
    ca: _Clusters,
    cb: _Clusters,
    p: Pairing,
    *,
    stderr: float | None = None,
    paired_tasks: int = 0,
    df: float | None = None,
    power: TaskPower | None = None,
    unit: str = "task",
) -> TaskTest:
    """A test with no figures yet (difference None) holding what the sides and their pairing say."""
    return TaskTest(
        method,
        None,
        None,
        None,
        None,
        stderr=stderr,
        paired_tasks=paired_tasks,
        shared_tasks=len(p.shared),
        unit=unit,
        only_a=p.only_a,
        only_b=p.only_b,
        tasks_a=len(ca.keys),
        tasks_b=len(cb.keys),
        df=df,
        power=power,
    )


def _paired(xa: np.ndarray, xb: np.ndarray, p: Pairing, ca: _Clusters, cb: _Clusters) -> TaskTest:
    """B - A over the shared tasks' means (xa, xb: one entry per task, in the same order)."""
    spread = xb - xa
    difference, count = float(spread.mean()), len(xa)
    se = float(spread.std(ddof=1) / math.sqrt(count))
    effects = [e for e in (_design_effect(ca), _design_effect(cb)) if e is not None]
    effect = float(np.mean(effects)) if effects else None
    power = None
    if se > NO_SPREAD:
        needed = math.ceil(_z_sum() ** 2 * float(spread.var(ddof=1)) / DETECTABLE**2)
        power = TaskPower(needed, max(0, needed - count), effect)
    base = _base(PAIRED_METHOD, ca, cb, p, stderr=se, paired_tasks=count, df=float(count - 1), power=power)
    if se <= NO_SPREAD:  # every shared task moved by the same amount
        if abs(difference) <= NO_SPREAD:
            return replace(base, difference=0.0, low=0.0, high=0.0, p_value=1.0)
        sign_test = float(stats.binomtest(count, count, 0.5).pvalue)
        return replace(base, method=SIGN_TEST, difference=difference, p_value=sign_test)
    # scipy.stats.ttest_rel(xb, xa) and its confidence interval, without its per-call overhead (a leaderboard makes
    # one test per row): t = mean / SE with count - 1 degrees of freedom
    p_value = float(2 * stats.t.sf(abs(difference) / se, count - 1))
    half = _t_quantile(count - 1) * se
    low, high = _clip(difference - half, -1, 1), _clip(difference + half, -1, 1)
    return replace(base, difference=difference, low=low, high=high, p_value=p_value)


def _no_spread(base: TaskTest, a: list[float], b: list[float], method: str) -> TaskTest:
    """B - A when neither side's values spread: no difference (p = 1), or the exact Mann-Whitney test, whose
    p-value for two separated samples is 2 / C(n_a + n_b, n_a) however far apart they are; no interval."""
    difference = float(np.mean(b) - np.mean(a))
    if abs(difference) <= NO_SPREAD:
        return replace(base, difference=0.0, low=0.0, high=0.0, p_value=1.0)
    p_value = float(stats.mannwhitneyu(b, a, method="exact").pvalue)
    return replace(base, method=method, difference=difference, p_value=p_value)


def _unpaired(ca: _Clusters, cb: _Clusters, p: Pairing) -> TaskTest:
    difference = cb.mean - ca.mean
    va, vb = ca.cr0_stderr() ** 2, cb.cr0_stderr() ** 2
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(ca.keys) - 1) + vb**2 / (len(cb.keys) - 1)) if se > NO_SPREAD else None
    base = _base(UNPAIRED_METHOD, ca, cb, p, stderr=se, df=df, power=_unpaired_power(ca, cb))
    if df is None:  # every task of a side has the same mean
        return _no_spread(base, list(ca.task_means().values()), list(cb.task_means().values()), RANK_TEST)
    p_value = float(2 * stats.t.sf(abs(difference) / se, df))
    half = _t_quantile(df) * se
    low, high = _clip(difference - half, -1, 1), _clip(difference + half, -1, 1)
    return replace(base, difference=difference, low=low, high=high, p_value=p_value)


def _compare(ca: _Clusters, cb: _Clusters, p: Pairing, one_task: Callable[[], TaskTest]) -> TaskTest:
    """Paired when `p` says so and at least MIN_PAIRED_TASKS shared tasks have trials for this figure on both
    sides; else the exact test over trials (`one_task`) when a side holds one task; else unpaired."""
    if not ca.keys or not cb.keys:
        return _base(PAIRED_METHOD if p.paired else UNPAIRED_METHOD, ca, cb, p)
    if p.paired:
        if ca.keys == cb.keys and len(ca.keys) >= MIN_PAIRED_TASKS:  # the same tasks in one order: means as they are
            return _paired(ca.total / ca.n, cb.total / cb.n, p, ca, cb)
        means_a, means_b = ca.task_means(), cb.task_means()
        keys = [k for k in p.shared if k in means_a and k in means_b]
        if len(keys) >= MIN_PAIRED_TASKS:
            xa, xb = np.asarray([means_a[k] for k in keys]), np.asarray([means_b[k] for k in keys])
            return _paired(xa, xb, p, ca, cb)
    if len(ca.keys) == 1 or len(cb.keys) == 1:
        return one_task()
    return _unpaired(ca, cb, p)


def compare_pass_at_1(a: Tallies, b: Tallies) -> TaskTest:
    """pass@1 of B - A with the task as the unit: paired by task when `pairing` says so (mean of per-task
    differences, `ttest_rel` over task means), else unpaired on the CR0 standard errors. When a side holds one task:
    Fisher's exact test over the trials (chi-squared past comparison.EXACT_TEST_MAX_TRIALS) with Newcombe's
    interval, `unit` "trial". Difference None when a side has no trial."""
    ca, cb, p = _pass_clusters(a), _pass_clusters(b), pairing(a, b)

    def one_task() -> TaskTest:
        exact = trial_pass_at_1_test(int(ca.total.sum()), ca.trials, int(cb.total.sum()), cb.trials)
        se = math.sqrt(ca.mean * (1 - ca.mean) / ca.trials + cb.mean * (1 - cb.mean) / cb.trials)
        base = _base(exact.method, ca, cb, p, stderr=se, unit="trial")
        return replace(base, difference=exact.difference, low=exact.low, high=exact.high, p_value=exact.p_value)

    return _compare(ca, cb, p, one_task)


def compare_mean_reward(a: Tallies, b: Tallies) -> TaskTest:
    """Mean reward of B - A over scored trials with the task as the unit (as `compare_pass_at_1`; a shared task
    without a scored trial on both sides is left out of the pairing); when a side holds one task, Welch's t-test
    over the scored trials (`ttest_ind_from_stats`), `unit` "trial". Difference None when a side has no scored
    trial (or, for the one-task test, fewer than two)."""
    ca, cb, p = _reward_clusters(a), _reward_clusters(b), pairing(a, b)

    def one_task() -> TaskTest:
        base = _base(ONE_TASK_REWARD_TEST, ca, cb, p, unit="trial")
        if ca.trials < 2 or cb.trials < 2:
            return base
        difference = cb.mean - ca.mean
        sd_a, sd_b = math.sqrt(ca.trial_variance()), math.sqrt(cb.trial_variance())
        va, vb = sd_a**2 / ca.trials, sd_b**2 / cb.trials
        se = math.sqrt(va + vb)
        if se <= NO_SPREAD:  # every trial of a side has the same reward
            return _no_spread(
                replace(base, stderr=se), [ca.mean] * ca.trials, [cb.mean] * cb.trials, ONE_TASK_RANK_TEST
            )
        df = (va + vb) ** 2 / (va**2 / (ca.trials - 1) + vb**2 / (cb.trials - 1))
        result = stats.ttest_ind_from_stats(cb.mean, sd_b, cb.trials, ca.mean, sd_a, ca.trials, equal_var=False)
        half = _t_quantile(df) * se
        low, high = _clip(difference - half, -1, 1), _clip(difference + half, -1, 1)
        return replace(base, difference=difference, low=low, high=high, p_value=float(result.pvalue), stderr=se, df=df)

    return _compare(ca, cb, p, one_task)


@dataclass(frozen=True)
class TaskRow:
    """One task of the per-task table: each side's tally (None when that side never attempted it), and the sides
    ("A", "B") that have not finished it (a dataset run's task still queued or running: its tally is its trials so
    far, left out of every figure and test)."""

    task: str
    a: TaskTally | None
    b: TaskTally | None
    unfinished: tuple[str, ...] = ()

    @property
    def difference(self) -> float | None:
        """B's pass rate on this task minus A's, when both sides finished it with trials."""
        if self.a is None or self.b is None or self.unfinished or not self.a.attempts or not self.b.attempts:
            return None
        return self.b.successes / self.b.attempts - self.a.successes / self.a.attempts


def task_table(
    a: Mapping[str, TaskTally],
    b: Mapping[str, TaskTally],
    limit: int = 200,
    *,
    unfinished_a: Mapping[str, TaskTally] | None = None,
    unfinished_b: Mapping[str, TaskTally] | None = None,
    order: Mapping[str, int] | None = None,
) -> tuple[list[TaskRow], bool]:
    """The per-task table of both sides' tasks, the first `limit` of them, and whether more were left out (the API's
    `tasks` and `tasksTruncated`). Tasks a side has not finished (`unfinished_a`, `unfinished_b`: their trials so far)
    are listed as such. Rows follow `order` (a dataset version's), then the task key."""
    pending = {"A": unfinished_a or {}, "B": unfinished_b or {}}
    held = {k for k, t in a.items() if t.attempts > 0} | {k for k, t in b.items() if t.attempts > 0}
    held |= set(pending["A"]) | set(pending["B"])
    place = order or {}
    keys = sorted(held, key=lambda k: (place.get(k, len(place)), k))

    def side(tallies: Mapping[str, TaskTally], name: str, key: str) -> TaskTally | None:
        if key in pending[name]:
            return pending[name][key]
        return tallies[key] if key in tallies and tallies[key].attempts else None

    rows = [
        TaskRow(k, side(a, "A", k), side(b, "B", k), tuple(name for name in ("A", "B") if k in pending[name]))
        for k in keys[:limit]
    ]
    return rows, len(keys) > limit
