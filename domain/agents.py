"""Evaluator configurations' agents: pydantic models discriminated on `kind`, checked once for the web and worker.

`{"kind": "scripted", "skill", "stepDelayS"}` is the built-in simulated agent,
`{"kind": "command", "argv", "env", "network"?, "limits"?}` any program speaking
JSON lines, `{"kind": "openai-chat", "baseUrl", "model", "network": true, …}` any model an OpenAI-compatible
chat-completions server offers (hosted APIs, vLLM, SGLang, Ollama, llama.cpp), `{"kind": "oracle"}` a
Harbor task's own solution/solve.sh, `{"kind": "external", "name"}` an agent that ran in another harness. Keys an
agent does not use are dropped. `agent_model` returns the checked model (the worker runs it: worker.agents'
AGENT_RUNTIMES maps each model to its agent), `validate_agent` its JSON as stored; a new kind is a model here, a
member of `AgentConfig` and of `AGENTS`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from domain.errors import AgentConfigError
from domain.json_depth import json_object
from domain.limits import SandboxLimits
from domain.rules import (
    NETWORK,
    Config,
    Env,
    Flag,
    JsonObject,
    Rule,
    Strings,
    Text,
    Vars,
    both_env_and_vars,
    integer_from,
    number_from,
    refusal,
)
from domain.specs import config_size_refusal


class AgentModel(Config):
    """An agent config: keys it does not use are dropped."""

    model_config = ConfigDict(extra="ignore")


class ScriptedAgent(AgentModel):
    """A built-in agent that acts through the environment's tools with a seed and a skill level."""

    kind: Literal["scripted"]
    skill: Annotated[float, number_from(0, 1)] = 0.8
    stepDelayS: Annotated[float, number_from(0, 10)] = 0.0


class CommandAgent(AgentModel):
    """A program speaking JSON lines over stdin/stdout, run in the trial's sandbox."""

    kind: Literal["command"]
    argv: Strings
    env: Env = {}
    vars: Vars | None = None
    network: Annotated[Flag, Field(description=NETWORK)] | None = None
    limits: Annotated[dict[str, int], SandboxLimits()] | None = None


def _http_url(value: Any) -> bool:
    """An http(s) URL naming a host: where an OpenAI-compatible server answers (`…/v1`)."""
    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number
        return False


DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
MAX_TOKEN_BUDGET = 100_000_000
NEEDS_NETWORK = (
    "must be true: an openai-chat agent reaches its model over the network, so the configuration opts in with "
    '"network": true (the agent runs in the trial\'s sandbox, with network access)'
)
HttpUrl = Annotated[
    str,
    Rule("must be an http:// or https:// URL naming a host", _http_url, {"pattern": "^https?://[^/?#]+"}),
    Field(description="The server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1"),
]
Name = Annotated[str, Rule("must be a non-empty string", lambda v: isinstance(v, str) and bool(v), {"minLength": 1})]


class OpenAIChatAgent(AgentModel):
    """A model behind an OpenAI-compatible chat-completions server, called with the environment's tools.

    It runs as a built-in program in the trial's sandbox (so the server is reached from there, never from the
    worker), with the config's `env`; `apiKeyEnv` names the entry holding the API key.
    """

    kind: Literal["openai-chat"]
    baseUrl: HttpUrl
    model: Name
    apiKeyEnv: (
        Annotated[Name, Field(description=f"The `env` entry holding the API key (without it: {DEFAULT_API_KEY_ENV})")]
        | None
    ) = None
    env: Env = {}
    vars: Vars | None = None
    network: Annotated[bool, Rule(NEEDS_NETWORK, lambda v: v is True, {"const": True}, show_value=False)]
    temperature: Annotated[float, number_from(0, 2)] | None = None
    maxTokens: Annotated[int, integer_from(1, 1_000_000), Field(description="Tokens per completion")] | None = None
    tokenBudget: (
        Annotated[
            int,
            integer_from(1, MAX_TOKEN_BUDGET),
            Field(description="Prompt plus completion tokens a trial may use; it ends as out_of_tokens past it"),
        ]
        | None
    ) = None
    systemPrompt: Text | None = None
    extraBody: Annotated[JsonObject, Field(description="Merged into every request body (e.g. vLLM's top_k)")] | None = (
        None
    )
    limits: Annotated[dict[str, int], SandboxLimits()] | None = None


class OracleAgent(AgentModel):
    """A Harbor task's reference solution (solution/solve.sh) as the agent: the check that a task can be solved."""

    kind: Literal["oracle"]


class ExternalAgent(AgentModel):
    """An agent that ran in another harness (imported results)."""

    kind: Literal["external"]
    name: Annotated[str, Rule("must name the external agent", lambda v: isinstance(v, str) and bool(v))]


AgentConfig = Annotated[
    ScriptedAgent | CommandAgent | OpenAIChatAgent | OracleAgent | ExternalAgent, Field(discriminator="kind")
]
AGENT_JSON_SCHEMA = TypeAdapter(AgentConfig).json_schema()
AGENTS: dict[str, type[AgentModel]] = {
    "scripted": ScriptedAgent,
    "command": CommandAgent,
    "openai-chat": OpenAIChatAgent,
    "oracle": OracleAgent,
    "external": ExternalAgent,
}


def ran_elsewhere(agent: Any) -> bool:
    """True for an imported evaluator's agent (kind external): its results came from another harness, and no
    worker here can run it."""
    return isinstance(agent, dict) and agent.get("kind") == "external"


def _check_api_key_env(agent: OpenAIChatAgent) -> None:
    """A named `apiKeyEnv` must be an entry of `env` (OPENAI_API_KEY, the default, may be absent: local servers
    take no key)."""
    if agent.apiKeyEnv is not None and agent.apiKeyEnv not in agent.env:
        raise AgentConfigError(
            f"agent.apiKeyEnv names {agent.apiKeyEnv!r}, which is not an entry of agent.env "
            f"(its entries: {', '.join(sorted(agent.env)) or 'none'})"
        )


def agent_model(agent: Any) -> AgentModel:
    """The agent config as its model (the one `AGENTS` names for its kind), checked once; AgentConfigError names
    the bad field. The worker runs the model; `validate_agent` is its JSON as stored."""
    agent = json_object(agent, "agent", AgentConfigError)
    model = AGENTS.get(agent.get("kind"))
    if model is None:
        kinds = ", ".join(repr(kind) for kind in AGENTS)
        raise AgentConfigError(f"agent.kind must be one of {kinds}, not {agent.get('kind')!r}")
    too_big = config_size_refusal(agent, "agent")
    if too_big:
        raise AgentConfigError(too_big)
    try:
        checked = model.model_validate(agent)
    except ValidationError as error:
        raise AgentConfigError(refusal(error, "agent", model)) from None
    if isinstance(checked, OpenAIChatAgent):
        _check_api_key_env(checked)
    clash = both_env_and_vars(normalised_agent(checked), "agent")
    if clash:
        raise AgentConfigError(clash)
    return checked


def normalised_agent(checked: AgentModel) -> dict[str, Any]:
    """A checked agent config's JSON as it is stored and hashed (keys it does not use dropped)."""
    normalised: dict[str, Any] = checked.model_dump(mode="json", exclude_none=True)
    return normalised


def validate_agent(agent: Any) -> dict[str, Any]:
    """Return the normalised agent config or raise AgentConfigError naming the bad field."""
    return normalised_agent(agent_model(agent))
