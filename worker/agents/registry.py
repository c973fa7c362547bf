"""The agents' registry: agent config model (domain.agents.AGENTS) → how a trial's agent of it starts
(`AGENT_RUNTIMES`), filled by `@agent_of(ConfigModel)` in each agent's own module, which the package imports
(worker/agents/__init__.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from domain.agents import AgentModel
from worker.agents.base import Agent
from worker.masking import Masker
from worker.sandbox import TrialSandbox

AgentStart = Callable[[Any, int, TrialSandbox, Masker | None], Agent]  # (config, trial seed, sandbox, masker)
A = TypeVar("A", bound=AgentStart)

# Config model → the agent of one trial. ExternalAgent has none: its trials ran in another harness.
AGENT_RUNTIMES: dict[type[AgentModel], AgentStart] = {}


def agent_of(model: type[AgentModel]) -> Callable[[A], A]:
    """Register the decorated start (config checked by `model`, trial seed, sandbox, masker) → agent as how trials
    of `model`'s configurations start their agent."""

    def register(start: A) -> A:
        AGENT_RUNTIMES[model] = start
        return start

    return register
