"""Typed steps (domain.trajectory.Step) store the same JSON as the dicts before them: rows, artifacts, imports."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from domain.trajectory import Step, ToolResult, message_step, structured, tool_step
from domain.trajectory import ToolCall as ToolCallRecord
from importers.ingest import ingest, parse_trial
from models import EnvironmentVersion, EvaluatorConfig
from queries.trials import trajectory_file
from tests.factories import make_catalog
from tests.paths import TESTS
from worker import trial as trial_module
from worker.agents.base import Agent, Event, Finish, ToolCall
from worker.trial import run_trial
from writes.runs import enqueue_run, record_trial

FIXTURES = TESTS / "fixtures"
# recorded-steps.json and imported-steps.json: what the code before Step recorded of the trials below (commit 301bff4),
# and since then `"isError": true` on the worker's error results (a refused call, arguments that are no JSON object)
EXPECTED = "recorded-steps.json"
SECRET = "sekret-token-value"
AGENT = {"kind": "scripted", "skill": 1.0, "env": {"TOKEN": SECRET}}  # the env: what the trial masks


class TalkingAgent(Agent):
    """An agent in this process saying all a turn may say: a system prompt, messages, reasoning, tokens, latency,
    its harness's events, a call whose arguments are no object, a secret, and closing words."""

    system_prompt = "You run a shop."

    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        self.turn = 0

    def act(self, observation: str | None, deadline: float) -> Any:
        self.turn += 1
        if self.turn == 1:
            return ToolCall(
                tool="list_inventory",
                args={"limit": 2},
                call_id="c-1",
                message="Looking first.",
                reasoning="Inventory before orders.",
                tokens={"prompt": 812, "completion": 40},
                latency_ms=840.25,
                events=(Event("retry POST /chat", f"HTTP 503, key {SECRET}"),),
            )
        if self.turn == 2:
            return ToolCall(tool="restock", args={}, error="arguments are not a JSON object: [1]", latency_ms=12)
        if self.turn == 3:
            return ToolCall(tool="inspect", args={"note": f"use {SECRET}", "nested": {"a": [1, {"b": None}]}})
        return Finish(summary="done", message=[{"type": "text", "text": "All done."}], reasoning="Enough.")


class Clock:
    """Fixed wall-clock times and a monotonic clock that moves 1.5 ms a reading: steps' times do not vary."""

    def __init__(self) -> None:
        self.reading = 100.0

    def monotonic(self) -> float:
        self.reading += 0.0015
        return self.reading

    def now(self, tz=None) -> datetime:
        return datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def frozen_trial(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(trial_module, "time", SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(trial_module, "datetime", SimpleNamespace(now=clock.now))


def worker_outcomes(monkeypatch) -> dict[str, Any]:
    """Trials as the worker runs them: the built-in scripted agent, and the talking agent."""

    def shop_trial(agent: dict[str, Any]) -> Any:
        shop = {"kind": "builtin", "environment": "admin-console", "params": {}}
        return run_trial(shop, agent, world_seed=7, seed=11, max_steps=8, timeout_s=30)

    outcomes = {
        name: shop_trial({"kind": "scripted", "skill": skill})
        for name, skill in (("scripted-perfect", 1.0), ("scripted-clumsy", 0.3))
    }
    with monkeypatch.context() as patch:
        patch.setattr(trial_module.agents, "load", lambda *args, **kwargs: TalkingAgent())
        outcomes["talking"] = shop_trial(AGENT)
    return outcomes


def document(artifact: str) -> dict[str, Any]:
    """A trajectory file's content, its trajectory string parsed: the same whatever renders it (since migration 0037
    PostgreSQL does, with its own spacing and key order)."""
    parsed = json.loads(artifact)
    return {**parsed, "trajectory": json.loads(parsed["trajectory"])}


def stored(database, org_id, trial_id) -> dict[str, Any]:
    """The trial's steps and the content of the trajectory file it downloads as."""
    with database.session(org_id) as session:
        steps = session.execute(text("SELECT steps FROM evaluation_trials WHERE id = :id"), {"id": trial_id}).scalar()
        found = trajectory_file(session, trial_id)
    assert found is not None
    return {"steps": steps, "artifact": document(found.body.decode())}


def expected(fixture: str) -> dict[str, Any]:
    """What the code before Step recorded (the fixture keeps each file's text as it was then)."""
    recorded = json.loads((FIXTURES / fixture).read_text())
    return {name: {**trial, "artifact": document(trial["artifact"])} for name, trial in recorded.items()}


def test_the_worker_records_the_steps_and_artifact_it_recorded_before_steps_were_typed(
    database, make_org, frozen_trial, monkeypatch
):
    org = make_org("Acme RL")
    catalog = make_catalog(database, org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=3)
    outcomes = worker_outcomes(monkeypatch)
    with database.session(org.id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org.id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (org.id, catalog.config_id))
        run = enqueue_run(session, version, config)
        ids = {
            name: record_trial(session, run, number, number, outcome).id
            for number, (name, outcome) in enumerate(outcomes.items(), start=1)
        }
    recorded = {name: stored(database, org.id, trial_id) for name, trial_id in ids.items()}
    assert recorded == expected(EXPECTED)


def import_lines() -> list[dict[str, Any]]:
    """Trials as the importers take them: an ATIF trajectory (null call ids, content parts, metrics) and
    seed-shaped steps (MCP handshakes, arguments in the command text, a command that is no JSON)."""
    atif = json.loads((FIXTURES / "atif-v1.7-example.json").read_text())
    environment = {"name": "imported-shop", "spec": {"kind": "external"}}
    seed_steps = [
        {"step": 1, "tool": "mcp", "command": "initialize", "observation": "server shop"},
        {"step": 2, "tool": "mcp", "command": "tools/list", "observation": "a, b"},
        {"step": 3, "tool": "mcp", "command": 'git_add {"files": ["a"]}', "observation": "Added a"},
        {"step": 4, "tool": "bash", "command": "bash ls -la", "observation": "x" * 20_000, "ignored": 1},
        {"step": 5, "tool": "noop", "command": "noop", "observation": ""},
    ]
    return [
        {"externalId": "atif-1", "environment": environment, "attempt": 1, "reward": 1.0, "trajectory": atif},
        {"externalId": "seed-1", "environment": environment, "attempt": 2, "reward": 0.0, "trajectory": seed_steps},
    ]


def test_imports_record_the_steps_and_artifact_they_recorded_before_steps_were_typed(database, make_org):
    org = make_org("Acme RL")
    parsed = [parse_trial(line, number) for number, line in enumerate(import_lines(), start=1)]
    with database.session(org.id) as session, session.begin():
        ingest(session, org.id, parsed)
    with database.session(org.id) as session:
        ids = dict(session.execute(text("SELECT external_id, id FROM evaluation_trials")).all())
    recorded = {name: stored(database, org.id, trial_id) for name, trial_id in sorted(ids.items())}
    assert recorded == expected("imported-steps.json")


# Step.from_stored / to_stored over every shape stored today, and over what no writer writes (hand-written rows).
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
TEXT = st.text(max_size=12)
CONTENT = TEXT | st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image"])}, optional={"text": TEXT, "mimeType": TEXT}),
    max_size=3,
)
NUMBER = st.integers(min_value=0, max_value=10**6) | st.floats(min_value=0, max_value=1e6)
CALL = st.builds(
    lambda i, name, arguments: {"id": i, "name": name, "arguments": arguments},
    TEXT,
    TEXT,
    st.dictionaries(TEXT, JSON, max_size=3),
)
RESULT = st.builds(  # a result linked to its call (an id, or null: ATIF's), or not (an environment's)
    lambda linked, call_id, content: ({"callId": call_id} if linked else {}) | {"content": content},
    st.booleans(),
    TEXT | st.none(),
    CONTENT,
)
OPTIONAL = {  # the structured record's keys, in the order the builders write them
    "source": st.sampled_from(["agent", "environment", "user", "system"]),
    "toolCalls": st.lists(CALL, max_size=3),
    "results": st.lists(RESULT, max_size=3),
    "message": CONTENT,
    "reasoning": TEXT,
    "startedAt": TEXT,
    "durationMs": NUMBER,
    "tokens": st.dictionaries(st.sampled_from(["prompt", "completion", "cached"]), st.integers(0, 10**6)),
    "latencyMs": NUMBER,
    "extra": st.dictionaries(TEXT, JSON, max_size=3),
}


@st.composite
def stored_steps(draw, odd: bool = False) -> dict[str, Any]:
    """A step as stored: the seed's four fields, then any of the record's keys in the order they are written;
    `odd`: any key may hold any JSON (null, another type), seed fields may be missing, unknown keys follow."""
    stored: dict[str, Any] = {}
    seed = {"step": st.integers(1, 500), "tool": TEXT | st.none(), "command": TEXT, "observation": TEXT}
    for key, values in [*seed.items(), *OPTIONAL.items()]:
        if key in seed and not (odd and draw(st.booleans())):
            stored[key] = draw(values)
        elif draw(st.booleans()):
            stored[key] = draw(JSON if odd and draw(st.booleans()) else values)
    if odd:
        stored |= draw(st.dictionaries(TEXT.filter(lambda key: key not in stored), JSON, max_size=3))
    return stored


@settings(max_examples=300, deadline=None)
@given(stored_steps())
def test_every_stored_step_shape_round_trips_in_order(stored):
    step = Step.from_stored(stored)
    assert json.dumps(step.to_stored()) == json.dumps(stored)  # the same keys, values and order
    assert Step.from_stored(step.to_stored()) == step


@settings(max_examples=300, deadline=None)
@given(stored_steps(odd=True))
def test_any_step_dict_round_trips_keeping_what_no_field_holds(stored):
    step = Step.from_stored(stored)
    assert step.to_stored() == stored
    unknown = set(stored) - {key for key, _, _ in Step.FIELDS}
    assert unknown <= set(step.other)


@settings(max_examples=100, deadline=None)
@given(JSON)
def test_a_stored_step_with_any_calls_and_results_round_trips(value):
    stored = {"step": 1, "tool": "t", "command": "c", "observation": "o", "toolCalls": [{"x": value}], "results": value}
    assert Step.from_stored(stored).to_stored() == stored


def test_the_step_builders_write_what_from_stored_reads():
    built = tool_step(3, "git_add", {"files": ["a"]}, "Added a", call_id="c", message="m", tokens={"prompt": 1})
    stored = built.to_stored()
    assert list(stored) == [
        "step",
        "tool",
        "command",
        "observation",
        "source",
        "toolCalls",
        "results",
        "message",
        "tokens",
    ]
    again = Step.from_stored(stored)
    assert (again.tool_calls, again.results) == (built.tool_calls, built.results)
    assert again.tool_calls == (ToolCallRecord(id="c", name="git_add", arguments={"files": ["a"]}),)
    assert message_step(4, None).to_stored() == {
        "step": 4,
        "tool": None,
        "command": "",
        "observation": "",
        "source": "agent",
    }
    handshake = structured({"step": 1, "tool": "mcp", "command": "initialize", "observation": "ok"})
    assert handshake.source == "environment" and handshake.results == (ToolResult(content="ok"),)
