"""The openai-chat agent's program: a model behind an OpenAI-compatible server, speaking the command-agent protocol.

The worker starts it inside the trial's sandbox (`python -I openai_program.py '<settings JSON>'`, with the
config's `env` and network on), so the tenant's `baseUrl` is reached from there and never from the worker's
own process. It reads the task, offers the environment's tools (their full JSON schemas) to the model through
the official `openai` client, and answers each model turn: every tool call the model makes becomes one
`{"tool", "args", "callId"}` answer (the turn's message, reasoning, token usage and latency ride on the first),
and a turn without tool calls is the finish. Arguments go to the worker as the JSON text the model wrote: the
worker parses them, and arguments that are not a JSON object come back as the call's error, which the model
reads as the tool result.

Transport faults: a 429, a 5xx or a timed-out request is retried (at most MAX_ATTEMPTS requests, backoff doubling
from BACKOFF_S, a server's Retry-After honoured up to MAX_BACKOFF_S); each retry is reported with the next answer
as an `events` entry, which the trial records as a step of the environment side. Any other fault (an
unreachable server, a refused key, a malformed reply) ends the trial as `agent_error`, naming the server's host.
Past `tokenBudget` (prompt + completion tokens of every turn), the next turn is not asked for: the finish says
`"reason": "out_of_tokens"`.

Only the standard library and `openai` are imported: nothing of the worker runs in the sandbox.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import openai

MAX_ATTEMPTS = 4
BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
REQUEST_TIMEOUT_S = 120.0
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"  # as domain.agents says (this program imports nothing of the project)
NO_KEY = "no-key"  # servers that take no key (a local vLLM or Ollama) still get a bearer token from the client
OPEN_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class Stop(Exception):
    """The agent cannot go on: the message says why (the worker ends the trial as agent_error with it)."""

    events: list[dict[str, str]] = []  # the retries that came before


def host_of(base_url: str) -> str:
    """The server as a log line names it: host and port, never a user or password written into the URL."""
    parts = urlsplit(base_url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def tool_schemas(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The environment's tools as chat-completion `tools`: each one's full JSON schema (MCP ones as sent)."""
    offered = []
    for tool in tools:
        schema = tool.get("inputSchema")
        if not isinstance(schema, dict) or not schema:
            flat = tool.get("parameters") or {}
            schema = {"type": "object", "properties": {name: {"type": kind} for name, kind in flat.items()}}
            schema["required"] = list(flat)
        function = {"name": tool["name"], "description": tool.get("description") or "", "parameters": schema}
        offered.append({"type": "function", "function": function})
    return offered


def _said(error: openai.APIStatusError) -> str:
    """What the server said with an error status: its error message when it sent one, else the client's words."""
    body = error.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return f"HTTP {error.status_code}: {body['message']}"
    return f"HTTP {error.status_code}: {error.message}"


def _retry_after(error: openai.APIStatusError) -> float | None:
    """The wait a server asked for (Retry-After seconds), when it said one."""
    try:
        return float(error.response.headers.get("retry-after", ""))
    except ValueError:
        return None


class Model:
    """The chat-completions endpoint with the config's settings, retrying what is worth retrying."""

    def __init__(self, settings: dict[str, Any], environ: dict[str, str]) -> None:
        self.settings, self.host = settings, host_of(settings["baseUrl"])
        key = environ.get(settings.get("apiKeyEnv") or DEFAULT_API_KEY_ENV) or NO_KEY
        self.client = openai.OpenAI(base_url=settings["baseUrl"], api_key=key, max_retries=0, timeout=REQUEST_TIMEOUT_S)

    def ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[Any, list[dict], float]:
        """One completion, the retries it took (as events) and its latency in ms; Stop when it cannot be had."""
        events: list[dict[str, str]] = []
        options: dict[str, Any] = {"model": self.settings["model"], "messages": messages}
        if tools:
            options["tools"] = tools
        if self.settings.get("temperature") is not None:
            options["temperature"] = self.settings["temperature"]
        if self.settings.get("maxTokens") is not None:
            options["max_tokens"] = self.settings["maxTokens"]
        if self.settings.get("extraBody"):
            options["extra_body"] = self.settings["extraBody"]
        try:
            return self._attempts(options, events)
        except Stop as stop:
            stop.events = events
            raise

    def _attempts(self, options: dict[str, Any], events: list[dict[str, str]]) -> tuple[Any, list[dict], float]:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            started = time.monotonic()
            try:
                completion = self.client.chat.completions.create(**options)
                if not completion.choices:
                    raise Stop(f"the model server {self.host} answered without a choice")
                return completion, events, round((time.monotonic() - started) * 1000, 3)
            except openai.APITimeoutError:
                fault, wait = f"no answer within {REQUEST_TIMEOUT_S:g} s", None
            except openai.APIStatusError as error:
                if error.status_code != 429 and error.status_code < 500:
                    raise Stop(f"the model server {self.host} answered {_said(error)}") from None
                if error.status_code >= 500 and names_a_parse_error(_said(error)):  # the same request fails again
                    raise Stop(f"the model server {self.host} answered {_said(error)} (not retried)") from None
                fault, wait = _said(error), _retry_after(error)
            except openai.APIConnectionError as error:
                cause = f" ({error.__cause__})" if error.__cause__ else ""
                raise Stop(f"cannot reach the model server {self.host}: {error}{cause}") from None
            except openai.OpenAIError as error:
                raise Stop(f"the model server {self.host} answered something unreadable: {error}") from None
            if attempt == MAX_ATTEMPTS:
                raise Stop(f"the model server {self.host} failed {MAX_ATTEMPTS} requests in a row; last: {fault}")
            delay = min(MAX_BACKOFF_S, wait if wait is not None and wait >= 0 else BACKOFF_S * 2 ** (attempt - 1))
            note = f"{fault} from {self.host}; retry {attempt} of {MAX_ATTEMPTS - 1} in {delay:g} s"
            print(f"openai-chat: {note}", file=sys.stderr, flush=True)
            events.append({"command": f"chat.completions attempt {attempt}", "observation": note})
            time.sleep(delay)
        raise AssertionError("unreachable")


def sendable(call: Any) -> str:
    """A call's arguments as the history sends them back: the model's text when it is a JSON object, else "{}" (the
    error is the call's result): servers such as llama.cpp answer 500 to a history holding text they cannot parse."""
    text = call.function.arguments or "{}"
    try:
        return text if isinstance(json.loads(text), dict) else "{}"
    except ValueError:
        return "{}"


def names_a_parse_error(said: str) -> bool:
    """Whether a 5xx's message says the server could not parse the request (asking again cannot help)."""
    return re.search(r"pars(e|ing)|json", said, re.IGNORECASE) is not None


def reasoning_of(message: Any) -> str | None:
    """The reasoning a server returned beside the message (`reasoning_content`, or `reasoning`), when it did."""
    extra = message.model_extra or {}
    for key in ("reasoning_content", "reasoning"):
        if isinstance(extra.get(key), str) and extra[key]:
            return str(extra[key])
    return None


def usage_of(completion: Any) -> dict[str, int]:
    """The turn's token counts as the protocol's `usage` (empty when the server did not count)."""
    usage = completion.usage
    if usage is None:
        return {}
    return {"prompt": usage.prompt_tokens or 0, "completion": usage.completion_tokens or 0}


def answer(message: dict[str, Any]) -> dict[str, Any]:
    """Print one protocol answer and read the worker's next message."""
    print(json.dumps(message), flush=True)
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(0)  # the worker ended the trial (a step or time budget)
    return json.loads(line)


def run(settings: dict[str, Any], environ: dict[str, str]) -> None:
    """The agent loop: the task in, one answer per message, until the model finishes or a budget ends it."""
    task = json.loads(sys.stdin.readline())
    model, tools = Model(settings, environ), tool_schemas(task.get("tools") or [])
    messages: list[dict[str, Any]] = []
    if settings.get("systemPrompt"):
        messages.append({"role": "system", "content": settings["systemPrompt"]})
    messages.append({"role": "user", "content": task["task"]})
    budget, spent = settings.get("tokenBudget"), 0
    while True:
        if budget and spent >= budget:
            summary = f"token budget of {budget} used up ({spent} tokens)"
            answer({"finish": True, "reason": "out_of_tokens", "summary": summary})
            return
        try:
            completion, events, latency = model.ask(messages, tools)
        except Stop as stop:
            answer({"error": str(stop), "events": stop.events})
            return
        reply = completion.choices[0].message
        usage = usage_of(completion)
        spent += sum(usage.values())
        turn: dict[str, Any] = {"message": reply.content or "", "usage": usage, "latencyMs": latency}
        turn |= {"reasoning": reasoning_of(reply), "events": events}
        calls = [call for call in reply.tool_calls or [] if call.type == "function"]
        said: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
        if calls:
            said["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": sendable(c)}}
                for c in calls
            ]
        messages.append(said)
        if not calls:
            answer({"finish": True, **turn})
            return
        for index, call in enumerate(calls):
            action = {"tool": call.function.name, "args": call.function.arguments or "{}", "callId": call.id}
            observation = answer(action | (turn if index == 0 else {}))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": observation.get("observation", "")})


if __name__ == "__main__":
    run(json.loads(sys.argv[1]), dict(os.environ))
