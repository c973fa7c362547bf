"""Agents the worker can evaluate, one for each kind of agent config (`AGENT_RUNTIMES`: config model → its agent):
the built-in scripted agent, any JSON-lines command, an OpenAI-compatible model, and the oracle (a Harbor task's own
solution). A new kind is a config model in domain/agents.py (`AGENTS`) and an `Agent` here, registered in
`AGENT_RUNTIMES`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain import agents as configs
from domain.agents import validate_agent
from domain.errors import AgentConfigError
from worker.agents.base import Action, Agent, AgentFailure, Finish, ToolCall
from worker.agents.command import CommandAgent
from worker.agents.openai_chat import OpenAIChatAgent
from worker.agents.oracle import OracleAgent
from worker.agents.scripted import ScriptedAgent
from worker.masking import Masker
from worker.sandbox import TrialSandbox

__all__ = [
    "AGENT_RUNTIMES",
    "Action",
    "Agent",
    "AgentConfigError",
    "AgentFailure",
    "Finish",
    "ToolCall",
    "load",
    "validate_agent",
]

# Config model (domain.agents.AGENTS) → the agent of one trial: (config, trial seed, sandbox, masker) → Agent.
# ExternalAgent has none: its trials ran in another harness.
AGENT_RUNTIMES: dict[type[configs.AgentModel], Callable[[Any, int, TrialSandbox, Masker | None], Agent]] = {
    configs.ScriptedAgent: lambda config, seed, sandbox, masker: ScriptedAgent(config.skill, seed, config.stepDelayS),
    configs.CommandAgent: lambda config, seed, sandbox, masker: CommandAgent(config, sandbox, masker),
    configs.OpenAIChatAgent: lambda config, seed, sandbox, masker: OpenAIChatAgent(config, sandbox, masker),
    configs.OracleAgent: lambda config, seed, sandbox, masker: OracleAgent(),
}


def load(config: configs.AgentModel, seed: int, sandbox: TrialSandbox, masker: Masker | None = None) -> Agent:
    """Build the agent a checked evaluator configuration (domain.agents.agent_model) describes, seeded for this
    trial (programs run in `sandbox`, what they print is masked with `masker`, the trial's secrets, before any of it
    is cut)."""
    start = AGENT_RUNTIMES.get(type(config))
    if start is None:
        name = getattr(config, "name", None) or getattr(config, "kind", "?")
        raise AgentConfigError(f"agent {name!r} ran in another harness; its results are imported, not run")
    return start(config, seed, sandbox, masker)
