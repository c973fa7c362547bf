"""A trial's outcome as every list and page shows it: which attempt, its status, reward and failure category,
and how long it took. The run page's trials, the explorer's rows and the trial page extend it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, kw_only=True)
class TrialOutcome:
    """One trial's result and timing."""

    id: uuid.UUID
    trial_number: int
    status: str
    reward: float | None
    failure_category: str | None
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to finish, when both ends are known (never below 0 when clocks disagree)."""
        if self.started_at is not None and self.finished_at is not None:
            return max(0.0, (self.finished_at - self.started_at).total_seconds())
        return None
