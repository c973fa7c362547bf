"""A trajectory step records what happened: who acted, the real tool and its JSON arguments, what came back.

The seed's fields stay as they were (`step`, `tool`, `command`, `observation`:
the tool a step is filed under, the call as text, the observation capped at
16,384 characters); the structured record goes beside them:

    {"step": 3, "tool": "git_add", "command": "git_add {\"files\": [\"a\"]}", "observation": "Added a",
     "source": "agent", "toolCalls": [{"id": "call_3", "name": "git_add", "arguments": {"files": ["a"]}}],
     "results": [{"callId": "call_3", "content": "Added a"}], "message": "…", "reasoning": "…",
     "startedAt": "2026-11-30T12:00:00+00:00", "durationMs": 12.5, "tokens": {"prompt": 812, "completion": 40},
     "latencyMs": 840.2}

`durationMs` is how long the tool took, `latencyMs` how long the model took to answer the turn (when an agent
says so: the openai-chat agent does), `tokens` what that turn used.

A result that is an error says so: `"isError": true` (MCP's word; the worker writes it for a call the environment
refused, arguments that are no JSON object, and an MCP tool's `isError` result), or `"exitCode"`, a command's exit
status, other than 0. That is the one rule (`ToolResult.is_error`, `Step.is_error`); a result's text is never read
to guess it, so a step stored before the flag was written (its content starting "error: ") is not marked.

`source` is "agent" (its message, reasoning and tool calls), "environment"
(the environment or harness acting on its own: an MCP server's `initialize`
and `tools/list`), "user" (the task given mid-trajectory) or "system" (a
system prompt). Exports (ATIF, TRL) read these fields, never the command text.

Who a step is from is the worker's word, never the agent's: the worker writes `source` itself (a command agent's
answer naming a source other than "agent" is refused), and nothing an agent sends becomes a step of anyone else's.
What an agent reports its harness did on its own (its `events`: a retried model request) is stored as an environment
step filed under HARNESS_TOOL, and the trial page and the ATIF export's `agentforgeSource` show it as the agent
harness's (`is_harness_step`), never as the environment's. The verifier and the worker write no steps: the
verifier's words are the trial's explanations, the worker's its log lines. An imported trial's steps keep the source
its file gave (ATIF's "system", "user", "agent"); they are the other harness's record, and the trial page says so.

In Python a step is a `Step` (its calls `ToolCall`, its results `ToolResult`): the builders below return one, the
worker and the importers record them, and every reader gets them from `Step.from_stored` (or `structured`, which
also reads a seed-shaped step once). `to_stored()` gives the JSON back, key for key and in the order written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from domain.json_depth import loads, rebuild
from domain.outcome import OBSERVATION_CAP_CHARS, truncate

StepSource = Literal["agent", "environment", "user", "system"]
HARNESS_TOOL = "model"  # what the steps an agent's harness took on its own (retried model requests) are filed under
Content = str | list[dict[str, Any]]  # text, or MCP/ATIF content parts ({"type": "text", "text": …}, images, …)


NOT_A_NUMBER = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # as Python's json.dumps would print them


def storable(value: Any) -> Any:
    """`value` with every NUL character in its strings (and keys) replaced by U+FFFD, and every NaN or infinite
    number as the text "NaN", "Infinity" or "-Infinity".

    PostgreSQL text and jsonb cannot hold NUL, and JSON has no NaN or infinity (Python's json module reads and
    writes them; jsonb refuses them); an agent or a tool may print either. The rest is kept as it was; the
    walk keeps a stack of its own (domain.json_depth.rebuild), so no nesting makes it recurse.
    """
    return rebuild(value, _storable_scalar, _storable_scalar)


def _storable_scalar(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, float) and not math.isfinite(value):
        return NOT_A_NUMBER[str(value)]
    return value


def command_text(tool: str, args: dict[str, Any]) -> str:
    """Render a tool call the way the trajectory viewer shows it: `restock {"sku": "SKU-1", "quantity": 3}`."""
    return f"{tool} {json.dumps(args, ensure_ascii=False)}" if args else tool


def _resource_text(part: dict[str, Any]) -> str | None:
    """An MCP embedded resource with its URI and its text (a binary one named by its type), or a resource link by
    its name and URI; None for any other part."""
    kind = part.get("type")
    if kind == "resource" and isinstance(part.get("resource"), dict):
        resource = part["resource"]
        head = " ".join(str(x) for x in ("[resource", resource.get("uri"), resource.get("mimeType")) if x) + "]"
        return f"{head}\n{resource['text']}" if isinstance(resource.get("text"), str) else head
    if kind == "resource_link":
        named = (part.get("name"), part.get("uri"), part.get("mimeType"))
        return " ".join(str(x) for x in ("[resource_link", *named) if x) + "]"
    return None


def content_text(content: Content | None) -> str:
    """The text of a result's content: text parts joined, an embedded resource's text under its URI, a resource
    link by name and URI, other parts named (`[image image/png]`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        elif (resource := _resource_text(part)) is not None:
            parts.append(resource)
        else:
            source = part.get("source")  # ATIF parts name their media type inside `source`
            nested = source.get("media_type") if isinstance(source, dict) else None
            kind = part.get("mimeType") or part.get("media_type") or nested or ""
            parts.append(f"[{part.get('type', 'content')}{' ' + kind if kind else ''}]")
    return "\n".join(parts)


RASTER_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # ATIF's image types; never SVG
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def raster_image(part: Any) -> tuple[str, str] | None:
    """(media type, base64 data) of a content part that is a raster image carried whole, or None.

    MCP's `{"type": "image", "mimeType", "data"}` and ATIF's `{"type": "image", "source": {"media_type", "path"}}`
    whose path is a `data:<type>;base64,` URL; never SVG (it can carry script), a file path, or data left out
    when it was recorded (over the cap).
    """
    if not isinstance(part, dict) or part.get("type") != "image":
        return None
    mime, data = part.get("mimeType"), part.get("data")
    source = part.get("source")
    if isinstance(source, dict) and isinstance(source.get("path"), str):
        mime = source.get("media_type")
        header, _, data = source["path"].partition(",")
        if header != f"data:{mime};base64":
            return None
    if mime in RASTER_IMAGES and isinstance(data, str) and _BASE64.fullmatch(data):
        return mime, data
    return None


def cap_content(content: Content, budget: int = OBSERVATION_CAP_CHARS) -> Content:
    """`content` with its text held to the observation cap (text parts cut in order, marker kept visible)."""
    if isinstance(content, str):
        return truncate(content, budget, "observation")
    kept: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "text":
            text = str(part.get("text", ""))
            kept.append({**part, "text": truncate(text, max(budget, 0), "observation")})
            budget -= len(text)
        else:
            kept.append(part)
    return kept


# The stored form's keys, in the order a step is written: the seed's four (always written), then the structured
# record's (written when known).
SEED_KEYS = ("step", "tool", "command", "observation")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_content(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(part, dict) for part in value))


def _are_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _split(stored: dict[str, Any], fields: tuple[tuple[str, str, Callable[[Any], bool]], ...]) -> dict[str, Any]:
    """The constructor arguments of a record from its stored form: each known key whose value has its type goes
    to its field; every other key (unknown ones, known ones holding null or another type) to `other`, as stored."""
    known = {key: (name, fits) for key, name, fits in fields}
    typed: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for key, value in stored.items():
        name, fits = known.get(key, ("", None))
        if fits is not None and fits(value):
            typed[name] = value
        else:
            other[key] = value
    return {**typed, "other": other}


def _join(
    record: Any, fields: tuple[tuple[str, str, Callable[[Any], bool]], ...], always: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The stored form of a record: its known keys in their order (a field's value, else what `other` keeps under
    the key; a key in `always` is written even when its field is None), then the rest of `other` in its order."""
    stored: dict[str, Any] = {}
    for key, name, _ in fields:
        if key in record.other:
            stored[key] = record.other[key]
        elif (value := getattr(record, name)) is not None or key in always:
            stored[key] = value
    return stored | {key: value for key, value in record.other.items() if key not in stored}


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A call of a tool: its id, the real tool name, the JSON arguments; `other` keeps any other key as stored."""

    id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    FIELDS: ClassVar = (("id", "id", _is_str), ("name", "name", _is_str), ("arguments", "arguments", _is_object))

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> ToolCall:
        return cls(**_split(stored, cls.FIELDS))

    def to_stored(self) -> dict[str, Any]:
        return _join(self, self.FIELDS)


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What came back: the content (text or parts) and the id of the call it answers (None: linked to none)."""

    call_id: str | None = None
    content: Content | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    FIELDS: ClassVar = (("callId", "call_id", _is_str), ("content", "content", _is_content))

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> ToolResult:
        return cls(**_split(stored, cls.FIELDS))

    def to_stored(self) -> dict[str, Any]:
        return _join(self, self.FIELDS)

    @property
    def text(self) -> str:
        """The content as text (see content_text)."""
        return content_text(self.content)

    @property
    def is_error(self) -> bool:
        """Whether this result is an error: stored `isError` true, or a nonzero integer `exitCode` (the module's
        text has the rule); kept in `other` as stored."""
        code = self.other.get("exitCode")
        return self.other.get("isError") is True or (_is_int(code) and code != 0)


def _calls(stored: list[dict[str, Any]]) -> tuple[ToolCall, ...]:
    return tuple(ToolCall.from_stored(call) for call in stored)


def _results(stored: list[dict[str, Any]]) -> tuple[ToolResult, ...]:
    return tuple(ToolResult.from_stored(result) for result in stored)


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of a trajectory, typed: the seed's four fields and the structured record (see the module's text).

    `Step.from_stored(d).to_stored() == d` for every dict `d` with string keys: a field holds a stored value only
    when it has the field's type; null, another type, and every key this class does not know are kept in `other`
    as stored (imported data keeps what it said), and `missing` names the seed's fields the dict did not have.
    to_stored writes the keys in the order the builders below always wrote them, the rest of `other` after them.
    """

    number: int = 0
    tool: str | None = None
    command: str = ""
    observation: str = ""
    source: str | None = None  # a StepSource; None: a seed-shaped step (read it through `structured`)
    tool_calls: tuple[ToolCall, ...] | None = None
    results: tuple[ToolResult, ...] | None = None
    message: Content | None = None
    reasoning: str | None = None
    started_at: str | None = None
    duration_ms: float | None = None
    tokens: dict[str, Any] | None = None
    latency_ms: float | None = None
    extra: dict[str, Any] | None = None  # what a writer keeps beside the record (serverInfo, the tools listed, model)
    other: Mapping[str, Any] = field(default_factory=dict)
    missing: frozenset[str] = frozenset()

    FIELDS: ClassVar = (
        ("step", "number", _is_int),
        ("tool", "tool", _is_str),
        ("command", "command", _is_str),
        ("observation", "observation", _is_str),
        ("source", "source", _is_str),
        ("toolCalls", "tool_calls", _are_objects),
        ("results", "results", _are_objects),
        ("message", "message", _is_content),
        ("reasoning", "reasoning", _is_str),
        ("startedAt", "started_at", _is_str),
        ("durationMs", "duration_ms", _is_number),
        ("tokens", "tokens", _is_object),
        ("latencyMs", "latency_ms", _is_number),
        ("extra", "extra", _is_object),
    )

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> Step:
        """A step as stored (a row's `steps` element, an artifact's, an import's) typed; see the class's text."""
        fields = _split(stored, cls.FIELDS)
        if "tool_calls" in fields:
            fields["tool_calls"] = _calls(fields["tool_calls"])
        if "results" in fields:
            fields["results"] = _results(fields["results"])
        return cls(**fields, missing=frozenset(key for key in SEED_KEYS if key not in stored))

    @property
    def is_error(self) -> bool:
        """Whether any of the step's results is an error (ToolResult.is_error)."""
        return any(result.is_error for result in self.results or ())

    @property
    def is_harness_step(self) -> bool:
        """Whether the step is what an agent reported its harness did on its own (an environment step filed under
        HARNESS_TOOL): the agent's words, never the environment's."""
        return self.source == "environment" and self.tool == HARNESS_TOOL

    def to_stored(self) -> dict[str, Any]:
        """The step as it is stored: JSON-ready, the same dict from_stored read."""
        typed = replace(
            self,
            tool_calls=None,
            results=None,
            other={
                **({"toolCalls": [c.to_stored() for c in self.tool_calls]} if self.tool_calls is not None else {}),
                **({"results": [r.to_stored() for r in self.results]} if self.results is not None else {}),
                **self.other,
            },
        )
        stored = _join(typed, self.FIELDS, always=SEED_KEYS)
        return {key: value for key, value in stored.items() if key not in self.missing}


def step(
    number: int,
    *,
    source: StepSource,
    tool: str | None = None,
    command: str = "",
    calls: list[dict[str, Any]] | None = None,
    results: list[dict[str, Any]] | None = None,
    message: Content | None = None,
    reasoning: str | None = None,
    started_at: str | None = None,
    duration_ms: float | None = None,
    tokens: dict[str, int] | None = None,
    latency_ms: float | None = None,
    extra: dict[str, Any] | None = None,
) -> Step:
    """One step: the seed's four fields plus what is known of the structured record (unknown fields left out).

    `calls` are `{"id", "name", "arguments"}`, `results` `{"callId"?, "content", "isError"?}` (content capped here).
    """
    capped = [{**r, "content": cap_content(r.get("content") or "")} for r in results or []]
    return Step(
        number=number,
        tool=tool,
        command=command,
        observation=truncate(
            "\n".join(content_text(r.get("content")) for r in results or []), OBSERVATION_CAP_CHARS, "observation"
        ),
        source=source,
        tool_calls=_calls(calls) if calls else None,
        results=_results(capped) if capped else None,
        message=message or None,
        reasoning=reasoning or None,
        started_at=started_at,
        duration_ms=duration_ms,
        tokens=tokens or None,
        latency_ms=latency_ms,
        extra=extra or None,
    )


def tool_step(
    number: int,
    name: str,
    args: dict[str, Any],
    content: Content,
    *,
    call_id: str | None = None,
    is_error: bool = False,
    arguments_text: str | None = None,
    result_extra: dict[str, Any] | None = None,
    **more: Any,
) -> Step:
    """An agent's tool call and its result: filed under the real tool name, arguments kept as JSON; `is_error`:
    the result is an error (stored as `"isError": true`); `arguments_text`: what the model sent when it was no JSON
    object (kept beside `"arguments": {}` as `"argumentsText"`, and shown as the command); `result_extra`: what the
    result holds beside its content, kept on it (an MCP tool's `structuredContent`)."""
    call_id = call_id or f"call_{number}"
    call: dict[str, Any] = {"id": call_id, "name": name, "arguments": args}
    if arguments_text is not None:
        call["argumentsText"] = arguments_text
    return step(
        number,
        source="agent",
        tool=name,
        command=f"{name} {arguments_text}" if arguments_text is not None else command_text(name, args),
        calls=[call],
        results=[
            {"callId": call_id, "content": content, **(result_extra or {}), **({"isError": True} if is_error else {})}
        ],
        **more,
    )


def message_step(number: int, message: Content | None, **more: Any) -> Step:
    """The agent speaking without calling a tool (e.g. its closing words); `tool` is null, `command` empty."""
    return step(number, source="agent", message=message, **more)


def environment_step(number: int, command: str, content: Content, *, tool: str = "mcp", **more: Any) -> Step:
    """The environment acting on its own (an MCP handshake: tool "mcp", command "initialize" or "tools/list")."""
    return step(number, source="environment", tool=tool, command=command, results=[{"content": content}], **more)


def structured(record: dict[str, Any]) -> Step:
    """A step in the structured form; a seed-shaped step (`step, tool, command, observation` only) is read once.

    A seed-shaped step's command is `<tool> <JSON arguments>`; steps filed under "mcp" name the real tool first
    (`git_add {…}`), and `initialize` / `tools/list` were the environment's handshake. This is the one place a
    command string is parsed: at the boundary where such steps come in (ingest, steps stored before this form).
    """
    if "source" in record:
        return Step.from_stored(record)
    tool, command = record.get("tool") or "", record.get("command") or ""
    observation = record.get("observation", "")
    if tool == "mcp" and command in ("initialize", "tools/list"):
        return environment_step(record["step"], command, observation)
    if tool == "mcp" and command:
        tool = command.split(" ", 1)[0]
    rest = command[len(tool) :].strip() if command.startswith(tool) else ""
    try:
        arguments = loads(rest) if rest else {}
    except ValueError:  # not JSON, or nested too deep (TooDeep)
        arguments = {"command": command}
    if not isinstance(arguments, dict):
        arguments = {"input": arguments}
    capped = truncate(observation, OBSERVATION_CAP_CHARS, "observation")
    return replace(tool_step(record["step"], tool, arguments, observation), command=command, observation=capped)


SEARCH_TEXT_CHARS = 200_000  # as migration 0018's trial_search_vector: no trial exceeds tsvector's 1 MB limit
_STEP_TEXT_FIELDS = ("tool", "command", "observation", "reasoning")


def _step_text(step: dict[str, Any]) -> str | None:
    """What SQL's trial_step_text(step) (migration 0018) gives for `step`; None when only SQL can say it the same
    way (a field that is a number, an object or a list: PostgreSQL writes those as jsonb text)."""
    fields = [step.get(name) for name in _STEP_TEXT_FIELDS]
    if any(value is not None and not isinstance(value, str) for value in fields):
        return None
    tool, command, observation, reasoning = fields
    message = step.get("message")
    if isinstance(message, list):
        texts = [part.get("text") if isinstance(part, dict) else None for part in message]
        if any(value is not None and not isinstance(value, str) for value in texts):
            return None
        kept = [value for value in texts if value is not None]
        message = "\n".join(kept) if kept else None
    elif not isinstance(message, str):
        message = None  # null, a number or an object: trial_step_text reads only a string or an array of parts
    if tool is not None and (command or "").startswith(tool):
        tool = None
    parts = (tool, command or None, observation or None, message, reasoning)
    return "\n".join(part for part in parts if part is not None)


def search_text(task: str | None, log: str | None, steps: Any) -> str | None:
    """The text SQL's trial_search_vector(task, log, steps) (migration 0018) indexes, built here so recording a
    trial does not walk its steps in SQL; None when a step holds something only SQL renders the same way (then
    the statement calls trial_search_vector itself). `task`, `log` and `steps` as stored (see storable)."""
    pieces: list[str] = []
    if isinstance(steps, list):
        for step in steps:
            if not isinstance(step, dict):
                return None
            text = _step_text(step)
            if text is None:
                return None
            pieces.append(text)
    parts = [value for value in (task, log, "\n".join(pieces) if pieces else None) if value is not None]
    return "\n".join(parts)[:SEARCH_TEXT_CHARS]
