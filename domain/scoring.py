"""Scoring rules: pass@k (unbiased, Chen et al. 2021), the one estimator every figure uses (a run's pass@k table,
compare's pass@k over tasks), and how many attempts a run may have."""

from __future__ import annotations

import numpy as np

from domain.rules import integer_from
from domain.vocabulary import MAX_ATTEMPTS, MIN_ATTEMPTS


def unbiased_pass_at_k(successes: np.ndarray, attempts: np.ndarray, k: int) -> np.ndarray:
    """Chen et al.'s unbiased pass@k, 1 - C(n-c, k) / C(n, k), element-wise for tasks with n >= k, as
    -expm1(Σ_{i<k} log1p(-c / (n - i))) so that tasks attempted thousands of times (a version's many runs of one
    task) neither overflow nor lose digits."""
    n, c = np.asarray(attempts, dtype=float), np.asarray(successes, dtype=float)
    reachable = n - c >= k  # fewer than k failures: every draw of k holds a success
    steps = np.arange(k, dtype=float)[:, np.newaxis]
    safe_c = np.where(reachable, c, 0.0)
    log_ratio = np.sum(np.log1p(-safe_c / (n - steps)), axis=0)
    return np.where(reachable, -np.expm1(log_ratio), 1.0)


def unbiased_pass_at_ks(successes: np.ndarray, attempts: np.ndarray, top_k: int) -> np.ndarray:
    """`unbiased_pass_at_k` for every k of 1..top_k at once (row k - 1 holds pass@k of each task; NaN for a task
    with fewer than k attempts): the sums of Σ_{i<k} log1p(-c / (n - i)) are one cumulative sum over i."""
    n, c = np.asarray(attempts, dtype=float), np.asarray(successes, dtype=float)
    steps = np.arange(top_k, dtype=float)[:, np.newaxis]
    ks = steps + 1
    with np.errstate(divide="ignore", invalid="ignore"):  # terms past a task's attempts are masked below
        sums = np.cumsum(np.log1p(-c / (n - steps)), axis=0)
    values = np.where(n - c >= ks, -np.expm1(sums), 1.0)
    return np.where(n >= ks, values, np.nan)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of Chen et al. 2021 for `c` successes of `n` attempts: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return float(unbiased_pass_at_k(np.asarray([c]), np.asarray([n]), k)[0])


def pass_at_k_table(n: int, successes: int) -> dict[str, float]:
    """Return {"1": pass@1, …, "n": pass@n} for `successes` of `n` attempts."""
    return {str(k): round(pass_at_k(n, successes, k), 6) for k in range(1, n + 1)}


# attemptCount: how many attempts a run has, the rule every boundary that takes one applies (the API's bodies, the
# start-run form); the writes take the int it gives (the tables' CHECK holds the same range).
ATTEMPT_COUNT = integer_from(MIN_ATTEMPTS, MAX_ATTEMPTS)
