"""What every environment offers the trial runner (`TrialEnvironment`: reset, tools, calls, stage scores, a
diagnosis), and the base of the built-in worlds (`Environment`)."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from domain.specs import BUILTIN_STAGES
from domain.trajectory import Content, Step
from domain.trial_log import LogEntry
from domain.worlds import Task

__all__ = ["Environment", "Task", "ToolError", "ToolResult", "ToolSpec", "TrialEnvironment", "require_int"]


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


@dataclass(frozen=True)
class ToolResult:
    """What one tool call gave: its content (text, or content parts: MCP's text, image, resource…) and what the
    result holds beside it (MCP: structuredContent; a Harbor task's bash: exitCode), kept in the step."""

    content: Content
    extra: dict[str, Any] = field(default_factory=dict)


class TrialEnvironment(Protocol):
    """What the trial runner (worker/trial.py) asks of every environment, whatever its kind.

    One episode: `reset`, then `tools` and `call` while the agent acts (each call told the agent's deadline, which
    bounds its wait), then `score`, `reward`, `explain` and `diagnose` of the state it left, and `close` at the end
    whatever happened. `log` holds its lines for the trial's log and `preamble` the exchanges before the agent's
    first action (MCP: initialize, tools/list). A class may subclass this protocol for its defaults.
    """

    name: ClassVar[str]  # what the agent is told the environment is, when the task does not say
    log: list[LogEntry]
    preamble: list[Step]

    @abstractmethod
    def reset(self, world_seed: int) -> Task:
        """Build the world for `world_seed` (start what the trial needs) and return the task."""

    @abstractmethod
    def tools(self) -> list[dict[str, Any]]:
        """The tools handed to the agent."""

    @abstractmethod
    def call(self, tool: str, args: dict[str, Any], deadline: float | None = None) -> ToolResult:
        """Run one tool call by `deadline` (time.monotonic(); None: no bound of the agent's) and return its result;
        raise ToolError for a call refused or failed (the agent reads `error: <message>`)."""

    @abstractmethod
    def score(self) -> dict[str, float]:
        """Score the state the episode left: stage_* keys with values in [0, 1]."""

    @abstractmethod
    def diagnose(self) -> str:
        """Name what went wrong in an episode that ended normally but did not fully succeed."""

    def agent_timeout_s(self, asked_s: float) -> float:
        """The agent's time budget in this environment: the run's `asked_s` (a Harbor task's may be shorter)."""
        return asked_s

    def reward(self, stages: dict[str, float]) -> float:
        """The trial's reward from its stages: their mean, unless the environment's verifier gives it itself."""
        return sum(stages.values()) / len(stages)

    def explain(self) -> dict[str, str]:
        """What the verifier says of each stage it scored (stage key → a sentence), asked after `score`; none by
        default."""
        return {}

    def close(self) -> str:
        """Release what the episode holds; return anything it printed on the side (bounded) for the log."""
        return ""


class Environment(TrialEnvironment):
    """A deterministic built-in task world: the same world seed gives the same world and task."""

    name: ClassVar[str]  # its key in domain.specs.BUILTIN_STAGES and a version spec's "environment"
    tool_specs: ClassVar[tuple[ToolSpec, ...]]

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.log: list[LogEntry] = []
        self.tool_errors = 0
        self.preamble: list[Step] = []

    @property
    def stage_keys(self) -> tuple[str, ...]:
        """The stage_* keys `score` reports, in pipeline order."""
        return BUILTIN_STAGES[self.name]

    def tools(self) -> list[dict[str, Any]]:
        """The tools handed to the agent."""
        return [t.as_dict() for t in self.tool_specs]

    def call(self, tool: str, args: dict[str, Any], deadline: float | None = None) -> ToolResult:
        """Run one tool call (in memory: no wait to bound) and return its observation."""
        return ToolResult(self.run_tool(tool, args))

    def run_tool(self, tool: str, args: dict[str, Any]) -> str:
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
