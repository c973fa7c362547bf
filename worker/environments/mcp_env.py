"""MCP environments: any Model Context Protocol server over stdio is an environment version.

Spec: {"kind": "mcp", "command": ["python", "-m", "my_server"], "cwd"?: str, "env"?: {str: str},
"verifier": {"tool": "score", "arguments"?: {…}} | {"command": [...]}, "task"?: str, "startupTimeoutS"?: number}.
The worker is the MCP client (the official `mcp` SDK): it starts the server in the trial's fresh workspace with
AGENTFORGE_WORLD_SEED set (a fresh process per trial: new_workspace keeps the seed, new_world draws a new one),
initializes and lists the tools within the start-up budget (not the agent's), hands the tools to the agent with their
input schemas as the server sent them, forwards each call (its content parts kept in order), then scores with the
verifier tool (hidden from the agent) or a command, in the same workspace, that prints a JSON object of stage_*
values (and optionally "failure_category", "log", and "explanations": {stage_*: what it found}). The handshake
is recorded as environment steps filed under "mcp", each call under its real tool name.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession

from domain.json_depth import TooDeep, loads
from domain.limits import describe
from domain.outcome import FAILURE_CATEGORY_CHARS, REWARD_EXPLANATION
from domain.rules import REWARD, STAGE_KEY, program_environment
from domain.specs import STARTUP_TIMEOUT_S, McpSpec
from domain.trajectory import Step, content_text, environment_step
from domain.trial_log import LogEntry, ProgramOutput
from worker.environments.base import Task, ToolError, ToolResult, TrialEnvironment
from worker.environments.mcp_stdio import ServerOutput, sandboxed_stdio
from worker.environments.registry import TrialPlace, environment_of
from worker.masking import Masker
from worker.sandbox import Launch, LimitExceeded, TrialSandbox, run_bounded

ROOT = Path(__file__).resolve().parents[2]
TASK_DATA_MARKER = "AGENTFORGE_TASK_DATA:"
STDERR_KEEP = 8 * 1024
VERIFIER_STDERR_KEEP = 500  # characters of a failing verifier command's stderr (its end) the log quotes
SCORE_GRACE_S = 10.0  # the verifier gets its own budget, even when the agent used up the trial's
MALFORMED_GRACE_S = 1.0  # after a line that is not JSON-RPC, how long a valid answer may still come during start-up
BINARY_KEEP_CHARS = 256 * 1024  # base64 of one image/audio/blob part kept in a step; larger ones are named, not kept


def _argv(command: list[str]) -> list[str]:
    """`python` at the front means the worker's own interpreter."""
    return [sys.executable, *command[1:]] if command[0] in ("python", "python3") else list(command)


def _elapsed_ms(clock: float) -> float:
    return round((time.monotonic() - clock) * 1000, 3)


def _parameters(schema: dict[str, Any] | None) -> dict[str, str]:
    """A tool's input schema as name → type, the form agents get for every environment."""
    return {name: prop.get("type", "string") for name, prop in (schema or {}).get("properties", {}).items()}


def _bounded(part: dict[str, Any]) -> dict[str, Any]:
    """A content part with an oversized binary payload (image/audio `data`, a resource's `blob`) left out, named."""
    for holder in (part, part.get("resource") or {}):
        for key in ("data", "blob"):
            payload = holder.get(key)
            if isinstance(payload, str) and len(payload) > BINARY_KEEP_CHARS:
                kept = {k: v for k, v in holder.items() if k != key}
                kept["omitted"] = f"{len(payload)} characters of base64 over the {BINARY_KEEP_CHARS} kept"
                return kept if holder is part else {**part, "resource": kept}
    return part


def _parts(result: Any) -> list[dict[str, Any]]:
    """A tool result's content parts (text, image, audio, resource, resource link) in order, as JSON objects."""
    return [_bounded(part.model_dump(mode="json", by_alias=True, exclude_none=True)) for part in result.content]


class StartupTimeout(TimeoutError):
    """The server did not answer the handshake within its start-up budget (`startupTimeoutS`)."""

    category = "timeout"


class MCPEnvironment(TrialEnvironment):
    """One trial's MCP server process and client session, driven synchronously through an anyio portal.

    `masker` holds the trial's secrets: what the server and the verifier print is masked before any of it is cut.
    """

    name = "mcp"

    def __init__(self, spec: McpSpec, sandbox: TrialSandbox, masker: Masker | None = None) -> None:
        self.spec, self.sandbox = spec, sandbox
        self.masker = masker or Masker(())
        self.log: list[LogEntry] = []  # the worker's lines, and the verifier's log labelled as its own
        self.tool_errors = 0
        self.preamble: list[Step] = []
        self.deadline: float | None = None  # what bounds the call in flight (the agent's, then the verifier's)
        self.failure_category: str | None = None
        self.explanations: dict[str, str] = {}
        self.tool_list: list[dict[str, Any]] = []
        self.world_seed = 0
        self._contexts: list[Any] = []
        self._portal: BlockingPortal | None = None
        self.output: ServerOutput | None = None
        self.launch_limits: dict[str, int] = {}
        self.server_launch: Launch | None = None

    def _run(self, function, *args: Any) -> Any:
        """Run an MCP call on the portal's event loop within the trial's time budget (TimeoutError past it)."""
        remaining = None if self.deadline is None else max(0.01, self.deadline - time.monotonic())

        async def bounded():
            with anyio.fail_after(remaining):
                return await function(*args)

        return self._started_portal().call(bounded)

    def _handshake(self, method: str, function) -> Any:
        """Run one handshake call within the start-up budget, apart from the agent's time budget.

        Past the budget: StartupTimeout ("did not answer initialize within 30 s"); a server that printed lines that
        are not JSON-RPC and no valid answer within MALFORMED_GRACE_S of the first: RuntimeError saying so.
        """
        budget, output = float(self.spec.startupTimeoutS or STARTUP_TIMEOUT_S), self.output
        assert output is not None  # reset() made it before the handshake

        async def bounded() -> dict[str, Any]:
            outcome: dict[str, Any] = {}
            with anyio.move_on_after(budget):
                async with anyio.create_task_group() as tasks:

                    async def call() -> None:
                        try:
                            outcome["value"] = await function()
                        except Exception as error:  # re-raised below, outside the task group
                            outcome["error"] = error
                        tasks.cancel_scope.cancel()

                    async def watch() -> None:
                        while not output.malformed:
                            await anyio.sleep(0.05)
                        await anyio.sleep(MALFORMED_GRACE_S)
                        tasks.cancel_scope.cancel()

                    tasks.start_soon(call)
                    tasks.start_soon(watch)
            return outcome

        outcome = self._started_portal().call(bounded)
        if "value" in outcome:
            return outcome["value"]
        self.raise_if_limited()
        if "error" in outcome:
            raise outcome["error"]
        if output.malformed:
            raise RuntimeError(
                f"the MCP server gave no valid answer to {method} (malformed JSON-RPC: {output.malformed} lines "
                f"that are not JSON-RPC, the first {output.first_malformed!r})"
            )
        raise StartupTimeout(f"the MCP server did not answer {method} within {budget:g} s (startupTimeoutS)")

    def _started_portal(self) -> BlockingPortal:
        """The portal reset() started (calling the server before reset is a bug)."""
        if self._portal is None:
            raise RuntimeError("the MCP server has not been started (reset first)")
        return self._portal

    def _enter(self, manager: Any) -> Any:
        wrapped = self._started_portal().wrap_async_context_manager(manager)
        value = wrapped.__enter__()
        self._contexts.append(wrapped)
        return value

    def _launch(self, command: list[str]) -> Launch:
        """How to start the server or the verifier command: the environment side of the trial's sandbox.

        Both run in that side's workspace (fresh for every trial, removed after it; `cwd` is a directory inside it)
        with the spec's vars and env, the world seed and parameters, and the trial context the sandbox adds
        (AGENTFORGE_SEED, AGENTFORGE_TRIAL, AGENTFORGE_WORKSPACE).
        """
        env = {
            **program_environment({"vars": self.spec.vars, "env": self.spec.env}),  # plain vars and secret env
            "AGENTFORGE_WORLD_SEED": str(self.world_seed),
            "AGENTFORGE_PARAMS": json.dumps(self.spec.params),
            "PYTHONPATH": str(ROOT),  # `python -m worker.environments.…` finds the built-in servers (read-only)
        }
        return self.sandbox.launch(
            "environment",
            _argv(command),
            env=env,
            network=bool(self.spec.network),
            limits=self.spec.limits,
            cwd=self.spec.cwd,
        )

    def reset(self, world_seed: int) -> Task:
        """Start the server (seeded), initialize, list the tools; the task comes from the server's instructions."""
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self.world_seed = world_seed
        launch = self._launch(self.spec.command)
        self.launch_limits, self.server_launch = launch.limits, launch
        self.output = ServerOutput(launch.output_cap, STDERR_KEEP, self.masker)
        read, write = self._enter(sandboxed_stdio(launch, self.output))
        self.session = self._enter(ClientSession(read, write))
        began, clock = datetime.now(UTC).isoformat(), time.monotonic()
        initialized = self._handshake("initialize", self.session.initialize)
        info = getattr(initialized, "server_info", None)
        instructions = getattr(initialized, "instructions", None) or self.spec.task or ""
        text, _, data = instructions.partition(TASK_DATA_MARKER)
        self.log.append(f"started MCP server {getattr(info, 'name', '?')} (world {world_seed})")
        server = info.model_dump(mode="json", by_alias=True, exclude_none=True) if info is not None else {}
        self.preamble.append(
            environment_step(
                1,
                "initialize",
                self.masker.text(f"server {getattr(info, 'name', '?')}: {text.strip()}"),  # masked, then capped
                started_at=began,
                duration_ms=_elapsed_ms(clock),
                extra={"serverInfo": server, "protocolVersion": getattr(initialized, "protocol_version", None)},
            )
        )
        began, clock = datetime.now(UTC).isoformat(), time.monotonic()
        listed = self._handshake("tools/list", self.session.list_tools)
        hidden = self.spec.verifier.tool
        self.tool_list = [
            {
                "name": t.name,
                "description": t.description or "",
                "parameters": _parameters(t.input_schema),
                "inputSchema": t.input_schema,  # as the server sent it: items, required, enums, defaults, anyOf
            }
            for t in listed.tools
            if t.name != hidden
        ]
        self.preamble.append(
            environment_step(
                2,
                "tools/list",
                self.masker.text(", ".join(t["name"] for t in self.tool_list)),
                started_at=began,
                duration_ms=_elapsed_ms(clock),
                extra={"tools": self.tool_list},
            )
        )
        try:
            return Task(text.strip(), loads(data) if data.strip() else {})
        except TooDeep as error:
            raise ValueError(f"the MCP server's task data ({TASK_DATA_MARKER}) is {error}") from None

    def tools(self) -> list[dict[str, Any]]:
        """The server's tools, as handed to the agent (the verifier tool left out)."""
        return self.tool_list

    def call(self, tool: str, args: dict[str, Any], deadline: float | None = None) -> ToolResult:
        """Forward one call of a tool the agent was offered, waiting until `deadline` at most, and return its content
        parts in order (its structuredContent beside them); a result the
        server marks `isError` is a ToolError of its text (the agent reads `error: <text>`, the step records an
        error). A call of any other tool (the verifier's, one the server never listed) is refused here as a tool
        error: the server never receives it."""
        offered = [t["name"] for t in self.tool_list]
        if tool not in offered:
            self.tool_errors += 1
            raise ToolError(f"no tool named {tool!r}; available: {', '.join(offered)}")
        self.deadline = deadline
        try:
            result = self._run(self.session.call_tool, tool, args)
        except Exception:
            self.raise_if_limited()
            raise
        parts = _parts(result)
        structured = getattr(result, "structured_content", None)  # MCP's structuredContent
        if result.is_error:
            self.tool_errors += 1
            raise ToolError(content_text(parts))
        return ToolResult(parts, {"structuredContent": structured} if structured is not None else {})

    def score(self) -> dict[str, float]:
        """Ask the verifier for the stage_* values (and a failure category) of the state the trial left."""
        verifier = self.spec.verifier
        self.deadline = time.monotonic() + SCORE_GRACE_S
        if verifier.tool is not None:
            raw = content_text(_parts(self._run(self.session.call_tool, verifier.tool, verifier.arguments or {})))
        else:
            assert verifier.command is not None  # a verifier is a tool or a command (domain.specs.VERIFIER_RULE)
            finished = run_bounded(self._launch(verifier.command), timeout=30, mask=self.masker.text)
            if finished.returncode != 0:
                stderr = self.masker.text(finished.stderr)[-VERIFIER_STDERR_KEEP:]  # masked whole, then its end kept
                raise RuntimeError(f"the verifier exited with code {finished.returncode}: {stderr}")
            raw = finished.stdout
        try:
            values = loads(raw)
        except TooDeep as error:
            raise ValueError(f"the verifier printed JSON {error}") from None
        if not isinstance(values, dict):
            raise ValueError("the verifier did not print a JSON object")
        category = values.get("failure_category")
        if category is not None and not (isinstance(category, str) and 0 < len(category) <= FAILURE_CATEGORY_CHARS):
            raise ValueError(f"the verifier's failure_category is not text of 1 to {FAILURE_CATEGORY_CHARS} characters")
        self.failure_category = category
        said = values.get("explanations")
        self.explanations = (
            # how the reward was derived is the worker's to say (the mean of the stages), never the verifier's
            {
                k: str(v)
                for k, v in said.items()
                if isinstance(k, str) and isinstance(v, str) and k != REWARD_EXPLANATION
            }
            if isinstance(said, dict)
            else {}
        )
        if values.get("log"):
            self.log.append(ProgramOutput("verifier", self.masker.text(str(values["log"]))))
        stages = {k: float(v) for k, v in values.items() if k.startswith("stage_")}
        if not stages or not all(REWARD.check(v) for v in stages.values()):
            raise ValueError("the verifier gave no stage_* values between 0 and 1")
        if (bad := next((key for key in stages if not STAGE_KEY.check(key)), None)) is not None:
            shown = f"{bad[:40]}…" if len(bad) > 40 else bad
            raise ValueError(f"the verifier's stage key {shown!r} {STAGE_KEY.says}")
        return stages

    def explain(self) -> dict[str, str]:
        """The verifier's `explanations` (stage key → text), when it printed any."""
        return self.explanations

    def diagnose(self) -> str:
        """The verifier's failure category, or task_incomplete."""
        return self.failure_category or "task_incomplete"

    def close(self) -> str:
        """Stop the session and the server process (no process is left behind); return its stderr (bounded)."""
        for context in reversed(self._contexts):
            try:
                context.__exit__(None, None, None)
            except Exception as error:  # a dead server may fail to close cleanly; it is gone either way
                self.log.append(f"closing MCP server: {type(error).__name__}: {error}")
        self._contexts.clear()
        if self._portal is not None:
            self._portal_cm.__exit__(None, None, None)
            self._portal = None
        return self.output.text().strip() if self.output else ""

    def raise_if_limited(self) -> None:
        """Raise LimitExceeded when the server was stopped at its output cap or shows another limit's breach, and
        RuntimeError when it was stopped for a line nested too deep."""
        if self.output is None:
            return
        if self.output.budget.exceeded:
            raise LimitExceeded(f"the MCP server was stopped at {describe('outputMb', self.launch_limits)}")
        if self.output.overlong_line:
            raise LimitExceeded("the MCP server printed a line over 4 MiB")
        if self.output.too_deep:  # not a limit of the sandbox: a line that is no usable JSON-RPC
            raise RuntimeError(f"the MCP server printed a JSON-RPC line {self.output.too_deep}; it was stopped")
        breach = self.server_launch.breached(None, self.output.text()) if self.server_launch else None
        if breach:
            raise LimitExceeded(f"the MCP server exceeded {breach}")


@environment_of(McpSpec)
def start(spec: McpSpec, place: TrialPlace) -> MCPEnvironment:
    """A trial's MCP server, started in the trial's sandbox."""
    sandbox = place.needed_sandbox("an MCP environment starts a program, so it needs the trial's sandbox")
    return MCPEnvironment(spec, sandbox, place.masker)
