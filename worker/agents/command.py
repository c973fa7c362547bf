"""The command agent: any program that speaks JSON lines on stdin/stdout (protocol in the README).

The worker writes one JSON object per line: first
`{"type": "task", "task", "data", "tools", "maxSteps"}`, then after each action
`{"type": "observation", "observation"}`. The program answers every message
with one line: `{"tool": name, "args": {…}}` or `{"finish": true, "summary": …}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any

from worker.agents.base import Action, Agent, AgentCrashed, AgentProtocolError, AgentTimedOut, Finish, ToolCall

MAX_LINE_BYTES = 64 * 1024
STDERR_KEEP_BYTES = 8 * 1024


class BoundedBuffer:
    """Keeps the first `limit` bytes written to it and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit, self.kept, self.dropped = limit, bytearray(), 0

    def write(self, chunk: bytes) -> None:
        room = self.limit - len(self.kept)
        self.kept += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        tail = f"\n… [stderr truncated: {self.dropped} more bytes]" if self.dropped else ""
        return self.kept.decode("utf-8", "replace") + tail


class CommandAgent(Agent):
    """Runs `argv` in a fresh temporary directory for one episode, one process per trial."""

    def __init__(self, argv: list[str], seed: int, env: dict[str, str] | None = None) -> None:
        self.argv, self.seed, self.extra_env = argv, seed, env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = BoundedBuffer(STDERR_KEEP_BYTES)
        self.pending = bytearray()
        self.first = True

    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        self.workdir = tempfile.TemporaryDirectory(prefix="agentforge-agent-")
        env = {**os.environ, **self.extra_env, "AGENTFORGE_SEED": str(self.seed)}
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.workdir.name,
                env=env,
                start_new_session=True,  # its own process group, so close() can end every child it spawned
            )
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
            message = json.loads(line)
        except ValueError as error:
            raise AgentProtocolError(f"agent printed a line that is not JSON: {line[:200]!r}") from error
        if not isinstance(message, dict):
            raise AgentProtocolError(f"agent printed {type(message).__name__}, expected a JSON object")
        if message.get("finish") is True:
            return Finish(str(message.get("summary", "")))
        tool, args = message.get("tool"), message.get("args", {})
        if not isinstance(tool, str) or not isinstance(args, dict):
            raise AgentProtocolError('expected {"tool": "<name>", "args": {…}} or {"finish": true}')
        return ToolCall(tool, args)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as error:
            raise AgentCrashed(self._exit_message("stopped reading its input")) from error

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
                    raise AgentTimedOut("agent did not answer within the trial's time budget")
                if not selector.select(timeout=remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AgentCrashed(self._exit_message("exited before answering"))
                self.pending += chunk
        line, _, rest = bytes(self.pending).partition(b"\n")
        self.pending = bytearray(rest)
        if len(line) > MAX_LINE_BYTES:
            raise AgentProtocolError(f"agent printed a line over {MAX_LINE_BYTES} bytes")
        return line.decode("utf-8", "replace")

    def _exit_message(self, what: str) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        return f"agent {what} (exit code {code})"

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):  # type: ignore[union-attr]
            self.stderr.write(chunk)

    def close(self) -> str:
        """End the agent's process group, collect its stderr, remove its working directory."""
        if self.proc is None:
            return ""
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=0.5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.stderr_thread.join(timeout=2)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        self.workdir.cleanup()
        return self.stderr.text()
