"""What a trial produced: its outcome, its steps, and the caps and rendering rules every writer of them shares.

The worker builds a TrialOutcome from a trial it ran, the importers from a
trial that ran elsewhere; the domain writes record it. Its steps are built by
domain.trajectory (the seed's `{"step", "tool", "command", "observation"}` with
the structured record beside them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

# where the trial's columns and checks find them
from domain.rules import FAILURE_CATEGORY_CHARS as FAILURE_CATEGORY_CHARS
from domain.rules import STAGE_KEY_CHARS as STAGE_KEY_CHARS
from domain.vocabulary import TrialStatus

if TYPE_CHECKING:  # domain.trajectory caps with this module's rules
    from domain.trajectory import Step

LOG_CAP_CHARS = 16 * 1024
OBSERVATION_CAP_CHARS = 16 * 1024  # a 9 KB JSON observation stays whole, so the trial page can show it as a tree
EXPLANATION_CAP_CHARS = 2 * 1024  # what a verifier says of one stage (or of the trial), the end kept
EXPLANATIONS_KEY = "explanations"  # where a trial's metrics keep them, beside its stage_* values
VERIFIER_EXPLANATION = "verifier"  # the explanation of the trial as a whole (Harbor's verifier output)
# How the trial's reward was derived from the rewards its verifier wrote (a Harbor task's reward.json: "the mean of 2
# rewards in reward.json: correctness, performance"), said by the worker or the importer, never by the verifier.
REWARD_EXPLANATION = "reward"


def truncate(text: str, cap: int, what: str) -> str:
    """Return `text` cut to `cap` characters with a visible marker saying how much was dropped."""
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n… [{what} truncated: {len(text) - cap} more characters]"


def truncate_keep_end(text: str, cap: int, what: str) -> str:
    """Return the last `cap` characters of `text` after a visible marker saying how much before them was dropped.

    For logs whose end says what went wrong (an imported trial's trial.log and verifier output).
    """
    if len(text) <= cap:
        return text
    return f"… [{what} truncated: {len(text) - cap} earlier characters]\n" + text[len(text) - cap :]


@dataclass(kw_only=True)
class TrialOutcome:
    """What one trial produced, ready to be recorded."""

    status: TrialStatus
    reward: float | None
    failure_category: str | None
    stages: dict[str, float]
    steps: list[Step]
    log: str
    started_at: datetime
    task: str = ""
    tools: list[dict[str, Any]] = field(
        default_factory=list
    )  # what the agent was offered: name, description, inputSchema
    finished_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # What the verifier said: stage key → its words on that stage, VERIFIER_EXPLANATION → on the trial as a whole;
    # REWARD_EXPLANATION → how the reward was derived from what it wrote.
    explanations: dict[str, str] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        """The trial's stored metrics: the stage_* values and, when the verifier explained any, its explanations
        (each held to EXPLANATION_CAP_CHARS, its end kept)."""
        said = {
            key: truncate_keep_end(text, EXPLANATION_CAP_CHARS, "explanation")
            for key, text in self.explanations.items()
            if isinstance(key, str) and isinstance(text, str) and text.strip()
        }
        return {**self.stages, **({EXPLANATIONS_KEY: said} if said else {})}

    def tokens(self) -> int:
        """The tokens (prompt and completion) the steps say their model turns used; 0 when none says."""
        counts = ((step.tokens or {}).get(key) for step in self.steps for key in ("prompt", "completion"))
        total = sum(int(c) for c in counts if isinstance(c, int | float) and not isinstance(c, bool) and 0 < c < 2**40)
        return min(total, 2**40)  # a rollup adds up millions of trials without overflowing a bigint

    def stored_steps(self) -> list[dict[str, Any]]:
        """The steps as they are stored (Step.to_stored)."""
        return [step.to_stored() for step in self.steps]
