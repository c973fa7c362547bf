"""What a trial produced: its outcome, its steps, and the caps and rendering rules every writer of them shares.

The worker builds a TrialOutcome from a trial it ran, the importers from a
trial that ran elsewhere; the domain writes record it. A step is
`{"step", "tool", "command", "observation"}` (richer fields beside them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from domain.vocabulary import TrialStatus

LOG_CAP_CHARS = 16 * 1024
OBSERVATION_CAP_CHARS = 4 * 1024


def truncate(text: str, cap: int, what: str) -> str:
    """Return `text` cut to `cap` characters with a visible marker saying how much was dropped."""
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n… [{what} truncated: {len(text) - cap} more characters]"


@dataclass(kw_only=True)
class TrialOutcome:
    """What one trial produced, ready to be recorded."""

    status: TrialStatus
    reward: float | None
    failure_category: str | None
    stages: dict[str, float]
    steps: list[dict[str, Any]]
    log: str
    started_at: datetime
    task: str = ""
    finished_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def artifact_document(self) -> dict[str, Any]:
        """Return trial-{n}-trajectory.json: schemaVersion, the truncated log, the steps as a JSON string."""
        return {"schemaVersion": 1, "log": self.log, "trajectory": json.dumps({"steps": self.steps})}


def command_text(tool: str, args: dict[str, Any]) -> str:
    """Render a tool call the way the trajectory viewer shows it: `restock {"sku": "SKU-1", "quantity": 3}`."""
    return f"{tool} {json.dumps(args, ensure_ascii=False)}" if args else tool


def tool_step(number: int, tool: str, name: str, args: dict[str, Any], observation: str) -> dict[str, Any]:
    """One step of a trajectory: `{"step", "tool", "command", "observation"}`, the observation capped.

    `tool` is what the step is filed under (an MCP environment files every call under "mcp"), `name` and `args`
    the call itself.
    """
    return {
        "step": number,
        "tool": tool,
        "command": command_text(name, args),
        "observation": truncate(observation, OBSERVATION_CAP_CHARS, "observation"),
    }
