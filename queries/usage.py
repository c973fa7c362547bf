"""Model usage as the trial and run pages show it: tokens in and out and model latency, summed from recorded steps.

A step says what its model turn used (`tokens`: {"prompt", "completion"}) and how long the model took
(`latencyMs`) when the agent reports them (the openai-chat agent does; a command agent may). Trials whose steps
say neither have no usage, and the pages show none.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from domain.trajectory import Step


@dataclass(frozen=True)
class ModelUsage:
    """Tokens in (prompt) and out (completion) and the model's time of some steps."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    turns: int = 0  # steps that reported tokens or latency
    timed_turns: int = 0  # steps that reported a latency (none: the latency was not recorded, not 0 s)

    def __add__(self, other: ModelUsage) -> ModelUsage:
        return ModelUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.latency_ms + other.latency_ms,
            self.turns + other.turns,
            self.timed_turns + other.timed_turns,
        )


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def step_usage(steps: list[Step]) -> ModelUsage | None:
    """The usage the steps of one trial report, or None when none reports any (a step reports usage when its
    tokens are an object or it says a latencyMs, even one that is no number)."""
    total = ModelUsage()
    for step in steps:
        if step.tokens is None and step.latency_ms is None and step.other.get("latencyMs") is None:
            continue
        tokens, latency_ms = step.tokens or {}, float(step.latency_ms or 0)
        timed = int(isinstance(step.latency_ms, int | float) and not isinstance(step.latency_ms, bool))
        total += ModelUsage(_count(tokens.get("prompt")), _count(tokens.get("completion")), latency_ms, 1, timed)
    return total if total.turns else None


@dataclass(frozen=True)
class RecordedTotals:
    """The token totals an imported ATIF trajectory records in `final_metrics` (they may count what no step does)."""

    prompt_tokens: int
    completion_tokens: int


# The trial's own ATIF document only: the fences keep PostgreSQL from converting other artifacts' bodies (a Harbor
# task's tar is no UTF-8) while it looks for this one.
ATIF_TOTALS = text(
    """WITH trial AS MATERIALIZED (
           SELECT organization_id, atif_artifact_id FROM evaluation_trials
           WHERE id = :id AND atif_artifact_id IS NOT NULL
       ), doc AS MATERIALIZED (
           SELECT convert_from(a.body, 'UTF8')::jsonb AS d
           FROM trial t JOIN artifacts a ON a.organization_id = t.organization_id AND a.id = t.atif_artifact_id
       )
       SELECT d -> 'final_metrics' ->> 'total_prompt_tokens' AS prompt,
              d -> 'final_metrics' ->> 'total_completion_tokens' AS completion
       FROM doc WHERE jsonb_typeof(d -> 'final_metrics') = 'object'"""
)


def recorded_totals(session: Session, trial_id: uuid.UUID) -> RecordedTotals | None:
    """The imported trajectory's final_metrics token totals, when it records both."""
    row = session.execute(ATIF_TOTALS, {"id": trial_id}).first()
    if row is None or not (str(row.prompt or "").isdigit() and str(row.completion or "").isdigit()):
        return None
    return RecordedTotals(int(row.prompt), int(row.completion))


@dataclass(frozen=True)
class RunUsage:
    """The usage of each trial of a run that reported any, and the run's totals (None when no trial did)."""

    trials: dict[uuid.UUID, ModelUsage]

    @property
    def total(self) -> ModelUsage | None:
        """The run's totals over its trials."""
        return sum(self.trials.values(), ModelUsage()) if self.trials else None


def _number(path: str) -> str:
    """SQL reading the number at `path` of a step (NULL when it is anything else)."""
    return f"CASE WHEN jsonb_typeof(s #> '{path}') = 'number' THEN (s #>> '{path}')::numeric END"


RUN_USAGE = text(
    f"""SELECT t.id, coalesce(sum({_number("{tokens,prompt}")}), 0) AS prompt_tokens,
               coalesce(sum({_number("{tokens,completion}")}), 0) AS completion_tokens,
               coalesce(sum({_number("{latencyMs}")}), 0) AS latency_ms, count(*) AS turns,
               count({_number("{latencyMs}")}) AS timed_turns
        FROM evaluation_trials t CROSS JOIN LATERAL jsonb_array_elements(coalesce(t.steps, '[]')) AS s
        WHERE t.evaluation_run_id = :run_id AND jsonb_typeof(s) = 'object'
          AND (jsonb_typeof(s -> 'tokens') = 'object' OR s ? 'latencyMs')
        GROUP BY t.id"""
)


def run_usage(session: Session, run_id: uuid.UUID) -> RunUsage:
    """The usage of every trial of the run whose steps report any (one statement, whatever the run's size)."""
    rows = session.execute(RUN_USAGE, {"run_id": run_id}).all()
    return RunUsage(
        {
            row.id: ModelUsage(
                int(row.prompt_tokens), int(row.completion_tokens), float(row.latency_ms), row.turns, row.timed_turns
            )
            for row in rows
        }
    )
