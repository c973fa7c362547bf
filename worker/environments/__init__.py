"""Built-in environments and the spec that selects one: {"kind": "builtin", "environment": name, "params": {…}}.

Specs of kind "external" describe environments of other harnesses whose results were imported.
"""

from __future__ import annotations

from typing import Any

from domain.errors import SpecError
from domain.specs import validate_spec
from worker.environments.admin_console import AdminConsole
from worker.environments.base import Environment, Task, ToolError, ToolSpec
from worker.environments.mcp_env import MCPEnvironment
from worker.environments.support_desk import SupportDesk
from worker.masking import Masker
from worker.sandbox import TrialSandbox

BUILTIN: dict[str, type[Environment]] = {cls.name: cls for cls in (AdminConsole, SupportDesk)}  # domain.specs names

__all__ = ["BUILTIN", "Environment", "SpecError", "Task", "ToolError", "ToolSpec", "load", "validate_spec"]


def load(
    spec: dict[str, Any], sandbox: TrialSandbox | None = None, masker: Masker | None = None
) -> Environment | MCPEnvironment:
    """Instantiate the environment a version's spec names (programs it starts run in `sandbox`, what they print is
    masked with `masker`, the trial's secrets, before any of it is cut)."""
    normalised = validate_spec(spec)
    if normalised["kind"] == "external":
        raise SpecError("this version holds imported results; its environment runs elsewhere, not in this worker")
    if normalised["kind"] == "mcp":
        if sandbox is None:
            raise SpecError("an MCP environment starts a program, so it needs the trial's sandbox")
        return MCPEnvironment(normalised, sandbox, masker)
    return BUILTIN[normalised["environment"]](normalised["params"])  # params already checked by domain.specs
