"""What every built-in environment offers the trial runner: reset, tools, calls, stage scores, a diagnosis."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from domain.specs import BUILTIN_STAGES
from domain.trajectory import Step
from domain.worlds import Task

__all__ = ["Environment", "Task", "ToolError", "ToolSpec", "require_int"]


class ToolError(Exception):
    """A tool call the environment refuses (unknown tool, missing or bad argument) or that failed (an MCP tool's
    isError result); the agent sees the message and the step records an error."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool the agent may call: its name, what it does, and its arguments as name → type."""

    name: str
    description: str
    parameters: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Return the tool as sent to agents: `parameters` (name → type) and the same as a JSON schema."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
            "inputSchema": {
                "type": "object",
                "properties": {name: {"type": kind} for name, kind in self.parameters.items()},
                "required": list(self.parameters),
            },
        }


class Environment(ABC):
    """A deterministic task world: the same world seed gives the same world and task."""

    name: ClassVar[str]  # its key in domain.specs.BUILTIN_STAGES and a version spec's "environment"
    tool_specs: ClassVar[tuple[ToolSpec, ...]]

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.log: list[str] = []
        self.tool_errors = 0
        self.preamble: list[Step] = []  # exchanges before the agent's first action (MCP: initialize)
        self.deadline: float | None = None
        self.result_extra: dict[str, Any] = {}  # what the last call's result held beside its content

    @property
    def stage_keys(self) -> tuple[str, ...]:
        """The stage_* keys `score` reports, in pipeline order."""
        return BUILTIN_STAGES[self.name]

    def tools(self) -> list[dict[str, Any]]:
        """The tools handed to the agent."""
        return [t.as_dict() for t in self.tool_specs]

    def close(self) -> str:
        """Release what the episode holds; return anything it printed on the side (bounded) for the log."""
        return ""

    @abstractmethod
    def reset(self, world_seed: int) -> Task:
        """Build the world for `world_seed` in a fresh workspace and return the task."""

    @abstractmethod
    def score(self) -> dict[str, float]:
        """Score the state the episode left: every stage_* key with a value in [0, 1]."""

    @abstractmethod
    def diagnose(self) -> str:
        """Name what went wrong in an episode that ended normally but did not fully succeed."""

    def explain(self) -> dict[str, str]:
        """What the verifier says of each stage it scored (stage key → a sentence), asked after `score`; none by
        default."""
        return {}

    def call(self, tool: str, args: dict[str, Any]) -> str:
        """Run one tool call and return its observation; raise ToolError for a call the world refuses."""
        handler = getattr(self, f"tool_{tool}", None) if tool in {t.name for t in self.tool_specs} else None
        if handler is None:
            self.tool_errors += 1
            raise ToolError(f"unknown tool {tool!r}; available: {', '.join(t.name for t in self.tool_specs)}")
        spec = next(t for t in self.tool_specs if t.name == tool)
        missing = [name for name in spec.parameters if name not in args]
        if missing:
            self.tool_errors += 1
            raise ToolError(f"{tool} needs {', '.join(missing)}")
        try:
            return handler(**{name: args[name] for name in spec.parameters})
        except ToolError:
            self.tool_errors += 1
            raise

    def note(self, line: str) -> None:
        """Append a line to the trial log."""
        self.log.append(line)


def require_int(args_name: str, value: Any, minimum: int = 0) -> int:
    """Return `value` as an int of at least `minimum`, or raise ToolError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ToolError(f"{args_name} must be an integer >= {minimum}, not {value!r}")
    return value
