"""Training rows: every format=trl row renders through real chat templates and TRL's data utilities; ATIF validates.

The chat templates are the ones TRL 1.16 ships (trl/chat_templates/*.jinja, read by trl.chat_template_utils), set
on a one-word tokenizer built offline: no model download, no torch.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from atif import Trajectory
from sqlalchemy import text
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast
from trl import chat_template_utils
from trl.data_utils import is_conversational, maybe_apply_chat_template

from domain.outcome import TrialOutcome
from domain.trajectory import Step, environment_step, step, tool_step
from queries.exports import preference_pairs_sql
from queries.filters import TrialFilters
from queries.training_formats import CLOSING_TURN, trl_conversation
from tests.factories import make_catalog, record_rewards, typed_steps, writable_copy
from tests.paths import TESTS

# Families whose templates render tool calls (TRL's supports_tool_calling): Qwen 2.5, Qwen 3, Llama 3.1/3.2, gpt-oss.
TOOL_TEMPLATES = ("qwen2_5", "qwen3", "llama3_1", "llama3_2", "gptoss")
TASK_A = "Restock SKU-1 by 4 units, then place an order of 2 units of SKU-1 for customer CUST-1"
TASK_B = "Restock SKU-2 by 1 unit, then place an order of 1 unit of SKU-2 for customer CUST-2"
# Written by Harbor 0.26 itself (see fixtures/harbor/README.md): terminus-2's trajectories call bash_command and
# mark_task_complete and define no tools. Tests copy it.
HARBOR = TESTS / "fixtures" / "harbor"
HARBOR_JOB = "terminus2-hello"
# What the description of a tool the trajectory did not define says (chat templates render it into the prompt)
INFERRED = (
    "Inferred from this trajectory's calls (it recorded no tool definitions): the arguments seen, typed where their "
    "values agree."
)
BASH_COMMAND = {"keystrokes": {"type": "string"}, "duration": {"type": "number"}}  # terminus-2's arguments
HANDSHAKE = [
    environment_step(1, "initialize", '{"serverInfo": {"name": "admin-console"}}'),
    environment_step(2, "tools/list", "list_inventory, restock"),
]


@functools.cache
def tokenizer(family: str) -> PreTrainedTokenizerFast:
    """A tokenizer with one word and the chat template TRL ships for `family` (rendering needs no vocabulary)."""
    vocabulary = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    made = PreTrainedTokenizerFast(
        tokenizer_object=vocabulary, unk_token="<unk>", bos_token="<|begin_of_text|>", eos_token="<|eot_id|>"
    )
    made.chat_template = getattr(chat_template_utils, f"{family}_chat_template")
    return made


def render_everywhere(row: dict) -> dict[str, dict[str, str]]:
    """Check `row` with TRL's data utilities and render it with every tool-calling template; return the texts."""
    assert is_conversational(row)
    rendered = {}
    for family in TOOL_TEMPLATES:
        processing_class = tokenizer(family)
        texts = maybe_apply_chat_template(row, processing_class, tools=row["tools"])
        if "messages" in row:
            whole = processing_class.apply_chat_template(row["messages"], tools=row["tools"] or None, tokenize=False)
            assert texts["text"] == whole
        else:
            assert texts["prompt"] and texts["chosen"] and texts["rejected"], family
        rendered[family] = texts
    return rendered


def inferred(name: str, properties: dict[str, dict]) -> dict:
    """A tool the trajectory did not define, as the TRL rows list it: inferred from the calls, and saying so."""
    parameters = {"type": "object", "properties": properties}
    return {"type": "function", "function": {"name": name, "description": INFERRED, "parameters": parameters}}


def assert_message_shape(messages: list[dict]) -> None:
    """OpenAI function-calling shape: every tool message answers the tool call just before it; ends on words."""
    pending: list[str] = []
    for message in messages:
        assert message["role"] in ("system", "user", "assistant", "tool")
        assert isinstance(message["content"], str)
        if message["role"] == "assistant":
            for call in message.get("tool_calls", []):
                assert call["type"] == "function" and isinstance(call["function"]["arguments"], dict)
            pending = [call["id"] for call in message.get("tool_calls", [])]
        elif message["role"] == "tool":
            assert message["tool_call_id"] in pending and message["name"]
    assert messages[-1]["role"] == "assistant" and "tool_calls" not in messages[-1]


def outcome(reward: float, task: str, steps: Sequence[Step | dict[str, Any]]) -> TrialOutcome:
    return TrialOutcome(
        status="succeeded" if reward == 1 else "failed",
        reward=reward,
        failure_category=None if reward == 1 else "wrong_quantity",
        stages={"stage_inventory": reward},
        steps=typed_steps(steps),
        log="opened admin-console",
        started_at=datetime.now(UTC),
        task=task,
    )


def solved() -> list[Step]:
    return [
        *HANDSHAKE,
        tool_step(3, "list_inventory", {}, "SKU-1  stock=3", message="Let me look first.", reasoning="stock?"),
        tool_step(4, "restock", {"sku": "SKU-1", "quantity": 4}, "restocked SKU-1: stock 3 -> 7"),
    ]


def two_calls_in_one_step() -> list[Step]:
    calls = [
        {"id": "a", "name": "list_inventory", "arguments": {}},
        {"id": "b", "name": "restock", "arguments": {"sku": "SKU-1", "quantity": 40}},
    ]
    results: list[dict[str, Any]] = [
        {"callId": "b", "content": [{"type": "text", "text": "restocked SKU-1"}]},
        {"callId": "a", "content": "x"},
    ]
    return [*HANDSHAKE, step(3, source="agent", tool="list_inventory", calls=calls, results=results, message="Both.")]


SEED_SHAPED = [  # stored before steps were structured: read once by domain.trajectory.structured
    {"step": 1, "tool": "mcp", "command": "initialize", "observation": "{}"},
    {"step": 2, "tool": "restock", "command": 'restock {"sku": "SKU-2", "quantity": 1}', "observation": "restocked"},
]


@pytest.fixture
def mixed(database, viewer):
    """One version: task A scored 1, 0.25 (two calls in one step), 0 (no steps); task B 0.5 twice (a tie) and a
    seed-shaped 0.2; another version with a single rollout."""
    catalog = make_catalog(database, viewer.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=6)
    trials: Iterator[tuple[str, Sequence[Step | dict[str, Any]]]] = iter(
        [
            (TASK_A, solved()),
            (TASK_A, two_calls_in_one_step()),
            (TASK_A, []),
            (TASK_B, solved()),
            (TASK_B, SEED_SHAPED),
            (TASK_B, solved()),
        ]
    )
    _, ids = record_rewards(database, catalog, [1.0, 0.25, 0.0, 0.5, 0.2, 0.5], lambda r: outcome(r, *next(trials)))
    single = make_catalog(database, viewer.org.id, {"kind": "scripted"}, attempt_count=1, config_name="single")
    record_rewards(database, single, [0.7], lambda r: outcome(r, TASK_A, solved()))
    return catalog, ids


@pytest.fixture
def logged_in(client, auth, viewer):
    auth.login(viewer.email)
    return client


def export(client, **params) -> list[dict]:
    response = client.get("/api/v1/rollouts", query_string=params)
    assert response.status_code == 200, response.data[:300]
    return [json.loads(line) for line in response.get_data(as_text=True).splitlines()]


def test_trl_pairs_compare_one_task_on_one_version(logged_in, database, mixed):
    catalog, ids = mixed
    pairs = export(logged_in, kind="preference", format="trl")
    # Task A: 1 versus 0.25 (the 0 has no agent turn, so it is in no training pair); task B: 0.5 (the later of
    # the tie) versus 0.2; the single-rollout version: none.
    assert [p["prompt"] for p in pairs] == [
        [{"role": "user", "content": TASK_A}],
        [{"role": "user", "content": TASK_B}],
    ]
    query = preference_pairs_sql(catalog.org_id, TrialFilters(), within_task=True)
    with database.session(catalog.org_id) as session:
        found = session.execute(text(query.sql), query.params).all()
    assert [(p.preferred_id, p.rejected_id) for p in found] == [(ids[0], ids[1]), (ids[5], ids[4])]
    assert [(p.preferred_reward, p.rejected_reward) for p in found] == [(1.0, 0.25), (0.5, 0.2)]
    for pair in pairs:
        assert set(pair) == {"prompt", "chosen", "rejected", "tools"}
        assert pair["chosen"] and pair["rejected"] and pair["chosen"] != pair["rejected"]
        for side in ("chosen", "rejected"):
            assert_message_shape(pair["prompt"] + pair[side])
        render_everywhere(pair)
    # The plain preference line keeps the seed's meaning: per version, highest versus lowest, whatever the task.
    (plain,) = export(logged_in, kind="preference", environmentVersionId=catalog.version_id)
    assert (plain["preferred"]["rolloutId"], plain["rejected"]["rolloutId"]) == (str(ids[0]), str(ids[2]))


def test_trl_messages_use_the_function_calling_shape(logged_in, mixed):
    rows = export(logged_in, kind="all", format="trl")  # task A's 0 has no step: no turn of the agent, no row
    assert len(rows) == 6 and all(set(row) == {"messages", "tools"} for row in rows)
    by_task = {(row["messages"][0]["content"], len(row["messages"])): row for row in rows}
    solved_row = by_task[(TASK_A, 6)]
    assert solved_row["messages"] == [
        {"role": "user", "content": TASK_A},
        {
            "role": "assistant",
            "content": "Let me look first.",
            "tool_calls": [
                {"id": "call_3", "type": "function", "function": {"name": "list_inventory", "arguments": {}}}
            ],
        },  # its reasoning ("stock?") is in the ATIF export: gpt-oss takes text or reasoning on a call, not both
        {"role": "tool", "tool_call_id": "call_3", "name": "list_inventory", "content": "SKU-1  stock=3"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_4",
                    "type": "function",
                    "function": {"name": "restock", "arguments": {"sku": "SKU-1", "quantity": 4}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_4", "name": "restock", "content": "restocked SKU-1: stock 3 -> 7"},
        {"role": "assistant", "content": CLOSING_TURN},  # the export's closing turn, not the agent's words
    ]
    # These trials recorded no offered tools: the column lists the functions called, inferred from the calls
    assert solved_row["tools"] == [
        inferred("list_inventory", {}),
        inferred("restock", {"sku": {"type": "string"}, "quantity": {"type": "integer"}}),
    ]
    two = next(r for r in rows if r["messages"][1]["content"] == "Both.")
    assert [m["role"] for m in two["messages"]] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m.get("tool_call_id") for m in two["messages"] if m["role"] == "tool"] == ["a", "b"]
    assert two["messages"][2]["content"] == "x" and two["messages"][4]["content"] == "restocked SKU-1"
    assert not [r for r in rows if len(r["messages"]) == 2]  # never the task and the closing turn alone
    for row in rows:
        assert not any("initialize" in str(m.get("content")) for m in row["messages"])  # environment steps: no turns
        assert_message_shape(row["messages"])
        render_everywhere(row)


def test_rendered_text_holds_the_calls_and_results(logged_in, mixed):
    (row,) = [r for r in export(logged_in, kind="successful", format="trl")]
    texts = render_everywhere(row)
    for family, rendered in texts.items():
        assert "restock" in rendered["text"] and "SKU-1" in rendered["text"], family
        assert "stock 3 -> 7" in rendered["text"] and CLOSING_TURN in rendered["text"], family


def test_the_offered_tools_become_json_schemas():
    from types import SimpleNamespace

    offered = [
        {
            "name": "restock",
            "description": "Add stock",
            "parameters": {"sku": "string", "quantity": "integer"},
            "inputSchema": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        },
        {"name": "list_inventory", "description": "List", "parameters": {"filter": "string"}},
    ]
    row = SimpleNamespace(task="t", steps=[step.to_stored() for step in typed_steps(solved())], tools=offered)
    assert trl_conversation(row)["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "restock",
                "description": "Add stock",
                "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "list_inventory",
                "description": "List",
                "parameters": {"type": "object", "properties": {"filter": {"type": "string"}}, "required": ["filter"]},
            },
        },
    ]


def test_called_tools_are_inferred_with_the_types_their_values_agree_on():
    from types import SimpleNamespace

    calls: list[dict[str, Any]] = [
        {"id": "1", "name": "search", "arguments": {"query": "socks", "limit": 3}},
        {"id": "2", "name": "search", "arguments": {"query": 42, "limit": 2.5, "exact": True}},
        {"id": "3", "name": "open", "arguments": {"path": "/a", "lines": [1, 2], "options": {"raw": True}}},
        {"id": "4", "name": "search", "argumentsText": "not json"},  # no arguments: adds none, lists it once
    ]
    steps = [step(1, source="agent", tool="search", calls=calls, results=[])]
    row = SimpleNamespace(task="t", steps=[s.to_stored() for s in typed_steps(steps)], tools=[])
    assert trl_conversation(row)["tools"] == [
        inferred("search", {"query": {}, "limit": {"type": "number"}, "exact": {"type": "boolean"}}),
        inferred("open", {"path": {"type": "string"}, "lines": {"type": "array"}, "options": {"type": "object"}}),
    ]


def harbor_rows(client, auth, runner, make_member, job) -> tuple[list[dict], list[dict]]:
    """Import the Harbor job `job` into a new organization; its TRL rows (kind=all) and preference rows."""
    member = make_member("olga@acme.test", "Acme RL", "owner")
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 0, result.output
    auth.login(member.email)
    return export(client, kind="all", format="trl"), export(client, kind="preference", format="trl")


def first_words(row: dict) -> str:
    """The agent's first words in a TRL row, which tell terminus-2's trials of the fixture apart."""
    return next(m["content"] for m in row["messages"] if m["role"] == "assistant")


def harbor_trajectories(job) -> dict[str, dict]:
    """Each trial's ATIF trajectory, by the agent's first words."""
    documents = [json.loads(path.read_text()) for path in sorted(job.glob("*/agent/trajectory.json"))]
    return {next(s["message"] for s in d["steps"] if s["source"] == "agent"): d for d in documents}


def called(document: dict) -> list[str]:
    """The functions a trajectory calls, in the order first called."""
    names = [call["function_name"] for s in document["steps"] for call in s.get("tool_calls") or []]
    return list(dict.fromkeys(names))


def test_an_imported_job_without_tool_definitions_lists_the_called_functions_as_inferred_tools(
    client, auth, runner, make_member
):
    rows, pairs = harbor_rows(client, auth, runner, make_member, HARBOR / HARBOR_JOB)
    trajectories = harbor_trajectories(HARBOR / HARBOR_JOB)
    assert len(rows) == len(trajectories) == 4
    schemas = {"bash_command": BASH_COMMAND, "mark_task_complete": {}}
    for row in rows:
        document = trajectories[first_words(row)]
        assert "tool_definitions" not in document["agent"]
        assert row["tools"] == [inferred(name, schemas[name]) for name in called(document)]
        assert_message_shape(row["messages"])
        for family, rendered in render_everywhere(row).items():
            assert INFERRED in rendered["text"], family  # the template rendered the inferred tools
    (pair,) = pairs  # one task, rewards 1 and 0: the latest 1 against the earliest 0
    sides = [pair["chosen"], pair["rejected"]]
    names = {c["function"]["name"] for side in sides for m in side for c in m.get("tool_calls", [])}
    assert {t["function"]["name"] for t in pair["tools"]} == names
    assert all(t["function"]["description"] == INFERRED for t in pair["tools"])
    for family, rendered in render_everywhere(pair).items():
        assert INFERRED in rendered["prompt"], family


def test_a_trajectory_that_defines_its_tools_keeps_them_and_the_others_get_inferred_ones(
    client, auth, runner, make_member, tmp_path
):
    job = writable_copy(HARBOR / HARBOR_JOB, tmp_path / HARBOR_JOB)
    definitions = [
        {
            "type": "function",
            "function": {
                "name": "bash_command",
                "description": "Send keystrokes to the terminal.",
                "parameters": {
                    "type": "object",
                    "properties": {"keystrokes": {"type": "string"}, "duration": {"type": "number"}},
                    "required": ["keystrokes"],
                },
            },
        }
    ]
    path = sorted(job.glob("*/agent/trajectory.json"))[0]
    document = json.loads(path.read_text())
    document["agent"]["tool_definitions"] = definitions  # defines bash_command only, though it also calls another
    path.write_text(json.dumps(document))
    defining = next(s["message"] for s in document["steps"] if s["source"] == "agent")
    assert called(document) == ["bash_command", "mark_task_complete"]
    rows, _ = harbor_rows(client, auth, runner, make_member, job)
    assert len(rows) == 4
    by_words = {first_words(row): row for row in rows}
    assert by_words.pop(defining)["tools"] == definitions  # as defined: mark_task_complete is not added
    trajectories = harbor_trajectories(job)
    schemas = {"bash_command": BASH_COMMAND, "mark_task_complete": {}}
    for words, row in by_words.items():
        assert row["tools"] == [inferred(name, schemas[name]) for name in called(trajectories[words])]
        render_everywhere(row)


def test_gemma3_cannot_render_tool_calls_by_trls_own_check():
    """Gemma 3's template has no tool role ("Conversation roles must alternate"): TRL says so too."""
    assert not chat_template_utils.supports_tool_calling(tokenizer("gemma3"))
    assert all(chat_template_utils.supports_tool_calling(tokenizer(family)) for family in TOOL_TEMPLATES)


def test_atif_documents_come_from_structured_steps(logged_in, mixed):
    documents = export(logged_in, kind="all", format="atif")
    assert len(documents) == 7
    for document in documents:
        Trajectory.model_validate(document)
        for item in document["steps"]:
            assert item["source"] == "agent" or "tool_calls" not in item
    solved_doc = next(d for d in documents if d["extra"]["reward"] == 1.0)
    sources = [(s["source"], s["message"]) for s in solved_doc["steps"][:3]]
    assert sources == [("user", TASK_A), ("system", "mcp initialize"), ("system", "mcp tools/list")]
    assert solved_doc["steps"][2]["observation"]["results"][0]["content"] == "list_inventory, restock"
    first_call = solved_doc["steps"][3]
    assert first_call["message"] == "Let me look first." and first_call["reasoning_content"] == "stock?"
    assert first_call["tool_calls"][0] == {"tool_call_id": "call_3", "function_name": "list_inventory", "arguments": {}}
    assert first_call["observation"]["results"][0]["source_call_id"] == "call_3"
    two = next(d for d in documents if d["extra"]["reward"] == 0.25)["steps"][3]
    assert [c["function_name"] for c in two["tool_calls"]] == ["list_inventory", "restock"]
    assert [r["source_call_id"] for r in two["observation"]["results"]] == ["b", "a"]


@pytest.mark.slow
def test_every_trl_row_of_a_demo_database_renders(client, auth, database, tmp_path, runner):
    """The demo's organizations after the worker ran them, plus a command agent and imported rollouts."""
    from tests.factories import command_agent
    from worker.loop import WorkerSettings, run_workers
    from writes.demo import DEMO_PASSWORD, create_demo

    create_demo(database)
    with database.admin_session() as session:
        org_id = session.execute(text("SELECT id FROM organizations WHERE name = 'Acme RL'")).scalar()
    solver = make_catalog(database, org_id, command_agent("solver.py"), attempt_count=2, config_name="solver")
    from models import EnvironmentVersion, EvaluatorConfig
    from writes.runs import enqueue_run

    with database.session(org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org_id, solver.version_id))
        enqueue_run(session, version, session.get_one(EvaluatorConfig, (org_id, solver.config_id)))
    run_workers(database, WorkerSettings(), threading.Event(), concurrency=4, until_idle=True)
    result = runner.invoke(args=["import-harbor", "tests/fixtures/harbor/terminus2-hello", "--org", "Acme RL"])
    assert result.exit_code == 0, result.output
    auth.login("demo@acme.test", DEMO_PASSWORD)

    pairs = export(client, kind="preference", format="trl")
    assert pairs
    for pair in pairs:
        assert pair["chosen"] and pair["rejected"]
        render_everywhere(pair)
    rows = export(client, kind="all", format="trl")
    assert len(rows) > 50
    for row in rows:
        assert_message_shape(row["messages"])
        render_everywhere(row)
    documents = export(client, kind="all", format="atif")
    for document in documents:
        Trajectory.model_validate(document)
    agents = {d["agent"]["name"] for d in documents}
    assert "solver" in agents and any("terminus" in name for name in agents), agents
    assert any(s["message"] == "mcp initialize" for d in documents for s in d["steps"])  # MCP rollouts are in it
