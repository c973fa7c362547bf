"""The documented JSON schema of specs and agent configs agrees with the rules the domain enforces (DB-free)."""

from __future__ import annotations

import jsonschema
import pytest

from domain.agents import AGENT_JSON_SCHEMA, validate_agent
from domain.errors import DomainError
from domain.specs import SPEC_JSON_SCHEMA, validate_spec

MCP = {"kind": "mcp", "command": ["server"], "verifier": {"tool": "score"}}
SPECS = [
    ({"environment": "admin-console"}, True),
    ({"kind": "builtin", "environment": "support-desk", "params": {"tickets": 30, "reference_prefix": "CASE"}}, True),
    ({"environment": "admin-console", "params": {"skus": 21}}, False),
    ({"environment": "support-desk", "params": {"reference_prefix": "X"}}, False),
    ({"environment": "nope"}, False),
    ({"environment": "admin-console", "extra": 1}, False),
    (MCP, True),
    ({**MCP, "verifier": {"command": ["python", "check.py"]}, "limits": {"memoryMb": 256}, "network": True}, True),
    ({**MCP, "verifier": {"tool": "a", "command": ["b"]}}, False),
    ({**MCP, "verifier": {"tool": "score", "arguments": {"strict": True, "paths": ["a"]}}}, True),
    ({**MCP, "verifier": {"tool": "score", "arguments": [1]}}, False),
    ({**MCP, "verifier": {"command": ["b"], "arguments": {}}}, False),
    ({**MCP, "verifier": {"arguments": {}}}, False),
    ({**MCP, "startupTimeoutS": 5}, True),
    ({**MCP, "startupTimeoutS": 0.5}, False),
    ({**MCP, "startupTimeoutS": 301}, False),
    ({**MCP, "startupTimeoutS": "30"}, False),
    ({**MCP, "limits": {"gpus": 1}}, False),
    ({**MCP, "limits": {"memoryMb": 0}}, False),
    ({**MCP, "env": {"A": 1}}, False),
    ({**MCP, "command": []}, False),
    ({"kind": "external", "harness": "harbor"}, True),
    ({"kind": "docker"}, False),
]
CHAT = {"kind": "openai-chat", "baseUrl": "http://127.0.0.1:8000/v1", "model": "qwen3-8b"}
AGENTS = [
    ({"kind": "scripted"}, True),
    ({"kind": "scripted", "skill": 1.5}, False),
    ({"kind": "command", "argv": ["agent"], "env": {"MODEL": "x"}, "limits": {"cpuSeconds": 5}}, True),
    ({"kind": "command", "argv": [""]}, False),
    ({**CHAT, "network": True}, True),
    (
        {**CHAT, "network": True, "temperature": 0.7, "maxTokens": 512, "tokenBudget": 50_000, "extraBody": {"k": 1}},
        True,
    ),
    ({**CHAT, "network": True, "apiKeyEnv": "KEY", "env": {"KEY": "sk-1"}, "systemPrompt": "Be brief."}, True),
    (CHAT, False),
    ({**CHAT, "network": False}, False),
    ({**CHAT, "network": True, "baseUrl": "file:///etc/passwd"}, False),
    ({**CHAT, "network": True, "model": ""}, False),
    ({**CHAT, "network": True, "temperature": 3}, False),
    ({**CHAT, "network": True, "tokenBudget": 0}, False),
    ({**CHAT, "network": True, "extraBody": []}, False),
    ({"kind": "external", "name": "terminus-2"}, True),
    ({"kind": "external"}, False),
]


def accepted(validate, value) -> bool:
    try:
        validate(value)
    except DomainError:
        return False
    return True


@pytest.mark.parametrize(("spec", "valid"), SPECS)
def test_the_spec_schema_and_the_spec_rules_agree(spec, valid):
    assert accepted(validate_spec, spec) is valid
    assert jsonschema.Draft202012Validator(SPEC_JSON_SCHEMA).is_valid(spec) is valid


@pytest.mark.parametrize(("agent", "valid"), AGENTS)
def test_the_agent_schema_and_the_agent_rules_agree(agent, valid):
    assert accepted(validate_agent, agent) is valid
    assert jsonschema.Draft202012Validator(AGENT_JSON_SCHEMA).is_valid(agent) is valid


def test_a_normalised_spec_has_the_documented_defaults_filled_in():
    assert validate_spec({"environment": "support-desk"}) == {
        "kind": "builtin",
        "environment": "support-desk",
        "params": {"tickets": 6, "reference_prefix": "REF"},
    }
    documented = SPEC_JSON_SCHEMA["$defs"]["SupportDeskParams"]["properties"]
    assert {name: field["default"] for name, field in documented.items()} == {"tickets": 6, "reference_prefix": "REF"}


MCP = {"kind": "mcp", "command": ["srv"], "verifier": {"tool": "t"}}


def test_plain_vars_are_kept_and_a_spec_without_them_is_unchanged():
    assert validate_spec({**MCP, "vars": {"GIT_AUTHOR_NAME": "tester"}})["vars"] == {"GIT_AUTHOR_NAME": "tester"}
    assert "vars" not in validate_spec(MCP)  # versions pinned before vars keep their hashes
    agent = validate_agent({"kind": "command", "argv": ["a"], "vars": {"MODE": "fast"}, "env": {"KEY": "s3cret"}})
    assert agent["vars"] == {"MODE": "fast"} and agent["env"] == {"KEY": "s3cret"}


@pytest.mark.parametrize(
    ("check", "config", "said"),
    [
        (validate_spec, {**MCP, "env": {"USER": "a"}, "vars": {"USER": "b"}}, "spec.vars USER: also in spec.env"),
        (
            validate_agent,
            {"kind": "command", "argv": ["a"], "env": {"K": "1"}, "vars": {"K": "2"}},
            "agent.vars K: also in agent.env",
        ),
        (validate_spec, {**MCP, "vars": {"A": 1}}, "spec.vars must map names to strings"),
        (validate_agent, {"kind": "scripted", "vars": {"A": "b"}}, None),  # a scripted agent runs no program: dropped
    ],
)
def test_a_name_is_either_secret_or_plain(check, config, said):
    if said is None:
        assert "vars" not in check(config)
        return
    with pytest.raises(DomainError) as refused:
        check(config)
    assert said in str(refused.value)
