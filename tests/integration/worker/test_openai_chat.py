"""The openai-chat agent end to end: the real worker runs it in the sandbox against a local scripted model server.

The server (tests/openai_server.py) is a separate process on this host's address answering scripted completions: tool
calls, arguments that are not JSON, a 429 and a 503 before success, reasoning content, a final answer. The agent
reaches it from inside the trial's sandbox (network on, as its config must say).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from atif import Trajectory

from domain.agents import validate_agent
from domain.errors import AgentConfigError
from tests.factories import make_catalog
from tests.helpers import one, texts
from tests.integration.exports.test_training_rows import assert_message_shape, render_everywhere
from tests.integration.isolation.test_secrets import assert_hidden, assert_not_stored, scoped_rows
from tests.openai_server import SOLVE_USAGE, host_address
from tests.paths import TESTS
from worker.loop import WorkerSettings, run_workers
from worker.masking import MASK
from worker.trial import run_trial

SERVER = TESTS / "openai_server.py"
API_KEY = "sk-local-Wq7Rt3Yp9Kd2Xm5"
SPEC = {"kind": "builtin", "environment": "admin-console", "params": {}}
SYSTEM = "You run a shop's admin console. Use the tools; say what you did when you are done."


@pytest.fixture
def model_server(tmp_path):
    """Start scripted servers on this host's address: `start(scenario)` returns (base URL, path of its request log)."""
    started: list[subprocess.Popen] = []

    def start(scenario: str) -> tuple[str, Path]:
        log = tmp_path / f"{scenario}-requests.jsonl"
        proc = subprocess.Popen([sys.executable, str(SERVER), scenario, str(log)], stdout=subprocess.PIPE, text=True)
        started.append(proc)
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        return f"http://{host_address()}:{port}/v1", log

    yield start
    for proc in started:
        proc.kill()
        proc.communicate()  # waits and closes its stdout


def agent(base_url: str, **more) -> dict:
    return {
        "kind": "openai-chat",
        "baseUrl": base_url,
        "model": "scripted-model",
        "network": True,
        "env": {"OPENAI_API_KEY": API_KEY},
        **more,
    }


def requests_of(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.slow  # starts agent processes
def test_a_scripted_conversation_is_recorded_turn_by_turn_and_exported(
    database, model_server, client, auth, viewer, owner_engine, caplog
):
    base_url, log = model_server("solve")
    config = agent(base_url, systemPrompt=SYSTEM, temperature=0.2, maxTokens=256, extraBody={"top_k": 20})
    catalog = make_catalog(database, viewer.org.id, config, attempt_count=2, timeout_s=60)
    from tests.helpers import queue

    (run_id,) = queue(database, catalog)
    with caplog.at_level("DEBUG"):
        assert run_workers(database, WorkerSettings(), threading.Event(), concurrency=1, until_idle=True) == 1

    trials = scoped_rows(
        owner_engine,
        viewer.org.id,
        "SELECT id, status, reward, failure_category, steps, log_excerpt, trajectory_artifact_id "
        "FROM evaluation_trials ORDER BY trial_number",
    )
    assert [(t.status, t.reward, t.failure_category) for t in trials] == [("succeeded", 1.0, None)] * 2
    for trial in trials:
        steps = trial.steps
        assert [(s["source"], s["tool"]) for s in steps] == [
            ("system", None),
            ("environment", "model"),  # the 429, retried
            ("agent", "list_inventory"),
            ("agent", "restock"),  # arguments that are not JSON: the error is the result
            ("environment", "model"),  # the 503, retried
            ("agent", "restock"),
            ("agent", "create_order"),  # the second call of the same turn
            ("agent", "checkout"),
            ("agent", None),  # the final answer
        ]
        assert steps[0]["message"] == SYSTEM
        assert f"HTTP 429: slow down from {host_address()}:" in steps[1]["observation"]
        assert "HTTP 503: busy" in steps[4]["observation"]
        first = steps[2]
        assert first["message"] == "Let me look at the inventory first."
        assert first["reasoning"].startswith("The task is about SKU-")
        assert first["toolCalls"] == [{"id": "call_inv", "name": "list_inventory", "arguments": {}}]
        assert first["tokens"] == {"prompt": 120, "completion": 18} and first["latencyMs"] > 0
        malformed = steps[3]
        assert malformed["observation"].startswith("error: the arguments of restock are not valid JSON")
        kept = malformed["toolCalls"][0]
        assert kept["arguments"] == {} and kept["argumentsText"].endswith('"quantity": ')  # no invented key
        assert malformed["command"] == f"restock {kept['argumentsText']}"
        assert [c["id"] for s in steps[5:8] for c in s["toolCalls"]] == ["call_restock", "call_order", "call_checkout"]
        assert "tokens" in steps[5] and "tokens" not in steps[6]  # a turn's usage goes with its first call
        assert (
            steps[8]["message"]
            == f"Restocked {steps[8]['message'].split()[1]} and placed the order (I was called with key {MASK})."
        )
        assert steps[8]["reasoning"] == "Done."
        used = [s["tokens"] for s in steps if "tokens" in s]
        assert [(u["prompt"], u["completion"]) for u in used] == SOLVE_USAGE
        assert "agent finished" in trial.log_excerpt and "retry 1 of 3" in trial.log_excerpt

    # The model saw every turn: the tools with their schemas, each tool result (the malformed call's error
    # included), the settings, and the key as its bearer token.
    requests = requests_of(log)
    assert len(requests) == 2 * (len(SOLVE_USAGE) + 2)
    assert {r["authorization"] for r in requests} == {f"Bearer {API_KEY}"}
    last = requests[len(SOLVE_USAGE) + 1]["body"]
    assert (last["temperature"], last["max_tokens"], last["top_k"]) == (0.2, 256, 20)
    restock = next(t["function"] for t in last["tools"] if t["function"]["name"] == "restock")
    assert restock["parameters"]["properties"] == {"sku": {"type": "string"}, "quantity": {"type": "integer"}}
    assert [m["role"] for m in last["messages"]] == ["system", "user"] + ["assistant", "tool"] * 2 + [
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
    ]
    assert last["messages"][5]["content"].startswith("error: the arguments of restock are not valid JSON")
    # The malformed call goes back to the model as valid JSON ({}), its error as the result: never the raw text.
    sent_back = last["messages"][4]["tool_calls"][0]["function"]
    assert (sent_back["name"], sent_back["arguments"]) == ("restock", "{}")

    total_in, total_out = (sum(u[i] for u in SOLVE_USAGE) for i in (0, 1))
    auth.login(viewer.email)
    trial_page = client.get(f"/trials/{trials[0].id}").text
    assert f"{total_in} / {total_out}" in trial_page and "over 5 turns" in trial_page
    assert "120 tokens in · 18 out · model" in trial_page
    run_page = client.get(f"/runs/{run_id}").text
    usage = one(run_page, "table.usage")
    assert texts(usage, "caption") == ["Model usage"]
    assert texts(usage, "tfoot th, tfoot td")[:2] == ["Run total", str(2 * total_in)]  # tokens in, both trials

    documents = [json.loads(line) for line in client.get("/api/v1/rollouts?kind=all&format=atif").text.splitlines()]
    assert len(documents) == 2
    for document in documents:
        trajectory = Trajectory.model_validate(document)
        final = trajectory.final_metrics
        assert final is not None and final.extra is not None
        assert final.total_prompt_tokens == total_in
        assert final.total_completion_tokens == total_out
        metrics = [s.metrics for s in trajectory.steps if s.metrics]
        assert [(m.prompt_tokens, m.completion_tokens) for m in metrics] == SOLVE_USAGE
        latencies = [m.extra["latency_ms"] for m in metrics if m.extra is not None]
        assert len(latencies) == len(metrics) and all(ms > 0 for ms in latencies)
        assert final.extra["model_latency_ms"] == pytest.approx(sum(latencies), abs=0.01)
        assert [s.source for s in trajectory.steps][:4] == ["user", "system", "system", "agent"]

    rows = [json.loads(line) for line in client.get("/api/v1/rollouts?kind=all&format=trl").text.splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["messages"][0] == {"role": "system", "content": SYSTEM}
        assert [m["role"] for m in row["messages"]].count("tool") == 5
        assert_message_shape(row["messages"])
        render_everywhere(row)

    # The key: sent to the model, never shown or kept anywhere else.
    seen = {"worker log": caplog.text, "trial page": trial_page, "run page": run_page}
    seen["artifact"] = client.get(f"/api/v1/artifacts/{trials[0].trajectory_artifact_id}").get_data()
    seen["run API"] = client.get(f"/api/v1/evaluation-runs/{run_id}").get_data()
    for export_format in ("atif", "atif-shaped", "trl"):
        seen[export_format] = client.get(f"/api/v1/rollouts?kind=all&format={export_format}").get_data()
    seen["environment page"] = client.get(f"/environments/{catalog.environment_id}").get_data()
    for where, body in seen.items():
        assert_hidden(where, body, API_KEY)
    assert_not_stored(owner_engine, viewer.org.id, API_KEY)


@pytest.mark.slow  # starts agent processes
def test_the_token_budget_ends_the_trial_before_the_next_turn(model_server):
    base_url, log = model_server("loop")
    outcome = run_trial(SPEC, agent(base_url, tokenBudget=2500), world_seed=3, seed=3, max_steps=12, timeout_s=60)
    assert outcome.failure_category == "out_of_tokens"
    assert [s["tool"] for s in outcome.stored_steps()] == ["list_inventory"] * 3  # 1,100 tokens each: 3,300 >= 2,500
    assert "out_of_tokens: token budget of 2500 used up (3300 tokens)" in outcome.log
    assert len(requests_of(log)) == 3


@pytest.mark.slow  # starts agent processes
def test_the_step_budget_still_ends_a_model_that_never_stops(model_server):
    base_url, _ = model_server("loop")
    outcome = run_trial(SPEC, agent(base_url), world_seed=3, seed=3, max_steps=4, timeout_s=60)
    assert outcome.failure_category == "out_of_steps" and len(outcome.steps) == 4


@pytest.mark.slow  # starts agent processes
@pytest.mark.parametrize(
    ("scenario", "words", "retries"),
    [
        ("down", "failed 4 requests in a row; last: HTTP 503: overloaded", 3),
        ("unauthorized", "answered HTTP 401: Incorrect API key provided", 0),
        ("unparsable", "answered HTTP 500: Failed to parse tool call arguments as JSON (not retried)", 0),
    ],
)
def test_a_failing_server_ends_the_trial_as_agent_error_naming_its_host(model_server, scenario, words, retries):
    base_url, log = model_server(scenario)
    outcome = run_trial(SPEC, agent(base_url), world_seed=1, seed=1, max_steps=12, timeout_s=60)
    host = base_url.split("/")[2]
    assert (outcome.status, outcome.failure_category) == ("failed", "agent_error")
    assert f"agent_error: agent could not go on: the model server {host} {words}" in outcome.log
    assert [(s["source"], s["tool"]) for s in outcome.stored_steps()] == [("environment", "model")] * retries
    assert len(requests_of(log)) == retries + 1


@pytest.mark.slow  # starts agent processes
def test_an_unreachable_endpoint_ends_the_trial_as_agent_error_never_a_crash():
    outcome = run_trial(
        SPEC, agent("http://127.0.0.1:9/v1"), world_seed=1, seed=1, max_steps=12, timeout_s=60
    )  # nothing listens on port 9 (discard)
    assert (outcome.status, outcome.failure_category, outcome.steps) == ("failed", "agent_error", [])
    assert "cannot reach the model server 127.0.0.1:9: Connection error." in outcome.log


@pytest.mark.parametrize(
    ("config", "refusal"),
    [
        ({"network": False}, "agent.network must be true: an openai-chat agent reaches its model over the network"),
        ({"network": None}, "agent.network must be true"),
        ({"baseUrl": "file:///etc/passwd"}, "agent.baseUrl must be an http:// or https:// URL naming a host"),
        ({"apiKeyEnv": "MY_KEY"}, "agent.apiKeyEnv names 'MY_KEY', which is not an entry of agent.env"),
        ({"tokenBudget": 0}, "agent.tokenBudget must be an integer from 1 to 100000000, not 0"),
        ({"extraBody": [1]}, "agent.extraBody must be a JSON object"),
    ],
)
def test_a_config_without_network_or_with_a_bad_field_is_refused(config, refusal):
    body = {key: value for key, value in (agent("http://127.0.0.1:8000/v1") | config).items() if value is not None}
    with pytest.raises(AgentConfigError) as refused:
        validate_agent(body)
    assert str(refused.value).startswith(refusal)


def test_the_api_refuses_an_openai_chat_config_without_network_with_400(api):
    model = {"kind": "openai-chat", "baseUrl": "http://127.0.0.1:8000/v1", "model": "qwen3-8b"}
    body: dict[str, Any] = {"name": "qwen", "attemptCount": 1, "agent": model}
    response = api.post("/api/v1/evaluator-configs", body)
    assert response.status_code == 400
    assert response.json["detail"].startswith("agent.network must be true")
    accepted = api.post("/api/v1/evaluator-configs", body | {"agent": body["agent"] | {"network": True}})
    assert accepted.status_code == 201 and accepted.json["agent"]["network"] is True


def test_the_environment_page_states_a_configs_network_opt_in(api, database):
    from tests.factories import make_catalog

    catalog = make_catalog(database, api.org.id, agent("http://127.0.0.1:8000/v1"), attempt_count=1)
    make_catalog(database, api.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=1, config_name="offline")
    page = api.client.get(f"/environments/{catalog.environment_id}").get_data(as_text=True)
    assert page.count("Network on: this agent's program reaches the network") == 1
    assert "(its model at http://127.0.0.1:8000/v1)" in page and API_KEY not in page
