"""Built-in environments and the spec that selects one: {"kind": "builtin", "environment": name, "params": {…}}.

Specs of kind "mcp" start an MCP server, of kind "harbor-task" run a Harbor task (worker/environments/harbor_task.py);
specs of kind "external" describe environments of other harnesses whose results were imported.
"""

from __future__ import annotations

from typing import Any

from domain.errors import SpecError
from domain.specs import validate_spec
from worker.environments.admin_console import AdminConsole
from worker.environments.base import Environment, Task, ToolError, ToolSpec
from worker.environments.harbor_task import HarborTaskEnvironment
from worker.environments.mcp_env import MCPEnvironment
from worker.environments.support_desk import SupportDesk
from worker.masking import Masker
from worker.sandbox import TrialSandbox

BUILTIN: dict[str, type[Environment]] = {cls.name: cls for cls in (AdminConsole, SupportDesk)}  # domain.specs names

__all__ = ["BUILTIN", "Environment", "SpecError", "Task", "ToolError", "ToolSpec", "load", "validate_spec"]


def load(
    spec: dict[str, Any], sandbox: TrialSandbox | None = None, masker: Masker | None = None, *, oracle: bool = False
) -> Environment | MCPEnvironment | HarborTaskEnvironment:
    """Instantiate the environment a version's spec names (programs it starts run in `sandbox`, what they print is
    masked with `masker`, the trial's secrets, before any of it is cut; `oracle`: the agent is a Harbor task's
    oracle, which alone sees the task's solution)."""
    normalised = validate_spec(spec)
    if normalised["kind"] == "external":
        raise SpecError("this version holds imported results; its environment runs elsewhere, not in this worker")
    if normalised["kind"] == "mcp":
        if sandbox is None:
            raise SpecError("an MCP environment starts a program, so it needs the trial's sandbox")
        return MCPEnvironment(normalised, sandbox, masker)
    if normalised["kind"] == "harbor-task":
        if sandbox is None:
            raise SpecError("a Harbor task runs its commands in the trial's sandbox, so it needs one")
        return HarborTaskEnvironment(normalised, sandbox, masker, oracle=oracle)
    return BUILTIN[normalised["environment"]](normalised["params"])  # params already checked by domain.specs
