"""Built-in environments and the spec that selects one: {"kind": "builtin", "environment": name, "params": {…}}.

Specs of kind "external" describe environments of other harnesses whose results were imported.
"""

from __future__ import annotations

from typing import Any

from worker.environments.admin_console import AdminConsole
from worker.environments.base import Environment, SpecError, Task, ToolError, ToolSpec
from worker.environments.mcp_env import MCPEnvironment, validate_mcp_spec
from worker.environments.support_desk import SupportDesk
from worker.sandbox import TrialSandbox

BUILTIN: dict[str, type[Environment]] = {cls.name: cls for cls in (AdminConsole, SupportDesk)}

__all__ = ["BUILTIN", "Environment", "SpecError", "Task", "ToolError", "ToolSpec", "load", "validate_spec"]


def validate_spec(spec: Any) -> dict[str, Any]:
    """Return the normalised spec (defaults filled in) or raise SpecError saying what is wrong."""
    if not isinstance(spec, dict):
        raise SpecError("spec must be a JSON object")
    if spec.get("kind") == "external":  # results imported from another harness: kept as given, never run here
        return dict(spec)
    if spec.get("kind") == "mcp":
        return validate_mcp_spec(spec)
    if spec.get("kind", "builtin") != "builtin":
        raise SpecError(
            f"spec.kind must be 'builtin' or 'mcp' (or 'external' for imported results), not {spec.get('kind')!r}"
        )
    name = spec.get("environment")
    if name not in BUILTIN:
        raise SpecError(f"spec.environment must be one of {', '.join(sorted(BUILTIN))}, not {name!r}")
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise SpecError("spec.params must be a JSON object")
    unknown = set(spec) - {"kind", "environment", "params"}
    if unknown:
        raise SpecError(f"unknown spec keys: {', '.join(sorted(unknown))}")
    return {"kind": "builtin", "environment": name, "params": BUILTIN[name].validate_params(params)}


def load(spec: dict[str, Any], sandbox: TrialSandbox | None = None) -> Environment | MCPEnvironment:
    """Instantiate the environment a version's spec names (programs it starts run in `sandbox`)."""
    normalised = validate_spec(spec)
    if normalised["kind"] == "external":
        raise SpecError("this version holds imported results; its environment runs elsewhere, not in this worker")
    if normalised["kind"] == "mcp":
        if sandbox is None:
            raise SpecError("an MCP environment starts a program, so it needs the trial's sandbox")
        return MCPEnvironment(normalised, sandbox)
    return BUILTIN[normalised["environment"]](normalised["params"])
