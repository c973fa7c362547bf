"""Many tests read as one table: Holm's step-down correction (Holm 1979), which holds the chance of calling any
difference that is not there to alpha across the table, at no cost in assumptions over Bonferroni and never less
power than it.

Order the m p-values from the smallest; the i-th (from 0) is compared with alpha / (m - i), and the tests are
rejected up to the first that is not. The adjusted p-value of the i-th is the running maximum of
min(1, (m - j) · p_(j)) over j <= i, so a test is rejected exactly when its adjusted p-value is at most alpha
(statsmodels' `multipletests(method="holm")` gives the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.comparison import ALPHA


@dataclass(frozen=True)
class HolmDecision:
    """One test of a table after Holm's correction: its p-value adjusted for the table, and whether it is rejected."""

    adjusted_p: float
    rejected: bool


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[HolmDecision]:
    """Holm's step-down decisions for `p_values`, in their order (an empty table gives none)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[index])))
        adjusted[index] = running
    return [HolmDecision(p, p <= alpha) for p in adjusted]
