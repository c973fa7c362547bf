"""The MCP stdio transport for a sandboxed server: newline-delimited JSON-RPC over the sandbox's pipes, bounded.

The SDK's own stdio client starts the program itself with the worker's
environment merged in and buffers whatever the server prints; this one starts
the sandbox's `Launch` as given, counts every byte of stdout and stderr
against the server's output cap (a flood stops the server, never the worker),
refuses lines over MAX_LINE_BYTES or nested deeper than MAX_JSON_DEPTH (either stops
the server) and keeps the first bytes of stderr and of the first line that is not
JSON-RPC for the log, the trial's secrets masked before either is cut. Closing it
kills the sandbox (and so every process the server started).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from domain.json_depth import TooDeep, loads
from worker.masking import Masker
from worker.sandbox import Launch, OutputBudget

MAX_LINE_BYTES = 4 * 1024 * 1024
MALFORMED_QUOTE_CHARS = 200  # how much of the first line that is not JSON-RPC the log quotes


class ServerOutput:
    """What the server printed on the side: the first `keep` bytes of stderr, and whether it hit its output cap.

    Its texts have the trial's secrets (`masker`) masked, before they were cut.
    """

    def __init__(self, cap: int, keep: int, masker: Masker | None = None) -> None:
        self.budget, self.keep = OutputBudget(cap), keep
        self.masker = masker or Masker(())
        self.stderr = bytearray()
        self.dropped = 0
        self.overlong_line = False
        self.too_deep = ""  # why a line nested too deep was refused (the server is stopped then)
        self.malformed = 0  # stdout lines that were not JSON-RPC
        self.first_malformed = ""

    def text(self) -> str:
        """The kept stderr, masked (its end is a cut when bytes were dropped), then a marker for what was dropped."""
        tail = f"\n… [server stderr truncated: {self.dropped} more bytes]" if self.dropped else ""
        return self.masker.text(self.stderr.decode("utf-8", "replace")) + tail

    def refused(self, line: bytes) -> None:
        """Count a stdout line that is not JSON-RPC; the first is kept for the log, masked whole, then cut."""
        self.malformed += 1
        if not self.first_malformed:
            self.first_malformed = self.masker.text(line.decode("utf-8", "replace"))[:MALFORMED_QUOTE_CHARS]


def _parse_line(line: bytes) -> SessionMessage | Exception:
    """A JSON-RPC line as a message, or why it is none (TooDeep for nesting deeper than MAX_JSON_DEPTH, checked
    before the SDK's parser reads it)."""
    try:
        loads(line)
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


@contextlib.asynccontextmanager
async def sandboxed_stdio(launch: Launch, output: ServerOutput) -> AsyncIterator[tuple]:
    """Start the server and yield the (read, write) streams a ClientSession speaks over."""
    process = await anyio.open_process(launch.argv, **launch.process_options())
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    assert stdin is not None and stdout is not None and stderr is not None  # all three are pipes
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    def stop() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    async def stdout_reader() -> None:
        buffer = bytearray()
        async with read_writer:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in stdout:
                    if not output.budget.spend(len(chunk)):
                        stop()
                        return
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        if line.strip():
                            parsed = _parse_line(line)
                            if isinstance(parsed, TooDeep):
                                output.too_deep = str(parsed)
                                stop()
                                return
                            if isinstance(parsed, Exception):
                                output.refused(line)
                            await read_writer.send(parsed)
                    if len(buffer) > MAX_LINE_BYTES:
                        output.overlong_line = True
                        stop()
                        return

    async def stderr_reader() -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stderr:
                room = output.keep - len(output.stderr)
                output.stderr += chunk[: max(0, room)]
                output.dropped += max(0, len(chunk) - max(0, room))
                if not output.budget.spend(len(chunk)):
                    stop()
                    return

    async def stdin_writer() -> None:
        async with write_reader:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await stdin.send(data.encode())
        await read_writer.aclose()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stdout_reader)
        tasks.start_soon(stderr_reader)
        tasks.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                stop()
                for stream in (read_stream, write_stream):
                    await stream.aclose()
                with anyio.move_on_after(5), contextlib.suppress(Exception):
                    await process.aclose()  # waits for the exit and closes the pipes
            tasks.cancel_scope.cancel()
