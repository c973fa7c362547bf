"""Statistics of comparing two samples of trials: the pieces the task-level tests (domain/task_stats.py) build on.

Every interval and test comes from scipy.stats; this module only picks the method and feeds it:

* a proportion with its exact Clopper-Pearson 95% interval, computed as the beta quantiles that define it
  (`beta.ppf`): `binomtest(...).proportion_ci(method="exact")` without its root-finding;
* pass@1 A vs B over the trials of one task: Fisher's exact test (`fisher_exact`), or, once both sides hold more
  than EXACT_TEST_MAX_TRIALS trials, Pearson's chi-squared test with Yates' correction (`chi2_contingency`:
  Fisher's cost grows with the counts, and at those sizes the two agree to about three digits); either with
  Newcombe's hybrid score interval for the difference built from each side's Wilson interval (the closed form
  `binomtest(...).proportion_ci(method="wilson")` computes, without the p-value binomtest also works out), and the
  normal-approximation trials per side a difference of DETECTABLE would need.

pass@k itself is one rule, in domain/scoring.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from scipy import stats

CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.80
DETECTABLE = 0.1  # the difference "about N more tasks per side" is sized for
EXACT_TEST_MAX_TRIALS = 1_000  # per side: above it on both sides, pass@1 is compared by the chi-squared test


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


@cache  # the few levels used, each scipy ppf costing about 50 µs
def normal_quantile(level: float) -> float:
    """The standard normal distribution's quantile at `level` (scipy's norm.ppf), computed once per level."""
    return float(stats.norm.ppf(level))


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


def _needed_proportions(p: float) -> int:
    """Trials per side to detect p vs p + DETECTABLE (normal approximation, alpha two-sided, POWER)."""
    p1 = min(max(p, 0.0), 1.0 - DETECTABLE)
    p2 = p1 + DETECTABLE
    average = (p1 + p2) / 2
    z_alpha, z_beta = normal_quantile(1 - ALPHA / 2), normal_quantile(POWER)
    root = z_alpha * math.sqrt(2 * average * (1 - average)) + z_beta * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    return math.ceil(root**2 / DETECTABLE**2)


def wilson(successes: int, trials: int) -> tuple[float, float]:
    """The Wilson score 95% interval of successes / trials: what `binomtest(successes, trials).proportion_ci(
    method="wilson")` answers, from its closed form with scipy's normal quantile (binomtest would also compute an
    exact p-value, a cost that grows with the count)."""
    z = normal_quantile(1 - (1 - CONFIDENCE) / 2)
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
