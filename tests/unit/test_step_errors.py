"""Which step's result is an error: the one rule (domain.trajectory: `isError` true or a nonzero `exitCode` on a
result), over steps of each kind, and the worker recording each kind it meets so."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent

from domain.specs import spec_model
from domain.trajectory import Step, environment_step, message_step, step, structured, tool_step
from worker import trial as trial_module
from worker.agents.base import Agent, Finish, ToolCall
from worker.environments import ToolError
from worker.environments.mcp_env import MCPEnvironment
from worker.trial import run_trial

SHOP = {"kind": "builtin", "environment": "admin-console", "params": {}}
TOOLS = "list_inventory, list_customers, restock, create_order, checkout"


def stored_call(content: Any, **result: Any) -> Step:
    """A stored agent step of one call whose result holds `result`'s keys beside its content."""
    return Step.from_stored(
        {
            "step": 4,
            "tool": "bash",
            "command": 'bash {"cmd": "ls x"}',
            "observation": str(content),
            "source": "agent",
            "toolCalls": [{"id": "c4", "name": "bash", "arguments": {"cmd": "ls x"}}],
            "results": [{"callId": "c4", "content": content, **result}],
        }
    )


ERRORS = {
    "a call the environment refused": tool_step(
        3, "inspect", {}, f"error: unknown tool 'inspect'; available: {TOOLS}", is_error=True
    ),
    "arguments that are no JSON object": tool_step(
        3,
        "restock",
        {},
        "error: the arguments of restock are not valid JSON (Expecting value); send a JSON object",
        is_error=True,
        arguments_text='{"sku": ',
    ),
    "an MCP tool's isError result": stored_call([{"type": "text", "text": "fatal: not a git repo"}], isError=True),
    "a command's nonzero exit": stored_call("ls: cannot access 'x': No such file or directory", exitCode=2),
    "a negative exit (a signal)": stored_call("", exitCode=-9),
    "one error among several results": step(
        5,
        source="agent",
        tool="poke",
        calls=[{"id": "a", "name": "poke", "arguments": {}}, {"id": "b", "name": "poke", "arguments": {}}],
        results=[{"callId": "a", "content": "poked"}, {"callId": "b", "content": "stuck", "isError": True}],
    ),
}

NOT_ERRORS = {
    "a call that worked": tool_step(2, "list_inventory", {}, "SKU-1  Widget  stock=3"),
    "an MCP result with isError false": stored_call([{"type": "text", "text": "ok"}], isError=False),
    "a command that exited 0": stored_call("x", exitCode=0),
    "isError that is not true": stored_call("x", isError="true"),
    "exitCode that is not an integer": stored_call("x", exitCode="2"),
    "exitCode true": stored_call("x", exitCode=True),
    "the agent speaking": message_step(6, "I could not find it; giving up."),
    "an MCP handshake": environment_step(1, "initialize", "admin-console 1.0"),
    "a system prompt": step(1, source="system", message="You run a shop."),
    # the text is never read: a result saying "error: …" without the flag (a step stored before it) is not marked
    "a stored step whose text starts with error": structured(
        {"step": 3, "tool": "restock", "command": "restock {}", "observation": "error: restock needs sku, quantity"}
    ),
}


@pytest.mark.parametrize("made", ERRORS.values(), ids=ERRORS.keys())
def test_a_result_flagged_as_an_error_makes_its_step_an_error(made):
    assert made.is_error
    assert Step.from_stored(made.to_stored()).is_error  # the flag is stored and read back


@pytest.mark.parametrize("made", NOT_ERRORS.values(), ids=NOT_ERRORS.keys())
def test_other_steps_are_not_errors(made):
    assert not made.is_error


def test_the_flag_is_stored_beside_the_content_and_only_on_errors():
    refused = tool_step(3, "inspect", {}, "error: no such tool", call_id="c", is_error=True).to_stored()
    assert refused["results"] == [{"callId": "c", "content": "error: no such tool", "isError": True}]
    worked = tool_step(2, "list_inventory", {}, "SKU-1", call_id="c").to_stored()
    assert worked["results"] == [{"callId": "c", "content": "SKU-1"}]  # as before: no key when no error


class Clumsy(Agent):
    """Calls a tool that is not offered, sends arguments that are no JSON object, leaves an argument out, then
    does one call right and finishes."""

    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        self.turns = iter(
            [
                ToolCall("inspect", {}),
                ToolCall("restock", {}, error="the arguments of restock are not valid JSON", arguments_text="{"),
                ToolCall("restock", {"sku": "SKU-1"}),
                ToolCall("list_inventory", {}),
                Finish("done"),
            ]
        )

    def act(self, observation: str | None, deadline: float) -> Any:
        return next(self.turns)


def test_the_worker_records_refused_calls_and_malformed_arguments_as_errors(monkeypatch):
    monkeypatch.setattr(trial_module.agents, "load", lambda *args, **kwargs: Clumsy())
    outcome = run_trial(SHOP, {"kind": "scripted", "skill": 1.0}, world_seed=7, seed=1, max_steps=8, timeout_s=10)
    calls = [s for s in outcome.steps if s.tool_calls]
    assert [(s.tool, s.is_error) for s in calls] == [
        ("inspect", True),
        ("restock", True),
        ("restock", True),
        ("list_inventory", False),
    ]
    assert [s.observation for s in calls[:3]] == [  # what the agent reads is as it was
        f"error: unknown tool 'inspect'; available: {TOOLS}",
        "error: the arguments of restock are not valid JSON",
        "error: restock needs quantity",
    ]
    assert all(s["results"][0]["isError"] is True for s in outcome.stored_steps()[:3])


def test_an_mcp_result_marked_is_error_is_a_tool_error_the_agent_reads_as_text():
    spec = spec_model({"kind": "mcp", "command": ["server"], "verifier": {"tool": "score"}})
    env = MCPEnvironment(spec, None)  # type: ignore[arg-type]
    env.tool_list, env.session = [{"name": "commit"}], SimpleNamespace(call_tool=None)  # the server's answer below
    answer = CallToolResult(content=[TextContent(type="text", text="nothing to commit")], is_error=True)
    env._run = lambda function, *args: answer  # type: ignore[method-assign]
    with pytest.raises(ToolError) as refused:
        env.call("commit", {})
    assert str(refused.value) == "nothing to commit"  # the agent reads "error: nothing to commit"
    assert env.tool_errors == 1
    env._run = lambda function, *args: answer.model_copy(update={"is_error": False})  # type: ignore[method-assign]
    assert env.call("commit", {}).content == [{"type": "text", "text": "nothing to commit"}]
