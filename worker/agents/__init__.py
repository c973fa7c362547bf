"""Agents the worker can evaluate, one for each kind of agent config (`AGENT_RUNTIMES`: config model → its agent):
the built-in scripted agent, any JSON-lines command, an OpenAI-compatible model, and the oracle (a Harbor task's own
solution). A new kind is a config model in domain/agents.py (`AGENTS`) and a module here with an `Agent` and a start
registered with `@agent_of(ConfigModel)` (worker/agents/registry.py): the package imports every module of it but
the programs (`PROGRAMS`), so nothing here names the new module."""

from __future__ import annotations

from domain import agents as configs
from domain.agents import validate_agent
from domain.errors import AgentConfigError
from worker.agents.base import Action, Agent, AgentFailure, Finish, ToolCall
from worker.agents.registry import AGENT_RUNTIMES, agent_of
from worker.masking import Masker
from worker.registries import import_modules
from worker.sandbox import TrialSandbox

__all__ = [
    "AGENT_RUNTIMES",
    "Action",
    "Agent",
    "AgentConfigError",
    "AgentFailure",
    "Finish",
    "ToolCall",
    "agent_of",
    "load",
    "validate_agent",
]

# Modules run as programs of their own in a trial's sandbox (openai_chat.PROGRAM), never imported by the worker.
PROGRAMS = frozenset({"openai_program"})

import_modules(__name__, __path__, PROGRAMS)


def load(config: configs.AgentModel, seed: int, sandbox: TrialSandbox, masker: Masker | None = None) -> Agent:
    """Build the agent a checked evaluator configuration (domain.agents.agent_model) describes, seeded for this
    trial (programs run in `sandbox`, what they print is masked with `masker`, the trial's secrets, before any of it
    is cut)."""
    start = AGENT_RUNTIMES.get(type(config))
    if start is None:
        name = getattr(config, "name", None) or getattr(config, "kind", "?")
        raise AgentConfigError(f"agent {name!r} ran in another harness; its results are imported, not run")
    return start(config, seed, sandbox, masker)
