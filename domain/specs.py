"""Environment version specs: what a spec may say, checked once for the web, the importers and the worker.

`{"kind": "builtin", "environment": "admin-console", "params": {…}}` names a
built-in world; `{"kind": "mcp", "command": [...], …}` any MCP server over
stdio; `{"kind": "external", …}` results imported from another harness (kept
as given, never run here). `validate_spec` returns the normalised spec (defaults
filled in) or raises SpecError naming the bad field.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from domain.errors import SpecError
from domain.limits import sandbox_options

SpecKind = str  # "builtin" | "mcp" | "external"
ADMIN_CONSOLE_LIMITS = {"skus": (8, 3, 20), "customers": (5, 2, 12)}  # default, low, high
SUPPORT_DESK_LIMITS = {"tickets": (6, 2, 30)}
REFERENCE_PREFIXES = ("REF", "CASE")


def int_param(params: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """Return integer parameter `name` (default when absent) or raise SpecError naming its range."""
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(f"params.{name} must be an integer from {low} to {high}, not {value!r}")
    return value


def admin_console_params(params: dict[str, Any]) -> dict[str, Any]:
    """admin-console: `skus` (3-20) and `customers` (2-12), how big the world and how many distractors."""
    return {name: int_param(params, name, *bounds) for name, bounds in ADMIN_CONSOLE_LIMITS.items()}


def support_desk_params(params: dict[str, Any]) -> dict[str, Any]:
    """support-desk: `tickets` (2-30) and `reference_prefix` (REF or CASE)."""
    prefix = params.get("reference_prefix", "REF")
    if prefix not in REFERENCE_PREFIXES:
        raise SpecError(f"params.reference_prefix must be 'REF' or 'CASE', not {prefix!r}")
    return {"tickets": int_param(params, "tickets", *SUPPORT_DESK_LIMITS["tickets"]), "reference_prefix": prefix}


BUILTIN_PARAMS = {"admin-console": admin_console_params, "support-desk": support_desk_params}


def _strings(value: Any, name: str, *, non_empty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or (non_empty and not value):
        raise SpecError(f"spec.{name} must be a non-empty list of strings")
    return value


def validate_mcp_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Return the normalised MCP spec or raise SpecError naming the bad field."""
    unknown = set(spec) - {"kind", "command", "cwd", "env", "verifier", "task", "params", "network", "limits"}
    if unknown:
        raise SpecError(f"unknown spec keys: {', '.join(sorted(unknown))}")
    normalised: dict[str, Any] = {"kind": "mcp", "command": _strings(spec.get("command"), "command", non_empty=True)}
    if "cwd" in spec:
        cwd = spec["cwd"]
        if not isinstance(cwd, str) or cwd.startswith("/") or ".." in PurePosixPath(cwd).parts:
            raise SpecError("spec.cwd must be a relative path inside the trial's workspace")
        normalised["cwd"] = cwd
    try:
        normalised |= sandbox_options(spec, "spec")
    except ValueError as error:
        raise SpecError(str(error)) from None
    env = spec.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise SpecError("spec.env must map names to strings")
    normalised["env"] = env
    verifier = spec.get("verifier")
    if (
        not isinstance(verifier, dict)
        or len(verifier) != 1
        or not ((isinstance(verifier.get("tool"), str) and verifier["tool"]) or "command" in verifier)
    ):
        raise SpecError('spec.verifier must be {"tool": "<name>"} or {"command": ["…"]}')
    if "command" in verifier:
        _strings(verifier["command"], "verifier.command", non_empty=True)
    normalised["verifier"] = verifier
    if not isinstance(spec.get("params", {}), dict):
        raise SpecError("spec.params must be a JSON object")
    normalised["params"] = spec.get("params", {})
    if "task" in spec:
        if not isinstance(spec["task"], str):
            raise SpecError("spec.task must be text")
        normalised["task"] = spec["task"]
    return normalised


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
    if name not in BUILTIN_PARAMS:
        raise SpecError(f"spec.environment must be one of {', '.join(sorted(BUILTIN_PARAMS))}, not {name!r}")
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise SpecError("spec.params must be a JSON object")
    unknown = set(spec) - {"kind", "environment", "params"}
    if unknown:
        raise SpecError(f"unknown spec keys: {', '.join(sorted(unknown))}")
    return {"kind": "builtin", "environment": name, "params": BUILTIN_PARAMS[name](params)}
