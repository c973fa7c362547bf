"""What an agent is to the trial runner: it gets the task and tools, then answers each observation with an action."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from domain.trajectory import Content
from domain.vocabulary import LoopFailure


@dataclass(frozen=True)
class Event:
    """Something the agent's harness did on its own before an answer (a retried model request): an environment step."""

    command: str
    observation: str


@dataclass(frozen=True, kw_only=True)
class Turn:
    """What an agent said along with an action, when it says it: its message, its reasoning, the tokens it used,
    how long its model took (ms), and what its harness did on its own first (`events`)."""

    message: Content | None = None  # text, or content parts
    reasoning: str | None = None
    tokens: dict[str, int] | None = None
    latency_ms: float | None = None
    events: tuple[Event, ...] = ()


@dataclass(frozen=True)
class ToolCall(Turn):
    """The agent wants `tool` called with `args` (`call_id`: its own id for the call, when it has one).

    `error` says why the call cannot be made as sent (arguments that are not a JSON object): the environment is not
    called, and the error is the call's result, which the agent reads as its observation; `arguments_text` keeps
    the text the model sent, as it sent it.
    """

    tool: str
    args: dict[str, Any]
    call_id: str | None = None
    error: str | None = None
    arguments_text: str | None = None  # what the model sent when it was no JSON object (args is then {})


@dataclass(frozen=True)
class Finish(Turn):
    """The agent says it is done (`summary`: its closing words; `reason` "out_of_tokens" when its budget ran out)."""

    summary: str = ""
    reason: str | None = None


Action = ToolCall | Finish


class AgentFailure(Exception):
    """The agent could not go on; `category` is the trial's failure_category (`events`: what its harness did first).

    A subclass names its category in its bases: `class AgentTimedOut(AgentFailure, category="timeout")`.
    """

    category: ClassVar[LoopFailure] = "agent_error"
    events: tuple[Event, ...] = ()

    def __init_subclass__(cls, category: LoopFailure | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if category is not None:
            cls.category = category


class AgentCrashed(AgentFailure):
    """The agent raised or its process exited (category agent_error, as every failure not named otherwise)."""


class AgentTimedOut(AgentFailure, category="timeout"):
    """The agent did not answer within the trial's time budget."""


class AgentProtocolError(AgentFailure, category="agent_protocol_error"):
    """The agent answered something that is not a valid action (bad JSON, wrong shape, a flood)."""


class AgentLimitExceeded(AgentFailure, category="resource_limit"):
    """The agent's program went past a sandbox limit (memory, processes, file size, output, CPU)."""


class Agent(ABC):
    """One episode's agent: `start` once, then `act` for each observation, then `close`.

    `system_prompt` is what the agent's model is told before the task, when the trial should record it.
    """

    system_prompt: str | None = None

    @abstractmethod
    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        """Receive the task, the facts behind it and the tools."""

    @abstractmethod
    def act(self, observation: str | None, deadline: float) -> Action:
        """Return the next action, given the last observation (None before the first action)."""

    def close(self) -> str:
        """Release what the agent holds; return anything it printed on the side (bounded) for the log."""
        return ""
