"""The environments a worker runs, one for each kind of spec (`ENVIRONMENTS`: spec model → how it starts).

A built-in world ({"kind": "builtin", "environment": name, "params": {…}}), an MCP server (kind "mcp",
worker/environments/mcp_env.py), a Harbor task (kind "harbor-task", worker/environments/harbor_task.py); specs of
kind "external" describe environments of other harnesses whose results were imported, which no worker runs. A new
kind is a spec model in domain/specs.py (`VARIANTS`) and a class here that implements `TrialEnvironment`,
registered in `ENVIRONMENTS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from domain.errors import SpecError
from domain.specs import AdminConsoleSpec, HarborTaskSpec, McpSpec, SupportDeskSpec, spec_model, validate_spec
from worker.environments.admin_console import AdminConsole
from worker.environments.base import Environment, Task, ToolError, ToolResult, ToolSpec, TrialEnvironment
from worker.environments.harbor_task import HarborTaskEnvironment
from worker.environments.mcp_env import MCPEnvironment
from worker.environments.support_desk import SupportDesk
from worker.masking import Masker
from worker.sandbox import TrialSandbox

BUILTIN: dict[str, type[Environment]] = {cls.name: cls for cls in (AdminConsole, SupportDesk)}  # domain.specs names

__all__ = [
    "BUILTIN",
    "ENVIRONMENTS",
    "Environment",
    "SpecError",
    "Task",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "TrialEnvironment",
    "TrialPlace",
    "load",
    "validate_spec",
]


@dataclass(frozen=True)
class TrialPlace:
    """Where an environment starts: the trial's sandbox (None in tests of worlds that start no program), the Masker
    of its secrets (what its programs print is masked before any of it is cut), and whether the agent is a Harbor
    task's oracle (which alone sees the task's solution)."""

    sandbox: TrialSandbox | None = None
    masker: Masker | None = None
    oracle: bool = False

    def needed_sandbox(self, why: str) -> TrialSandbox:
        """The trial's sandbox, or SpecError saying why this environment needs one."""
        if self.sandbox is None:
            raise SpecError(why)
        return self.sandbox


def _mcp(spec: McpSpec, place: TrialPlace) -> MCPEnvironment:
    sandbox = place.needed_sandbox("an MCP environment starts a program, so it needs the trial's sandbox")
    return MCPEnvironment(spec, sandbox, place.masker)


def _harbor_task(spec: HarborTaskSpec, place: TrialPlace) -> HarborTaskEnvironment:
    sandbox = place.needed_sandbox("a Harbor task runs its commands in the trial's sandbox, so it needs one")
    return HarborTaskEnvironment(spec, sandbox, place.masker, oracle=place.oracle)


# Spec model (domain.specs.VARIANTS) → the environment a trial of it runs in. ExternalSpec has none: its trials ran
# in another harness.
ENVIRONMENTS: dict[type[BaseModel], Callable[[Any, TrialPlace], TrialEnvironment]] = {
    AdminConsoleSpec: lambda spec, place: AdminConsole(spec.params.model_dump(mode="json")),
    SupportDeskSpec: lambda spec, place: SupportDesk(spec.params.model_dump(mode="json")),
    McpSpec: _mcp,
    HarborTaskSpec: _harbor_task,
}
ELSEWHERE = "this version holds imported results; its environment runs elsewhere, not in this worker"


def load(spec: BaseModel | dict[str, Any], place: TrialPlace | None = None) -> TrialEnvironment:
    """Instantiate the environment a version's spec names, in `place`: its checked model (domain.specs.spec_model),
    or its JSON, checked here (SpecError)."""
    checked = spec if isinstance(spec, BaseModel) else spec_model(spec)
    start = ENVIRONMENTS.get(type(checked))
    if start is None:
        raise SpecError(ELSEWHERE)
    return start(checked, place or TrialPlace())
