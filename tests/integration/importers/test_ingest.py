"""Ingest from other harnesses: NDJSON import, idempotent re-posts, Harbor job directories, ATIF round trip."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bench.generate import check_rollups
from domain.outcome import OBSERVATION_CAP_CHARS
from queries.training_formats import INFERRED_TOOL
from queries.trials import TRAJECTORY_BODY
from tests.helpers import api_ids, import_ndjson, line, ndjson, texts
from tests.paths import TESTS

ATIF = json.loads((TESTS / "fixtures" / "atif-v1.7-example.json").read_text())


IMPORTED_TABLES = ("evaluation_runs", "evaluation_trials", "rollouts", "artifacts", "environments")


def counts(count_rows, org) -> dict[str, int]:
    """Rows of every table an import writes, as the organization sees them."""
    return {t: count_rows(t, org) for t in IMPORTED_TABLES}


def test_import_writes_what_the_worker_writes(api, database, count_rows):
    body = ndjson(
        line("x-1", 1, 1.0, trajectory=ATIF),
        line(
            "x-2", 2, 0.5, trajectory={"steps": [{"step": 1, "tool": "bash", "command": "wc -l", "observation": "41"}]}
        ),
        line("x-3", 3, 0.0),
    )
    response = import_ndjson(api, body)
    assert response.status_code == 201, response.json
    assert response.json["imported"] == 3 and response.json["skipped"] == 0 and len(response.json["runs"]) == 1
    run = api.client.get(f"/api/v1/evaluation-runs/{response.json['runs'][0]}").json
    assert run["status"] == "completed" and run["attemptCount"] == 3
    assert run["passAtK"] == {"1": pytest.approx(1 / 3, abs=1e-6), "2": pytest.approx(2 / 3, abs=1e-6), "3": 1.0}
    assert [t["trialNumber"] for t in run["trials"]] == [1, 2, 3]
    assert run["trials"][1]["stages"] == {"stage_counted": 1.0, "stage_written": 0.5}
    assert counts(count_rows, api.org.id) == {
        "evaluation_runs": 1,
        "evaluation_trials": 3,
        "rollouts": 3,
        "artifacts": 4,
        "environments": 1,
    }  # + the original ATIF document
    assert check_rollups(database) == []
    failed = api.client.get("/api/v1/rollouts?kind=failed").get_data(as_text=True).splitlines()
    assert len(failed) == 2 and json.loads(failed[0])["trajectory"][0]["command"] == "wc -l"
    gap = api.client.get("/capability-gap").text
    assert "wrong_answer" in gap


def test_reposting_is_idempotent(api, count_rows):
    body = ndjson(line("x-1", 1, 1.0), line("x-2", 2, 0.0))
    assert import_ndjson(api, body).json["imported"] == 2
    again = import_ndjson(api, body)
    assert again.status_code == 200 and again.json == {"imported": 0, "skipped": 2, "runs": [], "differing": []}
    more = import_ndjson(api, ndjson(line("x-1", 1, 1.0), line("x-3", 1, 0.5)))
    assert more.json["imported"] == 1 and more.json["skipped"] == 1
    assert counts(count_rows, api.org.id)["evaluation_trials"] == 3


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda item: item.update(reward=1.5), "reward"),
        (lambda item: item.update(attempt=9), "attempt"),
        (lambda item: item.pop("externalId"), "externalId"),
        (lambda item: item.update(stages={"accuracy": 1}), "stages"),
        (lambda item: item["environment"].update(spec={"kind": "builtin", "environment": "nope"}), "environment.spec"),
        (
            lambda item: item.update(
                trajectory={
                    "schema_version": "ATIF-v1.7",
                    "agent": {"name": "a", "version": "1"},
                    "steps": [{"step_id": 2, "source": "user", "message": "hi"}],
                }
            ),
            "trajectory",
        ),
        (lambda item: item.update(trajectory=[{"step": 1, "tool": "bash"}]), "trajectory.steps.0"),
        (lambda item: item.update(unexpected=True), "unexpected"),
    ],
)
def test_any_invalid_line_rejects_the_whole_request_naming_line_and_field(api, mutate, field, count_rows):
    bad = line("x-2", 2, 0.5)
    mutate(bad)
    response = import_ndjson(api, ndjson(line("x-1", 1, 1.0), bad))
    assert response.status_code == 400, response.json
    assert response.json["line"] == 2 and response.json["field"].startswith(field)
    assert "line 2" in response.json["detail"]
    assert counts(count_rows, api.org.id)["evaluation_trials"] == 0


@pytest.mark.parametrize("body", ["", "not json\n", "[1]\n", json.dumps(line("a", 1, 1.0)) + "\n{\n"])
def test_unparseable_bodies_answer_400(api, body, count_rows):
    assert import_ndjson(api, body).status_code == 400
    assert counts(count_rows, api.org.id)["evaluation_trials"] == 0


def test_duplicate_attempts_in_one_run_are_refused(api, count_rows):
    response = import_ndjson(api, ndjson(line("x-1", 1, 1.0), line("x-2", 1, 0.0)))
    assert response.status_code == 400 and response.json["field"] == "attempt" and response.json["line"] == 2
    assert counts(count_rows, api.org.id)["evaluation_trials"] == 0


@pytest.mark.bad_input
def test_one_external_id_twice_in_a_body_is_refused_naming_both_lines(api, count_rows):
    body = ndjson(line("x-1", 1, 1.0), line("x-2", 2, 0.0), line("x-1", 3, 0.5))
    for _ in range(2):  # the same answer each time: nothing was written, so posting again cannot help
        response = import_ndjson(api, body)
        assert response.status_code == 400 and response.json["field"] == "externalId"
        assert response.json["line"] == 3 and "'x-1' is also the externalId of line 1" in response.json["detail"]
    assert counts(count_rows, api.org.id)["evaluation_trials"] == 0


def test_imported_atif_round_trips_through_the_atif_export(api):
    assert import_ndjson(api, ndjson(line("x-1", 1, 0.5, trajectory=ATIF))).status_code == 201
    (exported,) = [json.loads(x) for x in api.client.get("/api/v1/rollouts?kind=all&format=atif").data.splitlines()]
    assert exported["steps"] == ATIF["steps"]
    assert exported["agent"] == ATIF["agent"] and exported["schema_version"] == ATIF["schema_version"]
    assert exported["extra"]["task_name"] == "count-lines" and exported["extra"]["privacyClass"] == "PRIVATE"
    assert exported["extra"]["reward"] == 0.5


def test_a_token_can_import(app, runner, make_member):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    token = runner.invoke(args=["create-token", member.email, "--org", "Acme RL"]).output.strip().splitlines()[-1]
    response = app.test_client().post(
        "/api/v1/evaluation-runs/import", data=ndjson(line("t-1", 1, 1.0)), headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201


def make_harbor_job(root: Path) -> Path:
    """A Harbor job directory: two attempts of one task, one of another (with an exception), ATIF and rewards."""
    job = root / "2026-11-30__job"
    trials = [
        ("count-lines__a1", "count-lines", {"reward": 1.0, "tests_passed": 1.0}, None, True),
        ("count-lines__a2", "count-lines", {"reward": 0.0, "tests_passed": 0.5}, None, True),
        (
            "fix-build__a1",
            "fix-build",
            None,
            {"exception_type": "AgentTimeoutError", "exception_message": "agent ran past 900 s"},
            False,
        ),
    ]
    for name, task, rewards, exception, with_trajectory in trials:
        trial = job / name
        (trial / "agent").mkdir(parents=True)
        (trial / "verifier").mkdir()
        result = {
            "id": f"id-{name}",
            "task_name": task,
            "trial_name": name,
            "task_checksum": "abc123",
            "agent_info": {"name": "terminus", "version": "2", "model_info": {"name": "model-x"}},
            "verifier_result": {"rewards": rewards} if rewards else None,
            "exception_info": exception,
        }
        (trial / "result.json").write_text(json.dumps(result))
        if with_trajectory:
            document = copy.deepcopy(ATIF)
            document["session_id"] = name
            (trial / "agent" / "trajectory.json").write_text(json.dumps(document))
        else:
            (trial / "verifier" / "reward.txt").write_text("0\n")
    return job


def test_harbor_job_import_shows_up_like_a_worker_run(
    tmp_path, runner, client, auth, make_member, database, count_rows
):
    member = make_member("olga@acme.test", "Acme RL", "owner")
    job = make_harbor_job(tmp_path)
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 0, result.output
    assert "Imported 3 trials into 2 runs (0 already there)." in result.output
    again = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert f"Nothing new to import: all 3 trials of job {job.name} were imported before" in again.output
    assert check_rollups(database) == []

    auth.login(member.email)
    environments = client.get("/environments").text
    assert "count-lines" in environments and "fix-build" in environments
    with database.session(member.org.id) as session:
        rows = session.execute(
            text("""SELECT e.name, t.trial_number, t.reward, t.failure_category, t.metrics
            FROM evaluation_trials t JOIN environment_versions v ON v.id = t.environment_version_id
            JOIN environments e ON e.id = v.environment_id ORDER BY e.name, t.trial_number""")
        ).all()
        run_id, trial_id = session.execute(text("SELECT evaluation_run_id, id FROM evaluation_trials LIMIT 1")).one()
    assert count_rows("evaluation_runs", member.org) == 2
    assert [tuple(r[:4]) for r in rows] == [
        ("count-lines", 1, 1.0, None),
        ("count-lines", 2, 0.0, "verifier_failed"),
        ("fix-build", 1, 0.0, "agent_timeout_error"),
    ]
    assert rows[1].metrics == {"stage_tests_passed": 0.5, "explanations": {"reward": "result.json's reward"}}
    for url in (f"/runs/{run_id}", f"/trials/{trial_id}", "/capability-gap", "/partial-rewards", "/trials"):
        assert client.get(url).status_code == 200, url
    assert "agent_timeout_error" in client.get("/capability-gap").text
    with database.session(member.org.id) as session:
        version_id = session.execute(
            text("""SELECT v.id FROM environment_versions v JOIN environments e
            ON e.id = v.environment_id WHERE e.name = 'count-lines'""")
        ).scalar()
    stages = client.get(f"/partial-rewards/versions/{version_id}", headers={"HX-Request": "true"}).text
    assert "stage_tests_passed" in stages


def test_harbor_import_of_a_missing_directory_fails_with_one_line(runner, make_member, tmp_path):
    make_member("olga@acme.test", "Acme RL", "owner")
    result = runner.invoke(args=["import-harbor", str(tmp_path / "nope"), "--org", "Acme RL"])
    assert result.exit_code == 1 and "is not a directory" in result.output


def imported_steps(database, org_id) -> dict[str, list[dict]]:
    """The stored steps of each imported trial, by externalId (the trajectory artifact holds the same steps)."""
    with database.session(org_id) as session:
        rows = session.execute(
            text(f"""SELECT t.external_id, t.steps, {TRAJECTORY_BODY} AS body FROM evaluation_trials t
            JOIN artifacts a ON a.organization_id = t.organization_id AND a.id = t.trajectory_artifact_id""")
        ).all()
    for row in rows:
        assert json.loads(json.loads(bytes(row.body))["trajectory"])["steps"] == row.steps
    return {row.external_id: row.steps for row in rows}


def test_ingested_steps_are_structured_and_capped_like_the_workers(api, database):
    long = "y" * (OBSERVATION_CAP_CHARS + 5904)
    seed_shaped = [
        {"step": 1, "tool": "bash", "command": 'bash {"cmd": "wc -l"}', "observation": "41"},
        {"step": 2, "tool": "mcp", "command": "initialize", "observation": "server ready"},
        {"step": 3, "tool": "cat", "command": "cat", "observation": long},
    ]
    body = ndjson(line("x-1", 1, 1.0, trajectory=ATIF), line("x-2", 2, 0.0, trajectory={"steps": seed_shaped}))
    assert import_ndjson(api, body).status_code == 201
    steps = imported_steps(database, api.org.id)

    atif = steps["x-1"]
    assert [s["source"] for s in atif] == [s["source"] for s in ATIF["steps"]]
    assert atif[0]["message"] == ATIF["steps"][0]["message"] and "toolCalls" not in atif[0]
    for ours, theirs in zip(atif[1:], ATIF["steps"][1:], strict=True):
        assert ours["message"] == theirs["message"]
        assert [c["id"] for c in ours["toolCalls"]] == [c["tool_call_id"] for c in theirs["tool_calls"]]
        assert [r["callId"] for r in ours["results"]] == [r["source_call_id"] for r in theirs["observation"]["results"]]

    seed = steps["x-2"]
    assert seed[0]["source"] == "agent" and seed[0]["toolCalls"][0]["arguments"] == {"cmd": "wc -l"}
    assert seed[0]["command"] == 'bash {"cmd": "wc -l"}' and seed[0]["observation"] == "41"
    assert seed[1]["source"] == "environment" and seed[1]["command"] == "initialize"
    assert (
        seed[2]["observation"].startswith("y" * OBSERVATION_CAP_CHARS)
        and "[observation truncated: 5904 more characters]" in seed[2]["observation"]
    )
    assert "[observation truncated" in seed[2]["results"][0]["content"]


def test_an_imported_log_longer_than_the_cap_keeps_its_end(api, database):
    log = "start\n" + "z" * 20_000 + "\nthe failure is here"
    assert import_ndjson(api, ndjson(line("x-1", 1, 0.0, log=log))).status_code == 201
    with database.session(api.org.id) as session:
        stored = session.execute(text("SELECT log_excerpt FROM evaluation_trials")).scalar()
    assert stored.endswith("the failure is here") and "start" not in stored
    assert stored.startswith(f"… [log truncated: {len(log) - 16 * 1024} earlier characters]\n")


@pytest.mark.bad_input
def test_a_line_with_nan_is_refused_naming_the_line_and_nothing_is_written(api, count_rows):
    good = json.dumps(line("x-1", 1, 0.5))
    bad = json.dumps(line("x-2", 2, 0.5)).replace('"stage_counted": 1.0', '"stage_counted": NaN')
    response = import_ndjson(api, good + "\n" + bad + "\n")
    assert response.status_code == 400
    assert response.json["detail"] == "line 2 is not JSON (NaN is not a JSON number)"
    assert (response.json["line"], response.json["field"]) == (2, "line")
    assert count_rows("evaluation_trials") == 0


def test_training_rows_of_an_imported_atif_trajectory_take_its_prompt_and_tool_definitions(api):
    """The ATIF document's own user step is the prompt (the task is not added twice), and `tools` are its
    agent.tool_definitions; a document without them lists the functions it called, inferred from the calls."""
    defined: dict[str, Any] = {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    }
    document = {**ATIF, "agent": {**ATIF["agent"], "tool_definitions": [defined, {"name": "read", "parameters": {}}]}}
    assert import_ndjson(api, ndjson(line("x-1", 1, 0.5, trajectory=document))).status_code == 201
    (row,) = [json.loads(x) for x in api.client.get("/api/v1/rollouts?kind=all&format=trl").data.splitlines()]
    users = [m for m in row["messages"] if m["role"] == "user"]
    assert users == [{"role": "user", "content": ATIF["steps"][0]["message"]}]  # once
    assert row["messages"][0] == users[0]
    assert [t["function"]["name"] for t in row["tools"]] == ["bash", "read"]
    assert row["tools"][0] == defined
    plain = {**ATIF, "session_id": "other"}
    assert import_ndjson(api, ndjson(line("x-2", 2, 0.5, trajectory=plain))).status_code == 201
    rows = [json.loads(x) for x in api.client.get("/api/v1/rollouts?kind=all&format=trl").data.splitlines()]
    inferred = {"type": "object", "properties": {"cmd": {"type": "string"}}}  # its calls: bash with a `cmd` text
    assert [r["tools"] for r in rows if r["tools"][0] != defined] == [
        [{"type": "function", "function": {"name": "bash", "description": INFERRED_TOOL, "parameters": inferred}}]
    ]


def test_the_trial_page_shows_final_metrics_totals_and_says_latency_was_not_recorded(api, client):
    """An imported trajectory's final_metrics may count tokens its steps do not (a summariser's calls): the page
    shows those totals, beside what the steps report; no step timed its model, so latency is "not recorded"."""
    totals = {"total_prompt_tokens": 7802, "total_completion_tokens": 1030}
    document = {**ATIF, "final_metrics": {**ATIF["final_metrics"], **totals}}
    assert import_ndjson(api, ndjson(line("x-1", 1, 0.5, trajectory=document))).status_code == 201
    (trial_id,) = api_ids(api)
    page = api.get(f"/trials/{trial_id}").text
    facts = dict(zip(texts(page, "dl.facts dt"), texts(page, "dl.facts dd"), strict=True))
    assert (
        facts["Tokens in / out"].startswith("7802 / 1030") and "its steps report 670 / 44" in facts["Tokens in / out"]
    )
    assert facts["Model latency"].strip() == "not recorded"


def test_a_known_external_id_with_another_trial_is_reported_not_silently_skipped(api, count_rows):
    assert import_ndjson(api, ndjson(line("x-1", 1, 0.5, trajectory=ATIF), line("x-2", 2, 1.0))).status_code == 201
    changed = {**ATIF, "steps": ATIF["steps"][:2]}
    again = import_ndjson(api, ndjson(line("x-1", 1, 0.5, trajectory=changed), line("x-2", 2, 1.0)))
    assert again.status_code == 200 and again.json["skipped"] == 2 and again.json["differing"] == ["x-1"]
    same = import_ndjson(api, ndjson(line("x-1", 1, 0.5, trajectory=ATIF), line("x-2", 2, 0.0)))
    assert same.json["differing"] == ["x-2"]  # another reward
    assert counts(count_rows, api.org.id)["evaluation_trials"] == 2
