"""JSON schemas of environment specs and agent configs, until domain/ models them (then this module goes away)."""

from __future__ import annotations

from typing import Any

from domain.limits import LIMITS
from domain.specs import ADMIN_CONSOLE_LIMITS, BUILTIN_PARAMS, REFERENCE_PREFIXES, SUPPORT_DESK_LIMITS

SECRET_ENV = (
    '`env` values are secrets: sealed at rest, shown to nobody (every value reads "***", names only) and masked as '
    "*** in recorded output; a changed secret is a new version or configuration, never an edit."
)
STRINGS = {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}
ENV = {"type": "object", "additionalProperties": {"type": "string"}, "description": SECRET_ENV}
NETWORK = {"type": "boolean", "description": "Network access for the program (off unless true)"}
LIMIT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "description": "Resource limits of the sandboxed program; the operator's AGENTFORGE_MAX_* ceilings apply.",
    "properties": {
        limit.key: {"type": "integer", "minimum": 1, "maximum": limit.ceiling, "default": limit.default}
        for limit in LIMITS
    },
}
PARAM_SCHEMAS: dict[str, dict[str, dict[str, Any]]] = {
    "admin-console": {
        name: {"type": "integer", "minimum": low, "maximum": high, "default": default}
        for name, (default, low, high) in ADMIN_CONSOLE_LIMITS.items()
    },
    "support-desk": {
        **{
            name: {"type": "integer", "minimum": low, "maximum": high, "default": default}
            for name, (default, low, high) in SUPPORT_DESK_LIMITS.items()
        },
        "reference_prefix": {"enum": list(REFERENCE_PREFIXES), "default": REFERENCE_PREFIXES[0]},
    },
}

BUILTIN_SPEC: dict[str, Any] = {
    "title": "BuiltinSpec",
    "type": "object",
    "description": "One of the environments this server ships; `kind` may be left out.",
    "required": ["environment"],
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "builtin", "default": "builtin"},
        "environment": {"enum": sorted(BUILTIN_PARAMS)},
        "params": {
            "type": "object",
            "description": "The environment's parameters, defaults filled in: "
            + "; ".join(f"{name}: {', '.join(params)}" for name, params in PARAM_SCHEMAS.items()),
            "properties": {key: value for params in PARAM_SCHEMAS.values() for key, value in params.items()},
        },
    },
}
MCP_SPEC: dict[str, Any] = {
    "title": "McpSpec",
    "type": "object",
    "description": "An MCP server the worker starts in the trial's sandbox and scores with a verifier.",
    "required": ["kind", "command", "verifier"],
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "mcp"},
        "command": {**STRINGS, "description": "The server's argv (python means the worker's interpreter)"},
        "cwd": {"type": "string", "description": "A relative path inside the trial's workspace"},
        "env": ENV,
        "verifier": {
            "oneOf": [
                {
                    "type": "object",
                    "required": ["tool"],
                    "additionalProperties": False,
                    "properties": {"tool": {"type": "string", "minLength": 1}},
                },
                {
                    "type": "object",
                    "required": ["command"],
                    "additionalProperties": False,
                    "properties": {"command": STRINGS},
                },
            ]
        },
        "task": {"type": "string"},
        "params": {"type": "object"},
        "network": NETWORK,
        "limits": LIMIT_SCHEMA,
    },
}
EXTERNAL_SPEC: dict[str, Any] = {
    "title": "ExternalSpec",
    "type": "object",
    "description": "An environment of another harness whose results were imported; kept as given, never run here.",
    "required": ["kind"],
    "properties": {"kind": {"const": "external"}},
}


def tagged_union(title: str, variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A oneOf discriminated on `kind`, shaped as pydantic's model_json_schema() shapes one (variants in $defs)."""
    refs = {kind: f"#/$defs/{variant['title']}" for kind, variant in variants.items()}
    return {
        "title": title,
        "$defs": {variant["title"]: variant for variant in variants.values()},
        "oneOf": [{"$ref": ref} for ref in refs.values()],
        "discriminator": {"propertyName": "kind", "mapping": refs},
    }


SPEC_SCHEMA = tagged_union("EnvironmentSpec", {"builtin": BUILTIN_SPEC, "mcp": MCP_SPEC, "external": EXTERNAL_SPEC})

AGENT_SCHEMA = tagged_union(
    "AgentConfig",
    {
        "scripted": {
            "title": "ScriptedAgent",
            "type": "object",
            "description": "A built-in agent that acts through the environment's tools with a seed and a skill level.",
            "required": ["kind"],
            "properties": {
                "kind": {"const": "scripted"},
                "skill": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.8},
                "stepDelayS": {"type": "number", "minimum": 0, "maximum": 10, "default": 0},
            },
        },
        "command": {
            "title": "CommandAgent",
            "type": "object",
            "description": "A program speaking JSON lines over stdin/stdout, run in the trial's sandbox.",
            "required": ["kind", "argv"],
            "properties": {
                "kind": {"const": "command"},
                "argv": STRINGS,
                "env": ENV,
                "network": NETWORK,
                "limits": LIMIT_SCHEMA,
            },
        },
        "external": {
            "title": "ExternalAgent",
            "type": "object",
            "description": "An agent that ran in another harness (imported results).",
            "required": ["kind", "name"],
            "properties": {"kind": {"const": "external"}, "name": {"type": "string", "minLength": 1}},
        },
    },
)
