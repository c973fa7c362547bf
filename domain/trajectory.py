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

`source` is "agent" (its message, reasoning and tool calls), "environment"
(the environment or harness acting on its own: an MCP server's `initialize`
and `tools/list`), "user" (the task given mid-trajectory) or "system" (a
system prompt). Exports (ATIF, TRL) read these fields, never the command text.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from domain.json_depth import loads, rebuild
from domain.outcome import OBSERVATION_CAP_CHARS, truncate

StepSource = Literal["agent", "environment", "user", "system"]
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


def content_text(content: Content | None) -> str:
    """The text of a result's content: text parts joined, other parts named (`[image image/png]`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        else:
            source = part.get("source")  # ATIF parts name their media type inside `source`
            nested = source.get("media_type") if isinstance(source, dict) else None
            kind = part.get("mimeType") or part.get("media_type") or nested or ""
            parts.append(f"[{part.get('type', 'content')}{' ' + kind if kind else ''}]")
    return "\n".join(parts)


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
) -> dict[str, Any]:
    """One step: the seed's four fields plus what is known of the structured record (unknown fields left out).

    `calls` are `{"id", "name", "arguments"}`, `results` `{"callId"?, "content"}` (content capped here).
    """
    capped = [{**r, "content": cap_content(r.get("content") or "")} for r in results or []]
    record: dict[str, Any] = {
        "step": number,
        "tool": tool,
        "command": command,
        "observation": truncate(
            "\n".join(content_text(r.get("content")) for r in results or []), OBSERVATION_CAP_CHARS, "observation"
        ),
        "source": source,
    }
    optional = {
        "toolCalls": calls or None,
        "results": capped or None,
        "message": message or None,
        "reasoning": reasoning or None,
        "startedAt": started_at,
        "durationMs": duration_ms,
        "tokens": tokens or None,
        "latencyMs": latency_ms,
        "extra": extra or None,
    }
    return record | {key: value for key, value in optional.items() if value is not None}


def tool_step(
    number: int,
    name: str,
    args: dict[str, Any],
    content: Content,
    *,
    call_id: str | None = None,
    **more: Any,
) -> dict[str, Any]:
    """An agent's tool call and its result: filed under the real tool name, arguments kept as JSON."""
    call_id = call_id or f"call_{number}"
    return step(
        number,
        source="agent",
        tool=name,
        command=command_text(name, args),
        calls=[{"id": call_id, "name": name, "arguments": args}],
        results=[{"callId": call_id, "content": content}],
        **more,
    )


def message_step(number: int, message: Content | None, **more: Any) -> dict[str, Any]:
    """The agent speaking without calling a tool (e.g. its closing words); `tool` is null, `command` empty."""
    return step(number, source="agent", message=message, **more)


def environment_step(number: int, command: str, content: Content, *, tool: str = "mcp", **more: Any) -> dict[str, Any]:
    """The environment acting on its own (an MCP handshake: tool "mcp", command "initialize" or "tools/list")."""
    return step(number, source="environment", tool=tool, command=command, results=[{"content": content}], **more)


def structured(record: dict[str, Any]) -> dict[str, Any]:
    """A step in the structured form; a seed-shaped step (`step, tool, command, observation` only) is read once.

    A seed-shaped step's command is `<tool> <JSON arguments>`; steps filed under "mcp" name the real tool first
    (`git_add {…}`), and `initialize` / `tools/list` were the environment's handshake. This is the one place a
    command string is parsed: at the boundary where such steps come in (ingest, steps stored before this form).
    """
    if "source" in record:
        return record
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
    return {**tool_step(record["step"], tool, arguments, observation), "command": command, "observation": capped}


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
