"""Scoring rules: pass@k (unbiased, Chen et al. 2021) and how many attempts a run may have."""

from __future__ import annotations

from math import prod
from typing import Any

from domain.errors import RunError
from domain.vocabulary import MAX_ATTEMPTS, MIN_ATTEMPTS


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of Chen et al. 2021: 1 - C(n-c, k) / C(n, k), as a stable product."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k_table(n: int, successes: int) -> dict[str, float]:
    """Return {"1": pass@1, …, "n": pass@n} for `successes` of `n` attempts."""
    return {str(k): round(pass_at_k(n, successes, k), 6) for k in range(1, n + 1)}


def check_attempt_count(value: Any) -> int:
    """Return attemptCount as an int in 1..8 (JSON's 4.0 is the integer 4), or raise RunError naming the range."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_ATTEMPTS <= value <= MAX_ATTEMPTS:
        raise RunError(
            f"attemptCount must be an integer from {MIN_ATTEMPTS} to {MAX_ATTEMPTS}, not {value!r}",
            error="invalid attemptCount",
        )
    return value
