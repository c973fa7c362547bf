"""The formats a rollout export is written in (`EXPORT_FORMATS`: name → its writers), the one place a format is added.

`atif-shaped` (the default) is the line PostgreSQL builds itself (queries.exports.rollout_lines_sql); `atif` and
`trl` are built in Python from the same rows (queries.training_formats). A preference pair is written by the
format's `pair` writer from the pair and its two rollouts, or, for the default, as the pair line alone. The API
refuses a format that is not here (400, naming the ones that are), and the export pages link every variant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain.rules import Rule
from queries.training_formats import atif_document, trl_conversation, trl_preference

DEFAULT_FORMAT = "atif-shaped"


def pair_line(pair: Any) -> dict[str, Any]:
    """A preference pair's line: the environment version, the two rollouts' ids and rewards."""
    return {
        "schemaVersion": 1,
        "privacyClass": "PRIVATE",
        "environmentVersionId": str(pair.environment_version_id),
        "preferred": {"rolloutId": str(pair.preferred_id), "reward": pair.preferred_reward},
        "rejected": {"rolloutId": str(pair.rejected_id), "reward": pair.rejected_reward},
    }


def atif_pair(pair: Any, preferred: Any, rejected: Any) -> dict[str, Any]:
    """The pair line with both trajectories as ATIF documents."""
    line = pair_line(pair)
    line["preferred"]["trajectory"] = atif_document(preferred)
    line["rejected"]["trajectory"] = atif_document(rejected)
    return line


def trl_pair(pair: Any, preferred: Any, rejected: Any) -> dict[str, Any] | None:
    """The pair as TRL's preference row (queries.training_formats.trl_preference), None when it makes none."""
    return trl_preference(preferred, rejected)


@dataclass(frozen=True)
class ExportFormat:
    """How one format writes a rollout (`rollout`: its row → the line's JSON object; None: PostgreSQL's atif-shaped
    line) and a preference pair (`pair`: the pair and its two rollout rows → the line, or None for a pair the format
    cannot hold; None: the pair line alone). `agent_turns_only`: a line needs a turn of the agent's own, so rows
    without one are left out and counted (X-Rows-Without-Agent-Turn), and pairs are drawn within one task."""

    rollout: Callable[[Any], dict[str, Any]] | None = None
    pair: Callable[[Any, Any, Any], dict[str, Any] | None] | None = None
    agent_turns_only: bool = False


EXPORT_FORMATS: dict[str, ExportFormat] = {
    DEFAULT_FORMAT: ExportFormat(),
    "atif": ExportFormat(atif_document, atif_pair),
    "trl": ExportFormat(trl_conversation, trl_pair, agent_turns_only=True),
}


def variants() -> tuple[str, ...]:
    """The formats beside the default, in the order the export pages link them."""
    return tuple(name for name in EXPORT_FORMATS if name != DEFAULT_FORMAT)


KNOWN_FORMAT = Rule(
    f"must be one of {', '.join(EXPORT_FORMATS)}",
    lambda v: isinstance(v, str) and v in EXPORT_FORMATS,  # read when asked: a format registered later is known
    {"type": "string", "enum": list(EXPORT_FORMATS)},
    valid=tuple(EXPORT_FORMATS),
)
