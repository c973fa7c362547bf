"""Training formats built from exported rollouts: ATIF trajectory documents and TRL conversations.

Both read the structured steps (domain.trajectory.structured: source, toolCalls, results, message, reasoning),
never the command text. TRL rows use the OpenAI function-calling message shape that Hugging Face chat templates
render: assistant messages with `tool_calls` (arguments as a JSON object, which the templates serialise
themselves), `tool` messages answering them by `tool_call_id`, and a `tools` column of JSON schemas: the tools the
rollout defines, or, when it defines none, the functions it called, inferred from the calls and described as such.
"""

from __future__ import annotations

from typing import Any

from domain.json_depth import loads_stored
from domain.trajectory import Step, content_text, raster_image, structured

ATIF_VERSION = "ATIF-v1.7"
NO_TASK = "(task not recorded)"
# The last turn of a TRL completion when the trajectory does not end on words of the agent's own: trainers and
# chat templates expect an assistant turn last, and the trajectory does not record what the agent said on
# finishing. A fixed text, the same on every row, so it teaches nothing that differs between chosen and rejected.
CLOSING_TURN = "Done."
ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}
# The description of a tool the trajectory did not define, listed because its agent called it: chat templates
# render descriptions, so the model trained on the row reads it too, and a reader of the rows can pick such tools.
INFERRED_TOOL = (
    "Inferred from this trajectory's calls (it recorded no tool definitions): the arguments seen, typed where their "
    "values agree."
)


def rollout_extra(row: Any) -> dict[str, Any]:
    """The AgentForge facts an ATIF export adds under `extra`."""
    return {
        "privacyClass": "PRIVATE",
        "rolloutId": str(row.id),
        "evaluationRunId": str(row.evaluation_run_id),
        "environmentVersionId": str(row.environment_version_id),
        "trialNumber": row.trial_number,
        "seed": row.seed,
        "reward": row.reward,
        "failureCategory": row.failure_category,
        "verifierCategory": row.verifier_category,
        "humanCategory": row.human_category,
        "reviewState": row.review_state,
        "labels": row.labels,
        "notes": row.notes,
        "exclusion": row.exclusion,  # {"reason", "reviewer"} when a reviewer excluded the trial, else None
        "stages": row.stages,
    }


def steps_of(row: Any) -> list[Step]:
    """The rollout's steps in the structured form (seed-shaped steps stored before it are read once)."""
    return [structured(step) for step in row.steps or []]


def _results_for(step: Step) -> list[tuple[str | None, Any]]:
    """Each tool call's id with the content of its result (by callId, else in order), or None when none came."""
    calls, results = step.tool_calls or (), step.results or ()
    by_id: dict[str | None, Any] = {r.call_id: r.content for r in results if r.call_id}
    unlinked = [r.content for r in results if not r.call_id]
    return [(call.id, by_id.get(call.id, unlinked.pop(0) if unlinked else None)) for call in calls]


def _metrics(step: Step) -> dict[str, Any]:
    """An agent step's ATIF `metrics`: the tokens of its turn and, under `extra`, how long its model took."""
    tokens = step.tokens or {}
    metrics: dict[str, Any] = {
        name: tokens[key]
        for name, key in (("prompt_tokens", "prompt"), ("completion_tokens", "completion"))
        if key in tokens
    }
    if step.latency_ms is not None:
        metrics["extra"] = {"latency_ms": step.latency_ms}
    return metrics


def _final_metrics(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The ATIF `final_metrics` of exported steps: their number, and the sums of what their metrics know."""
    final: dict[str, Any] = {"total_steps": len(steps)}
    measured = [step["metrics"] for step in steps if step.get("metrics")]
    for total, key in (("total_prompt_tokens", "prompt_tokens"), ("total_completion_tokens", "completion_tokens")):
        if any(key in metrics for metrics in measured):
            final[total] = sum(metrics.get(key, 0) for metrics in measured)
    latencies = [metrics["extra"]["latency_ms"] for metrics in measured if "extra" in metrics]
    if latencies:
        final["extra"] = {"model_latency_ms": round(sum(latencies), 3)}
    return final


def _atif_content(result: Any) -> str | list[dict[str, Any]]:
    """An ATIF observation result's `content`: its text, or, when the tool returned a raster image carried whole,
    ATIF's multimodal parts in order (each image as a `data:` URL, the other parts as their text)."""
    parts = result.content if isinstance(result.content, list) else []
    if not any(raster_image(part) for part in parts):
        return result.text
    atif: list[dict[str, Any]] = []
    for part in parts:
        if image := raster_image(part):
            mime, data = image
            atif.append({"type": "image", "source": {"media_type": mime, "path": f"data:{mime};base64,{data}"}})
        else:
            atif.append({"type": "text", "text": content_text([part])})
    return atif


def _result_extra(result: Any) -> dict[str, Any]:
    """What an ATIF observation result keeps under `extra` beside its content: the MCP content parts ATIF has no
    part for (a resource, a link, an image it could not carry), an MCP tool's `structuredContent`, and `isError`."""
    extra: dict[str, Any] = {}
    parts = result.content if isinstance(result.content, list) else []
    if other := [part for part in parts if part.get("type") != "text" and not raster_image(part)]:
        extra["content"] = other
    if "structuredContent" in result.other:
        extra["structuredContent"] = result.other["structuredContent"]
    if result.is_error:
        extra["isError"] = True
    return {"extra": extra} if extra else {}


def _atif_step(number: int, record: Step) -> dict[str, Any]:
    """One structured step as an ATIF step.

    Agent steps keep their message, reasoning, tool calls (real names and JSON arguments) and results linked by
    `source_call_id`. Environment steps (an MCP handshake) become `system` steps: the request as the message, the
    reply as the observation, no tool calls; `extra.agentforgeSource` says "environment", or "agent harness" for
    what an agent reported its harness did (Step.is_harness_step). User and system steps keep their source and text.
    """
    source = record.source or "agent"
    results = [
        {"content": _atif_content(r), **({"source_call_id": r.call_id} if r.call_id else {}), **_result_extra(r)}
        for r in record.results or ()
    ]
    step: dict[str, Any] = {"step_id": number, "source": source if source in ("user", "system") else "agent"}
    if source == "environment":
        step["source"] = "system"
        step["message"] = content_text(record.message) or " ".join(
            part for part in (record.tool, record.command) if part
        )
        party = "agent harness" if record.is_harness_step else "environment"  # an agent's events are its words
        step["extra"] = {"agentforgeSource": party, "tool": record.tool, "command": record.command}
    elif source in ("user", "system"):
        step["message"] = content_text(record.message) or "\n".join(r.text for r in record.results or ())
        results = []
    else:
        step["message"] = content_text(record.message)
        if record.reasoning:
            step["reasoning_content"] = record.reasoning
        if record.tool_calls:
            step["tool_calls"] = [
                {
                    "tool_call_id": c.id or f"call_{number}_{index}",
                    "function_name": c.name,
                    "arguments": c.arguments or {},
                    # text the model sent that was no JSON object: ATIF's arguments are an object, so it goes here
                    **({"extra": {"argumentsText": c.other["argumentsText"]}} if _raw_arguments(c) else {}),
                }
                for index, c in enumerate(record.tool_calls)
            ]
        if metrics := _metrics(record):
            step["metrics"] = metrics
    if results:
        step["observation"] = {"results": results}
    if record.started_at:
        step["timestamp"] = record.started_at
    return step


def atif_document(row: Any) -> dict[str, Any]:
    """One rollout as an ATIF trajectory: the task as the user step, then each structured step.

    A trial imported with an ATIF trajectory exports that document unchanged (steps, tool calls and
    observations as they came in), with AgentForge's ids added under `extra`.
    """
    if getattr(row, "atif_body", None):
        original = loads_stored(bytes(row.atif_body))
        original["extra"] = {**(original.get("extra") or {}), **rollout_extra(row)}
        return original
    steps: list[dict[str, Any]] = [{"step_id": 1, "source": "user", "message": row.task or NO_TASK}]
    for record in steps_of(row):
        steps.append(_atif_step(len(steps) + 1, record))
    return {
        "schema_version": ATIF_VERSION,
        "session_id": f"rollout-{row.id}",
        "agent": {"name": row.evaluator_name, "version": f"agentforge-{row.agent_kind}"},
        "steps": steps,
        "final_metrics": _final_metrics(steps),
        "extra": rollout_extra(row),
    }


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool's JSON schema: its inputSchema, else `parameters` when it is a schema or a flat name → type map."""
    schema = tool.get("inputSchema")
    if isinstance(schema, dict) and schema:
        return schema
    parameters = tool.get("parameters")
    if isinstance(parameters, dict) and parameters:
        if "properties" in parameters or parameters.get("type") == "object":
            return parameters
        if all(isinstance(kind, str) for kind in parameters.values()):
            return {
                "type": "object",
                "properties": {name: {"type": kind} for name, kind in parameters.items()},
                "required": list(parameters),
            }
    return dict(ANY_ARGUMENTS)


def _function(name: str, description: str | None, parameters: Any) -> dict[str, Any]:
    schema = parameters if isinstance(parameters, dict) else dict(ANY_ARGUMENTS)
    return {"type": "function", "function": {"name": name, "description": description or "", "parameters": schema}}


def _defined_tools(row: Any) -> list[dict[str, Any]] | None:
    """The tools an imported ATIF trajectory defines (`agent.tool_definitions`, OpenAI's function form or the bare
    function), None when it defines none."""
    if not getattr(row, "atif_body", None):
        return None
    definitions = (loads_stored(bytes(row.atif_body)).get("agent") or {}).get("tool_definitions")
    if not isinstance(definitions, list) or not definitions:
        return None
    tools = []
    for definition in definitions:
        function = definition.get("function", definition) if isinstance(definition, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]:
            tools.append(_function(function["name"], function.get("description"), function.get("parameters")))
    return tools or None


def _declared_tools(row: Any) -> list[dict[str, Any]]:
    """The tools the rollout records as defined: an imported ATIF trajectory's `agent.tool_definitions`, else every
    tool the agent was offered, else none. (gpt-oss's template needs the description key.)"""
    defined = _defined_tools(row)
    if defined is not None:
        return defined
    offered = getattr(row, "tools", None) or []
    return [_function(t["name"], t.get("description"), _parameters(t)) for t in offered if t.get("name")]


def _json_type(value: Any) -> str:
    """The JSON schema type of a JSON value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _seen_type(kinds: set[str]) -> dict[str, str]:
    """An argument's schema from the types of the values it was seen with: the one type they share (integers and
    fractions together are numbers), else none (its values disagree)."""
    if kinds == {"integer", "number"}:
        return {"type": "number"}
    return {"type": next(iter(kinds))} if len(kinds) == 1 else {}


def inferred_tools(steps: list[Step]) -> list[dict[str, Any]]:
    """Each function the agent called, in the order first called, as a tool inferred from its calls: the argument
    names seen across them, each typed where its values agree; the description says it was inferred."""
    seen: dict[str, dict[str, set[str]]] = {}
    calls = [call for record in steps if record.source == "agent" for call in record.tool_calls or ()]
    for call in calls:
        if call.name:
            arguments = seen.setdefault(call.name, {})
            for name, value in (call.arguments or {}).items():
                arguments.setdefault(name, set()).add(_json_type(value))
    return [
        _function(
            name,
            INFERRED_TOOL,
            {"type": "object", "properties": {argument: _seen_type(kinds) for argument, kinds in arguments.items()}},
        )
        for name, arguments in seen.items()
    ]


def trl_tools(row: Any, steps: list[Step] | None = None) -> list[dict[str, Any]]:
    """The `tools` column: the tools the rollout defines (_declared_tools), kept as they are; when it defines none,
    the functions its agent called, inferred from the calls (inferred_tools): a row of a trajectory that defines no
    tools still lists the functions its `tool_calls` call, which chat templates render as its tools."""
    return _declared_tools(row) or inferred_tools(steps_of(row) if steps is None else steps)


def _assistant(content: str, calls: list[dict[str, Any]] | None = None, reasoning: str | None = None) -> dict:
    """An assistant turn. Its reasoning goes in `reasoning_content` only on a tool-call turn without visible text:
    gpt-oss's template refuses a tool-call turn with both (its analysis channel holds one or the other), so
    there the visible text is kept and the reasoning is left to the ATIF export."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    if reasoning and not (calls and content):
        message["reasoning_content"] = reasoning
    return message


def _raw_arguments(call: Any) -> bool:
    """Whether a stored call kept the model's argument text because it was no JSON object."""
    return isinstance(call.other.get("argumentsText"), str)


def _agent_messages(record: Step) -> list[dict[str, Any]]:
    """An agent step as chat messages: one assistant message per tool call (templates such as Llama 3.1 and
    gpt-oss take one call per message), each followed by the tool message answering it."""
    text, reasoning = content_text(record.message), record.reasoning
    calls = record.tool_calls or ()
    if not calls:
        return [_assistant(text, reasoning=reasoning)] if text or reasoning else []
    messages: list[dict[str, Any]] = []
    for index, (call, (call_id, content)) in enumerate(zip(calls, _results_for(record), strict=True)):
        call_id = call_id or f"call_{record.number}_{index}"
        # chat templates render arguments as an object (`| tojson`): a call whose text was no JSON object gives {}
        # here, never an invented key; its text is in the atif-shaped line and in ATIF's tool-call extra
        function = {"name": call.name, "arguments": call.arguments or {}}
        first = index == 0
        messages.append(
            _assistant(
                text if first else "",
                [{"id": call_id, "type": "function", "function": function}],
                reasoning if first else None,
            )
        )
        if content is not None:
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": call.name, "content": content_text(content)}
            )
    return messages


def trl_turns(row: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A rollout as (prompt, completion, tools) in TRL's conversational form (see _turns and trl_tools)."""
    prompt, completion, steps, _ = _turns(row)
    return prompt, completion, trl_tools(row, steps)


def _turns(row: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Step], bool]:
    """A rollout as (prompt, completion, its steps, whether the agent took a turn) in TRL's conversational form.

    The prompt is what comes before the agent's first action: the system steps (as one system message) and the
    user steps, or the task as the user message when the trajectory holds none (an ATIF document's own leading
    user step is its task: it is not added twice). Environment steps (an MCP server's initialize and tools/list)
    are not turns: what they offered is the `tools` column. Later user steps are user turns; agent steps are
    assistant turns with their tool calls, each answered by a `tool` message. The completion always ends on an
    assistant turn: the agent's own last words when the trajectory ends on them, else CLOSING_TURN.
    """
    steps = steps_of(row)
    system: list[str] = []
    users: list[dict[str, Any]] = []
    completion: list[dict[str, Any]] = []
    for record in steps:
        source = record.source
        text = content_text(record.message) or record.observation
        if source == "agent":
            completion += _agent_messages(record)
        elif source == "user" and text:
            (completion if completion else users).append({"role": "user", "content": text})
        elif source == "system" and text:
            if completion:
                completion.append({"role": "system", "content": text})
            else:
                system.append(text)
    acted = any(m["role"] == "assistant" for m in completion)
    if not completion or completion[-1]["role"] != "assistant" or completion[-1].get("tool_calls"):
        completion.append(_assistant(CLOSING_TURN))
    prompt = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    prompt += users or [{"role": "user", "content": row.task or NO_TASK}]
    return prompt, completion, steps, acted


def trl_conversation(row: Any) -> dict[str, Any]:
    """One rollout in TRL's conversational language-modeling format (SFT): `messages` and `tools`."""
    prompt, completion, tools = trl_turns(row)
    return {"messages": prompt + completion, "tools": tools}


def _pair_tools(sides: list[tuple[Any, list[Step]]]) -> list[dict[str, Any]]:
    """The `tools` of a preference pair: each side's defined tools (the chosen side's first), then the functions
    called on the sides that define none, inferred from their calls together, each name once."""
    declared = [(_declared_tools(row), steps) for row, steps in sides]
    undeclared = [record for tools, steps in declared if not tools for record in steps]
    tools: dict[str, dict[str, Any]] = {}
    for tool in [t for defined, _ in declared for t in defined] + inferred_tools(undeclared):
        tools.setdefault(tool["function"]["name"], tool)
    return list(tools.values())


def trl_preference(preferred: Any, rejected: Any) -> dict[str, Any] | None:
    """A preference pair in TRL's conversational format: the shared prompt, chosen and rejected completions, and
    the tools of both (_pair_tools); None when the two prompts differ, or when either side holds no turn of the
    agent (a trial without a trajectory teaches nothing to prefer), as then they are no valid pair."""
    prompt, chosen, chosen_steps, chosen_acted = _turns(preferred)
    rejected_prompt, rejected_turns, rejected_steps, rejected_acted = _turns(rejected)
    if prompt != rejected_prompt or not chosen_acted or not rejected_acted:
        return None
    tools = _pair_tools([(preferred, chosen_steps), (rejected, rejected_steps)])
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected_turns, "tools": tools}
