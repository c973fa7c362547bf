"""JSON nested deep, on every way in: 65 and 10,000 levels are refused cleanly (the limit is 64), nothing is
written, no answer is a 500, and a row stored deeper before the rule still exports whole with every line JSON."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from domain.json_depth import MAX_JSON_DEPTH, MAX_STORED_JSON_DEPTH, OMITTED, TooDeep, loads, loads_stored
from domain.trajectory import Step, storable, structured
from tests.factories import command_agent, finish_run, finished_outcome, make_catalog
from tests.helpers import parse, table_counts
from tests.paths import TESTS
from worker.loop import WorkerSettings, run_workers
from worker.masking import Masker
from worker.trial import run_trial

DEPTHS = (MAX_JSON_DEPTH + 1, 10_000)
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"
KINDS_AND_FORMATS = [
    f"/api/v1/rollouts?kind={kind}&format={export_format}"
    for kind in ("all", "failed", "preference")
    for export_format in ("atif-shaped", "atif", "trl")
]


def arrays(levels: int) -> str:
    """JSON text of arrays nested `levels` deep."""
    return "[" * levels + "]" * levels


def nested_value(levels: int) -> list:
    """Python lists nested `levels` deep, built without recursion."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def text_depth(text: str) -> int:
    """How deep JSON text nests (for texts whose strings hold no brackets)."""
    deepest = depth = 0
    for char in text:
        depth += (char in "[{") - (char in "]}")
        deepest = max(deepest, depth)
    return deepest


def deep_json(template: dict, depth: int) -> str:
    """`template` as JSON text with its "DEEP" value replaced by arrays, so that the whole nests `depth` levels."""
    text = json.dumps(template)
    before = text[: text.index('"DEEP"')]
    around = sum((char in "[{") - (char in "]}") for char in before)
    return text.replace('"DEEP"', arrays(depth - around))


def every_line_json(body: bytes) -> list:
    """Each NDJSON line parsed by Python's own json module (which recurses: a line too deep for it fails here)."""
    return [json.loads(line) for line in body.splitlines()]


# The rule itself


@pytest.mark.parametrize("depth", DEPTHS)
def test_loads_refuses_nesting_past_the_limit_naming_where(depth):
    assert loads(f'{{"spec": {{"x": {arrays(MAX_JSON_DEPTH - 2)}}}}}')  # 64 levels in all: kept
    with pytest.raises(TooDeep) as refused:
        loads(f'{{"spec": {{"x": {arrays(depth - 2)}}}}}')
    assert refused.value.field == "spec" and str(refused.value) == f"{TOO_DEEP} (at spec.x.0.0.…)"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH * 2 + 1, 10_000, 100_000])
def test_a_stored_value_too_deep_reads_with_its_deep_part_left_out(depth):
    value = loads_stored(f'{{"kept": [1, "two"], "deep": {arrays(depth - 1)}}}'.encode())
    assert value["kept"] == [1, "two"]
    assert OMITTED in json.dumps(value) and json.loads(json.dumps(value)) == value  # any reader parses it


@pytest.mark.parametrize("depth", DEPTHS)
def test_masking_and_storing_walk_any_nesting_without_recursion(depth):
    deep = {"secret-value here": nested_value(depth), "nan": float("nan"), "nul": "a\x00b"}
    masked = Masker(["secret-value"]).data(deep)
    assert "***" in next(iter(masked)) and "secret-value" not in next(iter(masked))
    stored = storable(deep)
    assert stored["nan"] == "NaN" and stored["nul"] == "a\ufffdb"
    level, levels = stored["secret-value here"], 1
    while level:
        level, levels = level[0], levels + 1
    assert levels == depth


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_seed_shaped_steps_command_too_deep_to_parse_is_kept_as_text(depth):
    command = f"bash {arrays(depth)}"
    step = structured({"step": 1, "tool": "bash", "command": command, "observation": "ok"})
    assert step.tool_calls is not None and step.tool_calls[0].arguments == {"command": command}


# The API


def post(api, url: str, body: str):
    return api.post(url, data=body, content_type="application/json")


@pytest.mark.bad_input
@pytest.mark.parametrize("depth", DEPTHS)
def test_api_bodies_nested_too_deep_answer_400_naming_the_field_and_write_nothing(api, database, count_rows, depth):
    catalog = make_catalog(database, api.org.id, {"kind": "scripted"}, attempt_count=1)
    run = api.post(
        "/api/v1/evaluation-runs",
        {"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)},
    ).json
    before = table_counts(count_rows, api.org.id)
    agent = {"kind": "openai-chat", "baseUrl": "http://127.0.0.1:9/v1", "model": "m", "extraBody": "DEEP"}
    versions = f"/api/v1/environments/{catalog.environment_id}/versions"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("/api/v1/environments", {"name": "e", "description": {"x": "DEEP"}}, "description"),
        (versions, {"spec": {"kind": "external", "x": "DEEP"}}, "spec"),
        ("/api/v1/evaluator-configs", {"name": "c", "attemptCount": 1, "agent": agent}, "agent"),
        ("/api/v1/evaluation-runs", {"environmentVersionId": {"x": "DEEP"}}, "environmentVersionId"),
        (f"/api/v1/evaluation-runs/{run['id']}/reset", {"mode": {"x": "DEEP"}}, "mode"),
    ]  # fmt: skip
    for url, template, field in cases:
        body = deep_json(template, depth)
        assert text_depth(body) == depth
        response = post(api, url, body)
        assert response.status_code == 400, (url, response.get_data(as_text=True)[:200])
        assert response.json["error"] == "invalid JSON body" and response.json["field"] == field
        assert response.json["detail"].startswith(f"{field}: {TOO_DEEP} (at {field}.")
    assert table_counts(count_rows, api.org.id) == before


@pytest.mark.bad_input
@pytest.mark.parametrize("depth", [65, 900, 10_000])
def test_an_external_spec_nested_deep_writes_no_version(api, count_rows, depth):
    environment = api.post("/api/v1/environments", {"name": "imported"}).json
    body = deep_json({"spec": {"kind": "external", "x": "DEEP"}}, depth)
    response = post(api, f"/api/v1/environments/{environment['id']}/versions", body)
    assert response.status_code == 400 and response.json["field"] == "spec"
    assert count_rows("environment_versions", api.org.id) == 0
    within = deep_json({"spec": {"kind": "external", "x": "DEEP"}}, MAX_JSON_DEPTH)  # 64 levels: a version
    assert post(api, f"/api/v1/environments/{environment['id']}/versions", within).status_code == 201


# NDJSON ingest


def ingest_line(**extra) -> dict:
    return {
        "externalId": "x-1",
        "environment": {"name": "count-lines", "spec": {"kind": "external", "task": "count"}},
        "attempt": 1,
        "reward": 0.5,
        **extra,
    }


@pytest.mark.bad_input
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("where", ["trajectory", "environment"])
def test_an_import_line_nested_too_deep_answers_400_with_line_and_field_and_writes_nothing(
    api, count_rows, depth, where
):
    good = json.dumps(ingest_line())
    if where == "trajectory":
        bad = deep_json(ingest_line(externalId="x-2", trajectory={"steps": "DEEP"}), depth)
    else:
        bad = deep_json(
            ingest_line(externalId="x-2", environment={"name": "n", "spec": {"kind": "external", "task": "DEEP"}}),
            depth,
        )
    assert text_depth(bad) == depth
    before = table_counts(count_rows, api.org.id)
    response = api.post("/api/v1/evaluation-runs/import", data=f"{good}\n{bad}\n", content_type="application/x-ndjson")
    assert response.status_code == 400
    assert (response.json["error"], response.json["line"], response.json["field"]) == ("invalid line", 2, where)
    assert response.json["detail"].startswith(f"line 2, {where}: {TOO_DEEP} (at {where}.")
    assert table_counts(count_rows, api.org.id) == before


@pytest.mark.parametrize("depth", DEPTHS)
def test_an_imported_seed_shaped_command_too_deep_to_parse_imports_and_exports(api, depth):
    command = f"bash {arrays(depth)}"
    line = ingest_line(trajectory={"steps": [{"step": 1, "tool": "bash", "command": command, "observation": "ok"}]})
    response = api.post(
        "/api/v1/evaluation-runs/import", data=json.dumps(line) + "\n", content_type="application/x-ndjson"
    )
    assert response.status_code == 201
    for url in KINDS_AND_FORMATS:
        exported = api.get(url)
        assert exported.status_code == 200 and every_line_json(exported.data) is not None


# Harbor


@pytest.fixture
def harbor_job(tmp_path) -> Path:
    shutil.copytree(TESTS / "fixtures" / "harbor", tmp_path / "harbor")
    return tmp_path / "harbor" / "terminus2-hello"


@pytest.mark.bad_input
@pytest.mark.parametrize("depth", [*DEPTHS, 100_000])
@pytest.mark.parametrize("name", ["result.json", "agent/trajectory.json", "verifier/reward.json"])
def test_a_harbor_file_nested_too_deep_is_one_error_line_and_nothing_is_written(
    harbor_job, runner, make_org, count_rows, depth, name
):
    org = make_org("Acme RL")
    trial = sorted(path for path in harbor_job.iterdir() if (path / "result.json").exists())[1]
    if name == "verifier/reward.json":  # read when result.json holds no reward
        result = json.loads((trial / "result.json").read_text())
        del result["verifier_result"]
        (trial / "result.json").write_text(json.dumps(result))
    (trial / name).write_text(f'{{"x": {arrays(depth - 1)}}}')
    result = runner.invoke(args=["import-harbor", str(harbor_job), "--org", "Acme RL"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)  # no traceback
    assert result.output == (
        f"Error: {trial.name}/{name}: is {TOO_DEEP}; refused, nothing imported\n"
    )  # the path inside is the file's content: not shown
    assert count_rows("evaluation_trials", org) == 0 and count_rows("environments", org) == 0


# Rows stored deeper before the rule, and pages


def store_steps(owner_engine, org_id, trial_number: int, steps: str) -> None:
    """Write a trial's steps directly, as the owner role (a row from before the rule, or written by hand)."""
    with owner_engine.begin() as connection:
        connection.execute(text("SELECT set_config('app.current_org', :org, true)"), {"org": str(org_id)})
        connection.execute(
            text("UPDATE evaluation_trials SET steps = CAST(:steps AS jsonb) WHERE trial_number = :n"),
            {"steps": steps, "n": trial_number},
        )


@pytest.mark.fault
@pytest.mark.parametrize("depth", [100, 300, 10_000])
def test_a_row_stored_too_deep_exports_whole_with_every_line_json(member, client, auth, database, owner_engine, depth):
    """Arguments nested `depth` levels sit 5 levels down the steps: up to 128 in all they export as stored."""
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=4)
    finish_run(database, catalog)  # trials 1, 2 and 4 fail, 3 succeeds
    steps = [{"step": 1, "tool": "t", "command": "t", "observation": "o", "source": "agent",
              "toolCalls": [{"id": "c1", "name": "t", "arguments": {"a": "DEEP"}}]}]  # fmt: skip
    store_steps(owner_engine, member.org.id, 1, json.dumps(steps).replace('"DEEP"', arrays(depth)))
    auth.login(member.email)
    for url in KINDS_AND_FORMATS:
        response = client.get(url)
        assert response.status_code == 200, url
        lines = every_line_json(response.data)
        expected = 1 if "preference" in url else 3 if "failed" in url else 4
        assert len(lines) == expected, url
        left_out = depth + 5 > MAX_STORED_JSON_DEPTH
        if url.endswith("atif-shaped") and "preference" not in url:  # PostgreSQL writes it: the steps left out
            (deep,) = [line for line in lines if line["trialNumber"] == 1]
            assert ("trajectory" in deep) != left_out
            if left_out:
                assert deep["trajectoryOmitted"] == f"its steps are {OMITTED[1:-1]}"
        elif not url.endswith("atif-shaped"):  # the arguments kept down to 128 levels, then the placeholder
            assert response.get_data(as_text=True).count(OMITTED) == left_out, url
    with database.session(member.org.id) as session:
        trial_id = session.execute(text("SELECT id FROM evaluation_trials WHERE trial_number = 1")).scalar()
    page = client.get(f"/trials/{trial_id}")
    assert page.status_code == 200


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 300, 8000])
def test_an_observation_holding_deep_json_text_shows_on_the_trial_page(member, client, auth, database, depth):
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=1)

    def outcome(number, seed):
        finished = finished_outcome("admin-console", number, seed)
        finished.steps = [Step.from_stored({"step": 1, "tool": "t", "command": "t", "observation": arrays(depth)})]
        return finished

    finish_run(database, catalog, outcome)
    auth.login(member.email)
    with database.session(member.org.id) as session:
        trial_id = session.execute(text("SELECT id FROM evaluation_trials")).scalar()
    page = client.get(f"/trials/{trial_id}")
    assert page.status_code == 200
    trees = parse(page.text).select(".observation.json-tree")
    assert bool(trees) == (depth <= MAX_JSON_DEPTH)  # deeper: shown as text


# Programs the worker runs: a command agent, an MCP server, a verifier


def work(database) -> int:
    return run_workers(database, WorkerSettings(), threading.Event(), concurrency=1, until_idle=True)


@pytest.mark.slow  # starts agent processes
@pytest.mark.bad_input
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, *DEPTHS])
def test_an_agent_line_nested_too_deep_is_a_protocol_error_recorded_once(member, client, auth, database, depth):
    from tests.helpers import queue

    catalog = make_catalog(database, member.org.id, command_agent("deep.py", "line", str(depth)), attempt_count=1)
    queue(database, catalog)
    assert work(database) == 1
    with database.session(member.org.id) as session:
        run = session.execute(text("SELECT status, attempts, error FROM evaluation_runs")).one()
        trial = session.execute(text("SELECT failure_category, log_excerpt, steps FROM evaluation_trials")).one()
    assert (run.status, run.attempts, run.error) == ("completed", 1, None)
    if depth <= MAX_JSON_DEPTH:
        assert trial.failure_category != "agent_protocol_error"
        assert any(step.get("tool") == "list_inventory" for step in trial.steps)  # the call, its arguments kept
    else:
        assert trial.failure_category == "agent_protocol_error"
        assert f"agent_protocol_error: agent printed a line {TOO_DEEP} (at args.a.0.0.…)" in trial.log_excerpt
    auth.login(member.email)
    turnless = depth > MAX_JSON_DEPTH  # the agent's only line was refused: no turn of its own for a TRL row
    for url in KINDS_AND_FORMATS:
        response = client.get(url)
        trl_left_out = turnless and url.endswith("format=trl") and "preference" not in url
        expected = 0 if "preference" in url or trl_left_out else 1
        assert response.status_code == 200 and len(every_line_json(response.data)) == expected, url
        if trl_left_out:
            assert response.headers["X-Rows-Without-Agent-Turn"] == "1"


@pytest.mark.slow  # starts agent processes
@pytest.mark.bad_input
@pytest.mark.parametrize("depth", DEPTHS)
def test_call_arguments_given_as_json_text_nested_too_deep_are_refused_as_the_calls_result(database, make_org, depth):
    org = make_org("Acme RL")
    catalog = make_catalog(database, org.id, command_agent("deep.py", "args-text", str(depth)), attempt_count=1)
    from tests.helpers import queue

    queue(database, catalog)
    assert work(database) == 1
    with database.session(org.id) as session:
        steps = session.execute(text("SELECT steps FROM evaluation_trials")).scalar()
    call = next(step for step in steps if step.get("toolCalls"))
    assert call["observation"].startswith(f"error: the arguments of list_inventory are {TOO_DEEP} (at a.0.0.0.…)")
    kept = call["toolCalls"][0]
    assert kept["arguments"] == {} and isinstance(kept["argumentsText"], str)  # the text kept, never sent


DEEP_SERVER = str(TESTS / "mcp" / "deep_server.py")
FIRST_TOOL = [sys.executable, str(TESTS / "agents" / "first_tool.py")]


@pytest.mark.slow  # MCP server processes
@pytest.mark.bad_input
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("schema", "environment could not start: RuntimeError: the MCP server printed a JSON-RPC line {} "
                   "(at result.tools.0.inputSchema.…); it was stopped"),
        ("result", "environment raised: RuntimeError: the MCP server printed a JSON-RPC line {} "
                   "(at result.content.0._meta.…); it was stopped"),
        ("verifier", "environment could not score: ValueError: the verifier printed JSON {} (at 0.0.0.0.…)"),
        ("task", "environment could not start: ValueError: the MCP server's task data (AGENTFORGE_TASK_DATA:) "
                 "is {} (at 0.0.0.0.…)"),
    ],
)  # fmt: skip
def test_an_mcp_server_or_verifier_nesting_too_deep_ends_the_trial_as_an_environment_error(where, said, depth):
    spec = {"kind": "mcp", "command": ["python", DEEP_SERVER, where, str(depth)], "verifier": {"tool": "score"}}
    outcome = run_trial(spec, {"kind": "command", "argv": FIRST_TOOL}, world_seed=1, seed=1, max_steps=3, timeout_s=20)
    assert (outcome.status, outcome.failure_category) == ("error", "environment_error")
    assert said.format(TOO_DEEP) in outcome.log
    json.dumps(storable(outcome.stored_steps()))  # what is recorded nests no deeper than the rule


@pytest.mark.slow  # MCP server processes
def test_an_mcp_server_within_the_limit_is_recorded_with_what_it_sent():
    spec = {
        "kind": "mcp",
        "command": ["python", DEEP_SERVER, "result", str(MAX_JSON_DEPTH)],
        "verifier": {"tool": "score"},
    }
    outcome = run_trial(spec, {"kind": "command", "argv": FIRST_TOOL}, world_seed=1, seed=1, max_steps=3, timeout_s=20)
    assert (outcome.status, outcome.reward) == ("succeeded", 1.0)
    poke = next(step.to_stored() for step in outcome.steps if step.tool == "poke")
    assert "_meta" in poke["results"][0]["content"][0]
