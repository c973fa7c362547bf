"""Agents the worker can evaluate: the built-in scripted agent, any JSON-lines command, an OpenAI-compatible model,
and the oracle (a Harbor task's own solution)."""

from __future__ import annotations

from typing import Any

from domain.agents import validate_agent
from domain.errors import AgentConfigError
from worker.agents.base import Action, Agent, AgentFailure, Finish, ToolCall
from worker.agents.command import CommandAgent
from worker.agents.openai_chat import OpenAIChatAgent
from worker.agents.oracle import OracleAgent
from worker.agents.scripted import ScriptedAgent
from worker.masking import Masker
from worker.sandbox import TrialSandbox

__all__ = ["Action", "Agent", "AgentConfigError", "AgentFailure", "Finish", "ToolCall", "load", "validate_agent"]


def load(agent: dict[str, Any], seed: int, sandbox: TrialSandbox, masker: Masker | None = None) -> Agent:
    """Build the agent an evaluator configuration describes, seeded for this trial (programs run in `sandbox`, what
    they print is masked with `masker`, the trial's secrets, before any of it is cut)."""
    config = validate_agent(agent)
    if config["kind"] == "external":
        raise AgentConfigError(f"agent {config['name']!r} ran in another harness; its results are imported, not run")
    if config["kind"] == "scripted":
        return ScriptedAgent(config["skill"], seed, config["stepDelayS"])
    if config["kind"] == "openai-chat":
        return OpenAIChatAgent(config, sandbox, masker)
    if config["kind"] == "oracle":
        return OracleAgent()
    return CommandAgent(config, sandbox, masker)
