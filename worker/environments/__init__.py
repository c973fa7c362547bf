"""The environments a worker runs, one for each kind of spec (`ENVIRONMENTS`: spec model → how it starts).

A built-in world ({"kind": "builtin", "environment": name, "params": {…}}), an MCP server (kind "mcp",
worker/environments/mcp_env.py), a Harbor task (kind "harbor-task", worker/environments/harbor_task.py); specs of
kind "external" describe environments of other harnesses whose results were imported, which no worker runs. A new
kind is a spec model in domain/specs.py (`VARIANTS`) and a module here with a class that implements
`TrialEnvironment` and a start registered with `@environment_of(SpecModel)` (worker/environments/registry.py): the
package imports every module of it but the programs (`PROGRAMS`), so nothing here names the new module.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from domain.errors import SpecError
from domain.specs import spec_model, validate_spec
from worker.environments.base import Environment, Task, ToolError, ToolResult, ToolSpec, TrialEnvironment
from worker.environments.registry import ENVIRONMENTS, TrialPlace, environment_of
from worker.registries import import_modules

__all__ = [
    "ENVIRONMENTS",
    "Environment",
    "SpecError",
    "Task",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "TrialEnvironment",
    "TrialPlace",
    "environment_of",
    "load",
    "validate_spec",
]

# Modules run as programs of their own (`python -m …` in a spec's command), never imported by the worker.
PROGRAMS = frozenset({"mcp_admin_console"})

import_modules(__name__, __path__, PROGRAMS)

ELSEWHERE = "this version holds imported results; its environment runs elsewhere, not in this worker"


def load(spec: BaseModel | dict[str, Any], place: TrialPlace | None = None) -> TrialEnvironment:
    """Instantiate the environment a version's spec names, in `place`: its checked model (domain.specs.spec_model),
    or its JSON, checked here (SpecError)."""
    checked = spec if isinstance(spec, BaseModel) else spec_model(spec)
    start = ENVIRONMENTS.get(type(checked))
    if start is None:
        raise SpecError(ELSEWHERE)
    return start(checked, place or TrialPlace())
