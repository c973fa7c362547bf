"""Statistics of comparing two sides (runs or environment versions): intervals, tests and the verdict's words.

Every interval and test comes from scipy.stats; this module only picks the method, feeds it and words the
answer. The methods, as the compare page states them:

* pass@1: the share of trials that succeeded, with its exact Clopper-Pearson 95% interval, computed as the beta
  quantiles that define it (`beta.ppf`): `binomtest(...).proportion_ci(method="exact")` without its root-finding.
* pass@k for k ≥ 2 of a version (many runs): the mean of the runs' unbiased pass@k, with the t 95% interval over
  runs (`ttest_1samp(...).confidence_interval`, every k in one vectorised call), clipped to [0, 1].
* pass@k for k ≥ 2 of a single run: the unbiased estimator over its trials with a percentile bootstrap 95%
  interval over trials (`scipy.stats.bootstrap`, 999 resamples, fixed seed); every k is one vectorised call over
  a (k, trials) array whose resampled indices are shared across rows, so each k's interval equals that of its
  own call with the same seed.
* mean reward: the mean of the scored trials' rewards with its t interval (`ttest_1samp(...).confidence_interval`).
* pass@1 A vs B: Fisher's exact test (`fisher_exact`), or, once both sides hold more than EXACT_TEST_MAX_TRIALS
  trials, Pearson's chi-squared test with Yates' correction (`chi2_contingency`: Fisher's cost grows with the
  counts, and at those sizes the two agree to about three digits); either with Newcombe's hybrid score interval
  for the difference built from each side's Wilson interval (the closed form `binomtest(...).proportion_ci(
  method="wilson")` computes, without the p-value binomtest also works out); when both sides ran the same tasks,
  the exact McNemar test (`binomtest` on the discordant pairs) with a paired bootstrap interval.
* mean reward A vs B: Welch's t-test (`ttest_ind(equal_var=False)`), or the paired t-test (`ttest_rel`).
* "about N more trials per side": the normal-approximation sample size for two proportions (or two means) at
  alpha = 0.05 two-sided and 80% power, from `norm.ppf`; a planning figure, not an exact power calculation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.80
DETECTABLE = 0.1  # the difference "about N more trials per side" is sized for
BOOTSTRAP_RESAMPLES = 999
BOOTSTRAP_SEED = 20261130
EXACT_TEST_MAX_TRIALS = 1_000  # per side: above it on both sides, pass@1 is compared by the chi-squared test

PASS_AT_1_METHOD = "exact Clopper-Pearson interval over trials"
PASS_AT_K_METHOD = f"percentile bootstrap over runs (over trials for a single run), {BOOTSTRAP_RESAMPLES} resamples"
REWARD_METHOD = "t interval over scored trials, clipped to [0, 1]"
POWER_METHOD = "normal-approximation sample size, alpha = 0.05 two-sided, 80% power"


@dataclass(frozen=True)
class Estimate:
    """A figure with its 95% interval (None when the sample cannot give one)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    @property
    def interval(self) -> tuple[float, float] | None:
        """(low, high), or None."""
        return None if self.low is None or self.high is None else (self.low, self.high)


@dataclass(frozen=True)
class Test:
    """A two-sided test of B - A: the method's name, the difference, its 95% interval and the p-value."""

    method: str
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    needed_per_side: int | None = None  # trials per side a difference of DETECTABLE would need (when not shown)

    @property
    def significant(self) -> bool:
        """True when p < 0.05."""
        return self.p_value is not None and self.p_value < ALPHA


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def proportion(successes: int, trials: int) -> Estimate:
    """successes / trials with the exact Clopper-Pearson 95% interval."""
    if trials <= 0:
        return Estimate(None)
    # The Clopper-Pearson bounds are beta quantiles; binomtest(...).proportion_ci(method="exact") finds the same
    # bounds by root-finding, a cost that grows with the count.
    tail = (1 - CONFIDENCE) / 2
    low = float(stats.beta.ppf(tail, successes, trials - successes + 1)) if successes > 0 else 0.0
    high = float(stats.beta.ppf(1 - tail, successes + 1, trials - successes)) if successes < trials else 1.0
    return Estimate(successes / trials, low, high)


def mean(values: Sequence[float]) -> Estimate:
    """The mean with its t 95% interval (none for fewer than two values, a point for identical ones)."""
    if not values:
        return Estimate(None)
    data = np.asarray(values, dtype=float)
    average = float(data.mean())
    if len(data) < 2:
        return Estimate(average)
    if np.ptp(data) == 0:
        return Estimate(average, average, average)
    ci = stats.ttest_1samp(data, 0.0).confidence_interval(CONFIDENCE)
    return Estimate(average, max(0.0, float(ci.low)), min(1.0, float(ci.high)))  # rewards lie in [0, 1]


def _bootstrap(data: tuple[np.ndarray, ...], statistic, paired: bool = False) -> tuple[float | None, float | None]:
    if np.all([np.ptp(d) == 0 for d in data]):  # no spread: the bootstrap distribution is a point
        value = float(statistic(*[d[np.newaxis, :] for d in data], axis=-1)[0])
        return value, value
    result = stats.bootstrap(
        data,
        statistic,
        n_resamples=BOOTSTRAP_RESAMPLES,
        vectorized=True,
        paired=paired,
        method="percentile",
        confidence_level=CONFIDENCE,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return _finite(result.confidence_interval.low), _finite(result.confidence_interval.high)


def _bootstrap_rows(rows: np.ndarray, statistic) -> list[tuple[float | None, float | None]]:
    """Percentile bootstrap intervals of `statistic` for each row of `rows` (shape (m, n)) in one scipy call.

    scipy resamples the last axis with one set of indices for every row, so row i's interval is the one
    `_bootstrap((rows[i],), ...)` gives with the same seed; `statistic(sample, axis)` gets the row index as
    the leading axis (rows without spread answer their point, as `_bootstrap` does).
    """
    spread = np.ptp(rows, axis=-1) > 0
    intervals: list[tuple[float | None, float | None]] = []
    for value in statistic(rows[:, np.newaxis, :], axis=-1)[:, 0]:
        intervals.append((float(value), float(value)))
    if spread.any():
        result = stats.bootstrap(
            (rows,),
            statistic,
            n_resamples=BOOTSTRAP_RESAMPLES,
            vectorized=True,
            axis=-1,
            method="percentile",
            confidence_level=CONFIDENCE,
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
        lows, highs = np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high)
        for i in np.flatnonzero(spread):
            intervals[i] = (_finite(lows[i]), _finite(highs[i]))
    return intervals


def pass_at_k_table_over_runs(values_by_k: dict[int, Sequence[float]]) -> dict[int, Estimate]:
    """pass@k of a side for every k: the mean of its runs' pass@k with the t 95% interval over runs.

    The k that read the same number of runs (every k at most the smallest run's attempts) share one vectorised
    `ttest_1samp(..., axis=-1)`; the bounds are clipped to [0, 1] and a k whose runs agree gets its point.
    """
    estimates: dict[int, Estimate] = {}
    groups: dict[int, list[int]] = {}
    for k, values in values_by_k.items():
        if not values:
            estimates[k] = Estimate(None)
        elif len(values) < 2:
            estimates[k] = Estimate(float(values[0]))
        else:
            groups.setdefault(len(values), []).append(k)
    for ks in groups.values():
        rows = np.asarray([values_by_k[k] for k in ks], dtype=float)
        spread = np.ptp(rows, axis=-1) > 0
        lows, highs = rows.mean(axis=-1), rows.mean(axis=-1)
        if spread.any():
            ci = stats.ttest_1samp(rows[spread], 0.0, axis=-1).confidence_interval(CONFIDENCE)
            lows[spread], highs[spread] = np.clip(ci.low, 0.0, 1.0), np.clip(ci.high, 0.0, 1.0)
        for k, row, low, high in zip(ks, rows, lows, highs, strict=True):
            estimates[k] = Estimate(float(row.mean()), _finite(low), _finite(high))
    return {k: estimates[k] for k in values_by_k}


def unbiased_pass_at_k(successes: np.ndarray | int, n: int | np.ndarray, k: int | np.ndarray) -> np.ndarray:
    """Chen et al.'s unbiased pass@k, 1 - C(n-c, k) / C(n, k), element-wise (scipy.special.comb)."""
    return 1.0 - special.comb(n - np.asarray(successes), k) / special.comb(n, k)


def pass_at_k_table_over_trials(outcomes: Sequence[bool], ks: Sequence[int]) -> dict[int, Estimate]:
    """pass@k of one run's trials for every k in `ks` (unbiased estimator), with percentile bootstrap intervals
    over its trials from one vectorised call."""
    n = len(outcomes)
    estimates = {k: Estimate(None) for k in ks if n < k or n == 0}
    usable = [k for k in ks if k not in estimates]
    if not usable:
        return estimates
    data = np.asarray(outcomes, dtype=float)
    values = {k: float(unbiased_pass_at_k(int(data.sum()), n, k)) for k in usable}
    if n < 2:
        return {**estimates, **{k: Estimate(values[k]) for k in usable}}
    k_column = np.asarray(usable)

    def statistic(sample: np.ndarray, axis: int = -1) -> np.ndarray:
        wins = np.moveaxis(np.sum(sample, axis=axis), 0, -1)  # the row (k) axis last, to broadcast against ks
        return np.moveaxis(unbiased_pass_at_k(wins, n, k_column), -1, 0)

    rows = np.tile(data, (len(usable), 1))
    intervals = _bootstrap_rows(rows, statistic)
    return {**estimates, **{k: Estimate(values[k], *interval) for k, interval in zip(usable, intervals, strict=True)}}


def _needed_proportions(p: float) -> int:
    """Trials per side to detect p vs p + DETECTABLE (normal approximation, alpha two-sided, POWER)."""
    p1 = min(max(p, 0.0), 1.0 - DETECTABLE)
    p2 = p1 + DETECTABLE
    average = (p1 + p2) / 2
    z_alpha, z_beta = stats.norm.ppf(1 - ALPHA / 2), stats.norm.ppf(POWER)
    root = z_alpha * math.sqrt(2 * average * (1 - average)) + z_beta * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    return math.ceil(root**2 / DETECTABLE**2)


def _needed_means(sd: float) -> int:
    """Trials per side to detect a mean difference of DETECTABLE with standard deviation `sd` (normal approx.)."""
    z_alpha, z_beta = stats.norm.ppf(1 - ALPHA / 2), stats.norm.ppf(POWER)
    return max(2, math.ceil(2 * ((z_alpha + z_beta) * sd / DETECTABLE) ** 2))


def wilson(successes: int, trials: int) -> tuple[float, float]:
    """The Wilson score 95% interval of successes / trials: what `binomtest(successes, trials).proportion_ci(
    method="wilson")` answers, from its closed form with scipy's normal quantile (binomtest would also compute an
    exact p-value, a cost that grows with the count)."""
    z = float(stats.norm.ppf(1 - (1 - CONFIDENCE) / 2))
    p = successes / trials
    denominator = 1 + z**2 / trials
    center = (p + z**2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z**2 / (4 * trials**2)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def _newcombe(sa: int, na: int, sb: int, nb: int) -> tuple[float, float]:
    """Newcombe's hybrid score interval for pb - pa, from the Wilson score intervals of each side."""
    pa, pb = sa / na, sb / nb
    a_low, a_high = wilson(sa, na)
    b_low, b_high = wilson(sb, nb)
    difference = pb - pa
    low = difference - math.sqrt((pb - b_low) ** 2 + (a_high - pa) ** 2)
    high = difference + math.sqrt((b_high - pb) ** 2 + (pa - a_low) ** 2)
    return low, high


FISHER = "Fisher's exact test"
CHI_SQUARED = "Pearson's chi-squared test"


def unpaired_pass_at_1(sa: int, na: int, sb: int, nb: int) -> Test:
    """pass@1 of B - A from two independent samples: Fisher's exact test (the chi-squared test with Yates'
    correction when both sides exceed EXACT_TEST_MAX_TRIALS trials), Newcombe's interval."""
    large = na > EXACT_TEST_MAX_TRIALS and nb > EXACT_TEST_MAX_TRIALS
    method = CHI_SQUARED if large else FISHER
    if na <= 0 or nb <= 0:
        return Test(method, None, None, None, None)
    table = [[sb, nb - sb], [sa, na - sa]]
    if not large:
        p_value = float(stats.fisher_exact(table).pvalue)
    elif sa + sb in (0, na + nb):  # a column of zeros: no expected count to test against, and no difference
        p_value = 1.0
    else:
        p_value = float(stats.chi2_contingency(table, correction=True).pvalue)
    low, high = _newcombe(sa, na, sb, nb)
    needed = _needed_proportions((sa + sb) / (na + nb))
    return Test(method, sb / nb - sa / na, low, high, min(p_value, 1.0), needed)


def _paired_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(b, axis=axis) - np.mean(a, axis=axis)


def mcnemar_pass_at_1(pairs: Sequence[tuple[bool, bool]]) -> Test:
    """pass@1 of B - A over pairs on the same task: exact McNemar (binomtest on the discordant pairs)."""
    if not pairs:
        return Test("exact McNemar test", None, None, None, None)
    a = np.asarray([x for x, _ in pairs], dtype=float)
    b = np.asarray([y for _, y in pairs], dtype=float)
    a_only = int(np.sum((a == 1) & (b == 0)))
    b_only = int(np.sum((a == 0) & (b == 1)))
    discordant = a_only + b_only
    p_value = float(stats.binomtest(b_only, discordant, 0.5).pvalue) if discordant else 1.0
    low, high = _bootstrap((a, b), _paired_difference, paired=True) if len(pairs) >= 2 else (None, None)
    needed = _needed_proportions(float((a.sum() + b.sum()) / (2 * len(pairs))))
    return Test("exact McNemar test", float(b.mean() - a.mean()), low, high, p_value, needed)


def welch_mean_reward(a: Sequence[float], b: Sequence[float]) -> Test:
    """Mean reward of B - A from two independent samples: Welch's t-test and its interval."""
    if len(a) < 2 or len(b) < 2:
        return Test("Welch's t-test", None, None, None, None)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    difference = float(xb.mean() - xa.mean())
    sd = float(np.sqrt((xa.var(ddof=1) + xb.var(ddof=1)) / 2))
    if np.ptp(xa) == 0 and np.ptp(xb) == 0:
        p_value = 1.0 if difference == 0 else 0.0
        return Test("Welch's t-test", difference, difference, difference, p_value, _needed_means(sd))
    result = stats.ttest_ind(xb, xa, equal_var=False)
    ci = result.confidence_interval(CONFIDENCE)
    return Test(
        "Welch's t-test", difference, _finite(ci.low), _finite(ci.high), _finite(result.pvalue), _needed_means(sd)
    )


def paired_mean_reward(pairs: Sequence[tuple[float, float]]) -> Test:
    """Mean reward of B - A over pairs on the same task: the paired t-test and its interval."""
    if len(pairs) < 2:
        return Test("paired t-test", None, None, None, None)
    a = np.asarray([x for x, _ in pairs], dtype=float)
    b = np.asarray([y for _, y in pairs], dtype=float)
    difference = float(b.mean() - a.mean())
    spread = b - a
    if np.ptp(spread) == 0:
        return Test("paired t-test", difference, difference, difference, 1.0 if difference == 0 else 0.0)
    result = stats.ttest_rel(b, a)
    ci = result.confidence_interval(CONFIDENCE)
    sd = float(np.std(spread, ddof=1))
    return Test(
        "paired t-test",
        difference,
        _finite(ci.low),
        _finite(ci.high),
        _finite(result.pvalue),
        _needed_means(sd / math.sqrt(2)),
    )


def _p(p_value: float) -> str:
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}" if p_value < 0.01 else f"p = {p_value:.2f}"


def verdict(test: Test, what: str, trials_per_side: int) -> str:
    """The plain-language verdict on B - A for `what` (e.g. "pass@1"), with the method named."""
    if test.difference is None or test.p_value is None:
        return f"Not enough scored trials on both sides to test {what}."
    interval = (
        f" (95% CI {test.low:+.2f} to {test.high:+.2f})" if test.low is not None and test.high is not None else ""
    )
    if test.significant:
        direction = "higher" if test.difference > 0 else "lower"
        return f"B's {what} is {direction} by {abs(test.difference):.2f}{interval}, {_p(test.p_value)}, {test.method}."
    more = ""
    if test.needed_per_side is not None:
        extra = max(0, test.needed_per_side - trials_per_side)
        more = (
            f"; about {extra} more trials per side would detect a difference of {DETECTABLE:g}"
            if extra
            else f"; these sample sizes could detect a difference of {DETECTABLE:g}, so any real one is smaller"
        )
    return (
        f"No detectable difference in {what} at these sample sizes: B - A = {test.difference:+.2f}{interval}, "
        f"{_p(test.p_value)}, {test.method}{more}."
    )
