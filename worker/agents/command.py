"""The command agent: any program that speaks JSON lines on stdin/stdout (protocol in docs/agents-and-environments.md).

The worker writes one JSON object per line: first
`{"type": "task", "task", "data", "tools", "maxSteps"}`, then after each action
`{"type": "observation", "observation"}`. The program answers every message
with one line: `{"tool": name, "args": {…}}` or `{"finish": true, "summary": …}` (or `{"error": …}` when it
cannot go on); the optional keys each answer may carry are read by `_turn`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import selectors
import subprocess
import threading
import time
from typing import Any

from domain import agents as configs
from domain.json_depth import TooDeep, loads
from domain.limits import describe
from domain.rules import program_environment
from worker.agents.base import (
    Action,
    Agent,
    AgentCrashed,
    AgentFailure,
    AgentLimitExceeded,
    AgentProtocolError,
    AgentTimedOut,
    Event,
    Finish,
    ToolCall,
)
from worker.agents.registry import agent_of
from worker.masking import Masker
from worker.sandbox import Launch, OutputBudget, TrialSandbox, kill_group

MAX_LINE_BYTES = 64 * 1024
STDERR_KEEP_BYTES = 8 * 1024
LINE_QUOTE_CHARS = 200  # how much of a line that is not JSON the log quotes
STOP_REASONS = ("out_of_tokens",)  # why a finish may end the loop abnormally


class BoundedBuffer:
    """Keeps the first `limit` bytes written to it and counts the rest; its text has the trial's secrets masked."""

    def __init__(self, limit: int, masker: Masker | None = None) -> None:
        self.limit, self.kept, self.dropped = limit, bytearray(), 0
        self.masker = masker or Masker(())

    def write(self, chunk: bytes) -> None:
        room = self.limit - len(self.kept)
        self.kept += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        """What was kept, masked (its end is a cut when bytes were dropped), then a marker for what was dropped."""
        tail = f"\n… [stderr truncated: {self.dropped} more bytes]" if self.dropped else ""
        return self.masker.text(self.kept.decode("utf-8", "replace")) + tail


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(message: dict[str, Any], key: str) -> str | None:
    """The optional text under `key`; a protocol error when it is there and not text."""
    value = message.get(key)
    if value is not None and not isinstance(value, str):
        raise AgentProtocolError(f"{key} must be text")
    return value


def _events(value: Any) -> tuple[Event, ...]:
    """`events`: what the agent's harness did on its own, `[{"command": …, "observation": …}]`."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(e, dict) and isinstance(e.get("command"), str) and isinstance(e.get("observation", ""), str)
        for e in value
    ):
        raise AgentProtocolError('events must be a list of {"command": text, "observation": text}')
    return tuple(Event(e["command"], e.get("observation", "")) for e in value)


def _turn(message: dict[str, Any]) -> dict[str, Any]:
    """The optional keys of an answer: `message` and `reasoning` (text), `usage` ({"prompt", "completion"} token
    counts), `latencyMs` (how long its model took) and `events` (what its harness did on its own first).

    Who a step is from is the worker's to say: an answer that names a `source` other than "agent" is refused."""
    if message.get("source", "agent") != "agent":
        raise AgentProtocolError('an answer is the agent\'s: "source" is set by the worker, never by the agent')
    turn: dict[str, Any] = {key: _text(message, key) for key in ("message", "reasoning")}
    usage = message.get("usage")
    if usage is not None:
        if not isinstance(usage, dict) or not all(isinstance(k, str) and _is_count(v) for k, v in usage.items()):
            raise AgentProtocolError("usage must map names to token counts")
        turn["tokens"] = usage
    latency = message.get("latencyMs")
    if latency is not None:
        if isinstance(latency, bool) or not isinstance(latency, int | float) or not 0 <= latency < float("inf"):
            raise AgentProtocolError("latencyMs must be a number of milliseconds")
        turn["latency_ms"] = float(latency)
    turn["events"] = _events(message.get("events"))
    return turn


def _arguments(tool: str, args: Any) -> tuple[dict[str, Any], str | None]:
    """A call's arguments, and why they cannot be used: an object as is; JSON text (as chat-completion servers send
    arguments) parsed, or `{}` with the parse error when it is no JSON object (the caller keeps the text)."""
    if isinstance(args, dict):
        return args, None
    if not args.strip():  # servers send "" for a call without arguments
        return {}, None
    try:
        parsed = loads(args)
    except TooDeep as deep:
        return {}, f"the arguments of {tool} are {deep}; send a JSON object {deep.limit} levels deep at most"
    except ValueError as bad:
        return {}, f"the arguments of {tool} are not valid JSON ({bad}); send a JSON object"
    if not isinstance(parsed, dict):
        return {}, f"the arguments of {tool} must be a JSON object, not {type(parsed).__name__}"
    return parsed, None


class CommandAgent(Agent):
    """Runs the config's `argv` in the trial's sandbox (its own workspace, limits, no network unless opted in).

    `masker` holds the trial's secrets: what the program printed is masked before any of it is cut.
    """

    def __init__(self, config: configs.CommandAgent, sandbox: TrialSandbox, masker: Masker | None = None) -> None:
        self.config, self.sandbox = config, sandbox
        self.masker = masker or Masker(())
        self.argv = config.argv
        self.proc: subprocess.Popen[bytes] | None = None
        self.launch: Launch | None = None
        self.budget = OutputBudget(0)
        self.stderr = BoundedBuffer(STDERR_KEEP_BYTES, self.masker)
        self.pending = bytearray()
        self.first = True

    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        self.launch = self.sandbox.launch(
            "agent",
            self.argv,
            env=program_environment({"vars": self.config.vars, "env": self.config.env}),  # plain vars, secret env
            network=bool(self.config.network),
            limits=self.config.limits,
        )
        self.budget = OutputBudget(self.launch.output_cap)
        try:
            # Its own process group, so close() can end every child it spawned.
            self.proc = subprocess.Popen(self.launch.argv, **self.launch.process_options())
        except OSError as error:
            raise AgentCrashed(f"could not start agent {self.argv[0]!r}: {error}") from error
        self.stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self.stderr_thread.start()
        self._send({"type": "task", "task": task_text, "data": task_data, "tools": tools, "maxSteps": max_steps})

    def act(self, observation: str | None, deadline: float) -> Action:
        if not self.first:
            self._send({"type": "observation", "observation": observation or ""})
        self.first = False
        line = self._read_line(deadline)
        try:
            message = loads(line)
        except TooDeep as error:
            raise AgentProtocolError(f"agent printed a line {error}") from None
        except ValueError as error:
            quoted = self.masker.text(line)[:LINE_QUOTE_CHARS]  # masked whole, then cut: no piece of a secret is left
            raise AgentProtocolError(f"agent printed a line that is not JSON: {quoted!r}") from error
        if not isinstance(message, dict):
            raise AgentProtocolError(f"agent printed {type(message).__name__}, expected a JSON object")
        turn = _turn(message)
        if message.get("error") is not None:
            failure = AgentCrashed(f"agent could not go on: {_text(message, 'error')}")
            failure.events = turn["events"]
            raise failure
        if message.get("finish") is True:
            reason = message.get("reason")
            if reason is not None and reason not in STOP_REASONS:
                raise AgentProtocolError(f"a finish's reason must be one of {', '.join(STOP_REASONS)}")
            return Finish(str(message.get("summary", "")), reason, **turn)
        tool, args, call_id = message.get("tool"), message.get("args", {}), message.get("callId")
        if not isinstance(tool, str) or not isinstance(args, dict | str) or not isinstance(call_id, str | None):
            raise AgentProtocolError('expected {"tool": "<name>", "args": {…}} or {"finish": true}')
        arguments, refused = _arguments(tool, args)
        text = args if refused and isinstance(args, str) else None
        return ToolCall(tool, arguments, call_id or None, refused, arguments_text=text, **turn)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as error:
            raise self._ended(*self._exit_message("stopped reading its input")) from error

    def _read_line(self, deadline: float) -> str:
        """Read one line from the agent before `deadline`, refusing lines over MAX_LINE_BYTES."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.pending:
                if len(self.pending) > MAX_LINE_BYTES:
                    raise AgentProtocolError(f"agent printed more than {MAX_LINE_BYTES} bytes without a newline")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._ended(None, AgentTimedOut("agent did not answer within the trial's time budget"))
                if not selector.select(timeout=remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise self._ended(*self._exit_message("exited before answering"))
                if not self.budget.spend(len(chunk)):
                    raise self._ended(None, AgentCrashed("agent printed past its output cap"))
                self.pending += chunk
        line, _, rest = bytes(self.pending).partition(b"\n")
        self.pending = bytearray(rest)
        if len(line) > MAX_LINE_BYTES:
            raise AgentProtocolError(f"agent printed a line over {MAX_LINE_BYTES} bytes")
        return line.decode("utf-8", "replace")

    def _exit_message(self, what: str) -> tuple[int | None, AgentFailure]:
        """The agent's exit code (None if it still runs) and the crash it amounts to."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        return code, AgentCrashed(f"agent {what} (exit code {code})")

    def _ended(self, code: int | None, failure: AgentFailure) -> AgentFailure:
        """`failure`, unless the agent went past a sandbox limit: then a resource_limit failure naming the limit."""
        assert self.proc is not None and self.launch is not None
        if self.budget.exceeded:
            kill_group(self.proc)
            return AgentLimitExceeded(f"agent stopped at {describe('outputMb', self.launch.limits)}")
        if code is None:
            kill_group(self.proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.proc.wait(timeout=2)
        self.stderr_thread.join(timeout=1)
        breach = self.launch.breached(code, self.stderr.text())
        if breach:
            return AgentLimitExceeded(f"agent exceeded {breach} ({failure})")
        return failure

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        stderr = self.proc.stderr
        assert isinstance(stderr, io.BufferedReader)  # Popen's pipes are buffered unless bufsize=0
        for chunk in iter(lambda: stderr.read1(65536), b""):
            self.stderr.write(chunk)
            if not self.budget.spend(len(chunk)):
                kill_group(self.proc)
                return

    def close(self) -> str:
        """End the agent's sandbox, collect its stderr (the trial's sandbox removes the workspace)."""
        if self.proc is None:
            return ""
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=0.5)
        kill_group(self.proc)
        self.proc.wait()
        self.stderr_thread.join(timeout=2)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        return self.stderr.text()


@agent_of(configs.CommandAgent)
def start(config: configs.CommandAgent, seed: int, sandbox: TrialSandbox, masker: Masker | None) -> CommandAgent:
    """The command agent of one trial, run in the trial's sandbox."""
    return CommandAgent(config, sandbox, masker)
