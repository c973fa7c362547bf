"""Evaluator configurations' agents: what an agent config may say, checked once for the web and the worker.

`{"kind": "scripted", "skill", "stepDelayS"}` is the built-in simulated agent,
`{"kind": "command", "argv", "env", "network"?, "limits"?}` any program speaking
JSON lines, `{"kind": "external", "name"}` an agent that ran in another harness.
"""

from __future__ import annotations

from typing import Any

from domain.errors import AgentConfigError
from domain.limits import sandbox_options


def validate_agent(agent: Any) -> dict[str, Any]:
    """Return the normalised agent config or raise AgentConfigError naming the bad field."""
    if not isinstance(agent, dict):
        raise AgentConfigError("agent must be a JSON object")
    kind = agent.get("kind")
    if kind == "scripted":
        skill = agent.get("skill", 0.8)
        delay = agent.get("stepDelayS", 0.0)
        if isinstance(skill, bool) or not isinstance(skill, int | float) or not 0 <= skill <= 1:
            raise AgentConfigError(f"agent.skill must be a number from 0 to 1, not {skill!r}")
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 10:
            raise AgentConfigError(f"agent.stepDelayS must be a number from 0 to 10, not {delay!r}")
        return {"kind": "scripted", "skill": float(skill), "stepDelayS": float(delay)}
    if kind == "command":
        argv = agent.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise AgentConfigError("agent.argv must be a non-empty list of strings")
        env = agent.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise AgentConfigError("agent.env must map names to strings")
        normalised: dict[str, Any] = {"kind": "command", "argv": argv, "env": env}
        try:
            return normalised | sandbox_options(agent, "agent")
        except ValueError as error:
            raise AgentConfigError(str(error)) from None
    if kind == "external":  # an agent that ran in another harness (imported results)
        name = agent.get("name", "")
        if not isinstance(name, str) or not name:
            raise AgentConfigError("agent.name must name the external agent")
        return {"kind": "external", "name": name}
    raise AgentConfigError(f"agent.kind must be 'scripted' or 'command', not {kind!r}")
