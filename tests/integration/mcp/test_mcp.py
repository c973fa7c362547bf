"""MCP environments: the built-in admin-console over MCP end to end, reset modes, and every server fault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import text

from domain.errors import SpecError
from domain.specs import validate_spec
from queries.trials import TRAJECTORY_BODY
from tests.factories import command_agent
from tests.paths import TESTS
from worker.loop import WorkerSettings, run_workers
from worker.masking import MASK
from worker.sandbox import ROOT, SandboxSettings
from worker.trial import run_trial
from writes.demo import MCP_SPEC
from writes.environments import create_environment, create_environment_version, create_evaluator_config
from writes.runs import enqueue_run, reset_run

pytestmark = pytest.mark.slow  # MCP server processes

FIRST_TOOL = [sys.executable, str(TESTS / "agents" / "first_tool.py")]


def faulty(mode: str, **more) -> dict:
    server = str(TESTS / "mcp" / "faulty_server.py")
    return {"kind": "mcp", "command": ["python", server, mode], "verifier": {"tool": "score"}, **more}


def first_tool(spec: dict, timeout_s: float = 10, trial_number: int = 1):
    return run_trial(
        spec,
        {"kind": "command", "argv": FIRST_TOOL},
        world_seed=1,
        seed=1,
        max_steps=5,
        timeout_s=timeout_s,
        trial_number=trial_number,
    )


def test_a_run_against_the_builtin_mcp_admin_console(database, make_org):
    org = make_org("Acme RL")
    with database.session(org.id) as session, session.begin():
        env = create_environment(session, org.id, "admin-console-mcp")
        version = create_environment_version(session, env, MCP_SPEC)
        config = create_evaluator_config(session, org.id, "expert", {"kind": "scripted", "skill": 1.0}, 3, timeout_s=30)
        enqueue_run(session, version, config)
    assert run_workers(database, WorkerSettings(), threading.Event(), 1, until_idle=True) == 1
    with database.session(org.id) as session:
        trials = session.execute(
            text(
                f"SELECT trial_number, reward, log_excerpt, {TRAJECTORY_BODY} AS body FROM evaluation_trials t "
                "JOIN artifacts a ON a.id = t.trajectory_artifact_id ORDER BY 1"
            )
        ).all()
        status = session.execute(text("SELECT status, pass_at_k FROM evaluation_runs")).one()
    assert [t.trial_number for t in trials] == [1, 2, 3] and {t.reward for t in trials} == {1.0}
    assert status == ("completed", {"1": 1.0, "2": 1.0, "3": 1.0})
    steps = json.loads(json.loads(trials[0].body)["trajectory"])["steps"]
    assert [s["command"] for s in steps[:2]] == ["initialize", "tools/list"]
    assert [(s["tool"], s["source"]) for s in steps[:2]] == [("mcp", "environment")] * 2  # the handshake
    listed = set(steps[1]["observation"].split(", "))
    *calls, closing = steps[2:]  # the agent's tool calls, then its closing words
    assert {s["source"] for s in steps[2:]} == {"agent"} and {s["tool"] for s in calls} <= listed
    assert all(s["toolCalls"][0]["name"] == s["tool"] for s in calls)  # the real tool, its JSON arguments
    assert (closing["tool"], closing["message"]) == (None, "done")
    assert any(s["command"].startswith("checkout") and s["observation"].startswith("placed ORD-") for s in steps)
    assert "score" not in steps[1]["observation"]  # the verifier tool is not handed to the agent
    assert "placed ORD-" in trials[0].log_excerpt


def test_reset_modes_restart_the_server_with_the_same_or_a_new_world(database, make_org):
    org = make_org("Acme RL")
    with database.session(org.id) as session, session.begin():
        environment = create_environment(session, org.id, "admin-console-mcp")
        version = create_environment_version(session, environment, MCP_SPEC)
        config = create_evaluator_config(session, org.id, "expert", {"kind": "scripted", "skill": 1.0}, 1, timeout_s=30)
        original = enqueue_run(session, version, config)
        same = reset_run(session, original, "new_workspace")
        other = reset_run(session, original, "new_world")
    run_workers(database, WorkerSettings(), threading.Event(), 1, until_idle=True)
    with database.session(org.id) as session:
        tasks = dict(session.execute(text("SELECT evaluation_run_id, task FROM evaluation_trials")).all())
    assert tasks[original.id] == tasks[same.id] and tasks[original.id].startswith("Restock SKU-")
    assert tasks[other.id] != tasks[original.id]


@pytest.mark.fault
@pytest.mark.parametrize(
    ("mode", "status", "category", "log_text"),
    [
        ("nostart", "error", "environment_error", "cannot start: missing configuration"),
        ("die", "error", "environment_error", "server crashed while poking"),
        ("slow", "failed", "timeout", "used up waiting for the environment"),
        ("garbage", "error", "environment_error", "no valid answer to initialize"),
    ],
)
def test_server_faults_give_a_trial_with_a_clear_category_and_stderr(mode, status, category, log_text):
    outcome = run_trial(
        faulty(mode), {"kind": "command", "argv": FIRST_TOOL}, world_seed=1, seed=1, max_steps=5, timeout_s=3
    )
    assert (outcome.status, outcome.failure_category) == (status, category)
    assert log_text in outcome.log and len(outcome.log) < 20_000


def test_a_healthy_faulty_server_scores(tmp_path):
    outcome = run_trial(
        faulty("fine"), {"kind": "command", "argv": FIRST_TOOL}, world_seed=1, seed=1, max_steps=5, timeout_s=10
    )
    assert outcome.reward == 1.0 and [s["command"] for s in outcome.stored_steps()] == [
        "initialize",
        "tools/list",
        "poke",
    ]
    # Its words on its stage are kept; those it claims on how the reward was derived are not (the worker's to say).
    assert outcome.explanations == {"stage_poked": "poked 1 times; the verifier was called 1 times"}


def test_no_server_process_is_left_behind():
    for mode in ("fine", "die", "slow", "garbage", "nostart", "mute"):
        first_tool(faulty(mode, startupTimeoutS=1), timeout_s=2)
    leftovers = [p for p in psutil.Process().children(recursive=True) if "faulty_server" in " ".join(p.cmdline())]
    assert leftovers == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "mcp", "verifier": {"tool": "score"}}, "spec.command must be a non-empty list"),
        ({"kind": "mcp", "command": ["x"]}, "spec.verifier must be"),
        ({"kind": "mcp", "command": ["x"], "verifier": {"tool": "s"}, "env": {"A": 1}}, "spec.env must map"),
        ({"kind": "mcp", "command": ["x"], "verifier": {"tool": "s"}, "extra": 1}, "unknown spec keys: extra"),
    ],
)
def test_invalid_mcp_specs_are_refused(spec, message):
    with pytest.raises(SpecError, match=message):
        validate_spec(spec)


def test_a_command_verifier_scores_from_its_json_output():
    spec = {**faulty("fine"), "verifier": {"command": ["python", "-c", "print('{\"stage_checked\": 0.5}')"]}}
    outcome = run_trial(spec, {"kind": "command", "argv": FIRST_TOOL}, world_seed=1, seed=1, max_steps=5, timeout_s=10)
    assert outcome.stages == {"stage_checked": 0.5} and outcome.reward == 0.5
    assert outcome.failure_category == "task_incomplete"
    assert "score" in next(s["observation"] for s in outcome.stored_steps() if s["command"] == "tools/list")


LONG_KEY = "stage_" + "x" * 95  # 101 characters: the trial's rollup and stage rows hold 100


def verifier_printing(printed: dict) -> dict:
    return {**faulty("fine"), "verifier": {"command": ["python", "-c", f"print({json.dumps(printed)!r})"]}}


@pytest.mark.fault
@pytest.mark.parametrize(
    ("printed", "said"),
    [
        ({LONG_KEY: 1, "stage_ok": 1}, f"the verifier's stage key {LONG_KEY[:40] + '…'!r} must be a stage key"),
        # was: stored, a key the stagePassed filter refuses (a filter lists keys with commas)
        (
            {"stage_a,b": 1, "stage_ok": 1},
            "the verifier's stage key 'stage_a,b' must be a stage key (stage_…, at most 100 characters)",
        ),
        (
            {"stage_ok": 0, "failure_category": "x" * 65},
            "the verifier's failure_category is not text of 1 to 64 characters",
        ),
        (
            {"stage_ok": 0, "failure_category": {"nested": "x"}},
            "the verifier's failure_category is not text of 1 to 64 characters",
        ),
    ],
)
def test_a_verifier_output_a_trial_could_not_keep_ends_it_as_an_environment_error(printed, said):
    # Recorded as given, these would fail the trial's recording (and the run after its retries).
    outcome = run_trial(
        verifier_printing(printed),
        {"kind": "command", "argv": FIRST_TOOL},
        world_seed=1,
        seed=1,
        max_steps=5,
        timeout_s=10,
    )
    assert (outcome.status, outcome.failure_category, outcome.reward, outcome.stages) == (
        "error",
        "environment_error",
        None,
        {},
    )
    assert f"environment could not score: ValueError: {said}" in outcome.log


def test_a_verifier_output_at_the_limits_is_kept(database, make_org):
    printed = {LONG_KEY[:-1]: 1, "stage_ok": 0, "failure_category": "y" * 64}
    org = make_org("Acme RL")
    with database.session(org.id) as session, session.begin():
        env = create_environment(session, org.id, "limits")
        version = create_environment_version(session, env, verifier_printing(printed))
        config = create_evaluator_config(session, org.id, "first", {"kind": "command", "argv": FIRST_TOOL}, 1)
        enqueue_run(session, version, config)
    assert run_workers(database, WorkerSettings(), threading.Event(), 1, until_idle=True) == 1
    with database.session(org.id) as session:
        trial = session.execute(text("SELECT reward, failure_category, metrics FROM evaluation_trials")).one()
        stages = session.execute(text("SELECT stage_key, passed FROM trial_stages ORDER BY 1")).all()
    assert trial == (0.5, "y" * 64, {LONG_KEY[:-1]: 1, "stage_ok": 0})
    assert stages == [("stage_ok", False), (LONG_KEY[:-1], True)]


@pytest.mark.leak
def test_an_agent_calling_the_hidden_verifier_tool_is_refused_and_the_server_never_gets_the_call(database, make_org):
    org = make_org("Acme RL")
    with database.session(org.id) as session, session.begin():
        env = create_environment(session, org.id, "faulty")
        version = create_environment_version(session, env, faulty("fine"))
        sneaky = command_agent("call_tools.py", "poke", "score", "nothing")  # the verifier tool mid-trial
        config = create_evaluator_config(session, org.id, "sneaky", sneaky, 1)
        enqueue_run(session, version, config)
    assert run_workers(database, WorkerSettings(), threading.Event(), 1, until_idle=True) == 1
    with database.session(org.id) as session:  # as the runtime role, scoped to the organization
        trial = session.execute(text("SELECT reward, metrics, steps, log_excerpt FROM evaluation_trials")).one()
    calls = {s["tool"]: s for s in trial.steps if s["source"] == "agent" and s["tool"]}
    assert calls["poke"]["observation"] == "poked"
    # The verifier tool is not offered, so a call to it is refused as a tool error the agent reads ...
    assert calls["score"]["observation"] == "error: no tool named 'score'; available: poke"
    assert calls["score"]["results"][0]["content"] == calls["score"]["observation"]
    assert calls["nothing"]["observation"] == "error: no tool named 'nothing'; available: poke"
    assert "stage_" not in json.dumps(trial.steps) and "verifier was called" not in json.dumps(trial.steps)
    # ... and never reaches the server: the verifier's own call, after the agent is done, is the first it got.
    assert trial.reward == 1.0
    assert trial.metrics["explanations"] == {"stage_poked": "poked 1 times; the verifier was called 1 times"}


@pytest.mark.leak
@pytest.mark.parametrize("environment", ["admin-console", "support-desk"])
def test_a_builtin_environment_refuses_its_verifier_and_any_tool_it_did_not_offer(environment):
    spec = {"kind": "builtin", "environment": environment, "params": {}}
    agent = command_agent("call_tools.py", "score", "explain", "diagnose")
    outcome = run_trial(spec, agent, world_seed=1, seed=1, max_steps=5, timeout_s=10)
    offered = ", ".join(tool["name"] for tool in outcome.tools)
    assert [s["observation"] for s in outcome.stored_steps() if s["tool"]] == [
        f"error: unknown tool {name!r}; available: {offered}" for name in ("score", "explain", "diagnose")
    ]


@pytest.mark.fault
def test_a_server_that_does_not_answer_initialize_times_out_within_its_startup_budget():
    outcome = first_tool(faulty("mute", startupTimeoutS=1), timeout_s=30)
    assert (outcome.status, outcome.failure_category, outcome.reward) == ("error", "timeout", None)
    assert "the MCP server did not answer initialize within 1 s (startupTimeoutS)" in outcome.log
    assert "malformed" not in outcome.log


@pytest.mark.fault
def test_a_server_printing_garbage_is_malformed_and_found_out_without_waiting_for_the_budget():
    began = time.monotonic()
    outcome = first_tool(faulty("garbage", startupTimeoutS=60), timeout_s=60)
    assert time.monotonic() - began < 15  # not the 60 s start-up budget
    assert (outcome.status, outcome.failure_category) == ("error", "environment_error")
    assert "no valid answer to initialize (malformed JSON-RPC" in outcome.log
    assert "'this is not JSON-RPC'" in outcome.log


def test_startup_is_not_charged_to_the_agents_time_budget():
    outcome = first_tool(faulty("sluggish"), timeout_s=1.5)  # the server takes 2 s to start
    assert outcome.reward == 1.0 and [s["command"] for s in outcome.stored_steps()] == [
        "initialize",
        "tools/list",
        "poke",
    ]


def test_tool_results_keep_their_content_parts_in_order_and_the_agent_reads_text():
    outcome = first_tool(faulty("parts"))
    poke = outcome.stored_steps()[2]
    content = poke["results"][0]["content"]
    assert [part["type"] for part in content] == ["text", "image", "text"]
    assert content[1]["mimeType"] == "image/png" and content[1]["data"] == "iVBORw0KGgo="
    assert poke["observation"] == "before the picture\n[image image/png]\nafter the picture"


def test_a_tool_result_the_server_marks_is_error_is_recorded_as_an_error():
    outcome = first_tool(faulty("snag"))
    poke = outcome.steps[2]
    assert poke.is_error and poke.to_stored()["results"][0]["isError"] is True
    assert poke.observation == "error: Error executing tool poke: the snag held"  # what the agent read
    assert not any(step.is_error for step in outcome.steps[:2])  # the handshake
    assert first_tool(faulty("parts")).steps[2].is_error is False


def test_structured_content_is_kept_on_the_step_and_in_the_atif_export():
    from queries.training_formats import _atif_step

    outcome = first_tool(faulty("structured"))
    poke = outcome.stored_steps()[2]
    assert poke["results"][0]["structuredContent"] == {"pokes": 1, "unit": "poke"}
    assert json.loads(poke["observation"]) == {"pokes": 1, "unit": "poke"}  # the text the agent read
    atif = _atif_step(3, outcome.steps[2])
    assert atif["observation"]["results"][0]["extra"]["structuredContent"] == {"pokes": 1, "unit": "poke"}
    image = _atif_step(3, first_tool(faulty("parts")).steps[2])["observation"]["results"][0]
    assert image["content"] == [  # ATIF's multimodal parts, the image as a data: URL; nothing left under extra
        {"type": "text", "text": "before the picture"},
        {"type": "image", "source": {"media_type": "image/png", "path": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "text", "text": "after the picture"},
    ]
    assert "extra" not in image
    snag = _atif_step(3, first_tool(faulty("snag")).steps[2])["observation"]["results"][0]["extra"]
    assert snag == {"isError": True}


def test_a_verifier_tool_takes_its_arguments_from_the_spec():
    outcome = first_tool(faulty("fine", verifier={"tool": "score", "arguments": {"weight": 0.25}}))
    assert outcome.stages == {"stage_poked": 0.25}


# A real MCP server this project did not write: mcp-server-git from the package registry, pinned in
# tests/mcp/requirements-servers.txt and installed into .venv-mcp-servers/, started by absolute path in the sandbox.
GIT_SETUP = (  # the environment's set-up in its fresh workspace: a repository with one commit and an untracked file
    "git init -q -b main && git config user.name trial && git config user.email trial@example.invalid"
    ' && echo "world $AGENTFORGE_WORLD_SEED" > README && git add README && git commit -q -m initial'
    ' && echo "$NOTES_TITLE of trial $AGENTFORGE_TRIAL" > notes.txt && exec "$0" --repository .'
)
GIT_TASK = 'The repository is the server\'s working directory (repo_path "."): commit notes.txt as "trial <n>".'


@pytest.fixture(scope="session")
def mcp_servers() -> Path:
    from tests.mcp.servers import install

    return install()


def git_spec(venv: Path) -> dict:
    return {
        "kind": "mcp",
        "command": ["/bin/sh", "-c", GIT_SETUP, str(venv / "bin" / "mcp-server-git")],
        "env": {"NOTES_TITLE": "Field notes"},
        "task": GIT_TASK,
        "verifier": {"command": ["python", str(TESTS / "mcp" / "git_verifier.py")]},
    }


def listed_by_the_server(argv: list[str]) -> list[dict]:
    """tools/list exactly as the server `argv` starts answers it, spoken to directly (no sandbox, no SDK client)."""
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdin is not None and server.stdout is not None
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()
    try:
        for line in server.stdout:
            answer = json.loads(line)
            if answer.get("id") == 2:
                return answer["result"]["tools"]
    finally:
        server.kill()
        server.communicate()  # waits and closes its pipes
    raise AssertionError(f"{argv[0]} did not list its tools")


def git_trial(venv: Path, trial_number: int):
    settings = SandboxSettings.from_environ({**os.environ, "AGENTFORGE_SANDBOX_PATHS": str(venv)})
    return run_trial(
        git_spec(venv),
        {"kind": "command", "argv": [sys.executable, str(TESTS / "agents" / "git_agent.py")]},
        world_seed=7,
        seed=100 + trial_number,
        max_steps=10,
        timeout_s=60,
        trial_number=trial_number,
        sandbox=settings,
    )


def agent_summary(log: str) -> dict:
    line = next(line for line in log.splitlines() if line.startswith("agent finished: "))
    return json.loads(line.removeprefix("agent finished: "))


def verifier_context(log: str) -> dict:
    line = next(line for line in log.splitlines() if line.startswith("verifier | verifier context: "))
    return json.loads(line.removeprefix("verifier | verifier context: "))  # its log, each line labelled as its own


def test_mcp_server_git_from_the_registry_runs_as_an_environment(mcp_servers):
    truth = {tool["name"]: tool for tool in listed_by_the_server([str(mcp_servers / "bin" / "mcp-server-git")])}
    first, second = git_trial(mcp_servers, 1), git_trial(mcp_servers, 2)

    for number, outcome in ((1, first), (2, second)):
        assert (outcome.status, outcome.reward) == ("succeeded", 1.0), outcome.log
        assert outcome.stages == {"stage_committed": 1.0, "stage_fresh": 1.0}
        steps = outcome.stored_steps()
        # The handshake: environment steps filed under "mcp"; the tools/list step carries the tools as listed.
        assert [(s["step"], s["source"], s["tool"], s["command"]) for s in steps[:2]] == [
            (1, "environment", "mcp", "initialize"),
            (2, "environment", "mcp", "tools/list"),
        ]
        assert steps[0]["extra"]["serverInfo"] == {"name": "mcp-git", "version": "2026.10.19"}
        assert steps[1]["observation"] == ", ".join(truth)
        assert {t["name"]: t["inputSchema"] for t in steps[1]["extra"]["tools"]} == {
            name: tool["inputSchema"] for name, tool in truth.items()
        }
        # Agent calls: filed under the real tool name, with JSON arguments.
        *calls, closing = steps[2:]  # the agent's calls, then its closing words (its summary)
        assert (closing["source"], closing["tool"]) == ("agent", None) and closing["message"].startswith("{")
        assert [(s["source"], s["tool"], s["toolCalls"][0]["arguments"]) for s in calls] == [
            ("agent", "git_status", {"repo_path": "."}),
            ("agent", "git_log", {"repo_path": ".", "max_count": 5}),
            ("agent", "git_add", {"repo_path": ".", "files": ["notes.txt"]}),
            ("agent", "git_commit", {"repo_path": ".", "message": f"trial {number}"}),
        ]
        assert steps[5]["results"][0]["content"][0]["text"].startswith("Changes committed successfully with hash")
        # The agent got every tool's full schema and description exactly as the server sent them.
        given = agent_summary(outcome.log)
        assert given["task"] == GIT_TASK
        assert given["schemas"] == {name: tool["inputSchema"] for name, tool in truth.items()}
        assert given["descriptions"] == {name: tool["description"] for name, tool in truth.items()}
        assert given["schemas"]["git_add"]["properties"]["files"] == {
            "items": {"type": "string"},
            "minItems": 1,
            "title": "Files",
            "type": "array",
        }
        assert given["schemas"]["git_add"]["required"] == ["repo_path", "files"]
        branch = given["schemas"]["git_branch"]["properties"]
        assert branch["contains"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
        assert branch["repo_path"]["description"] == "The path to the Git repository."
        assert given["schemas"]["git_log"]["properties"]["max_count"]["default"] == 10
        assert given["parameters"]["git_add"] == {"repo_path": "string", "files": "array"}
        assert outcome.tools == steps[1]["extra"]["tools"]
        # Trials share nothing: each starts from the set-up's single commit, never another trial's.
        assert "initial" in given["history"] and "trial 1" not in given["history"]
        assert "notes.txt" in given["status"]
        # The verifier ran in the server's workspace (not the checkout) with the trial's context and the spec's env.
        context = verifier_context(outcome.log)
        assert context == {
            "cwd": context["workspace"],
            "workspace": context["workspace"],
            "trial": str(number),
            "seed": str(100 + number),
            "world": "7",
            "spec_env": MASK,  # the spec's env reached it; its values are secrets, masked in all a trial records
            "commits": [f"trial {number}", "initial"],
        }
        assert not context["cwd"].startswith(str(ROOT))


def git_log_seen(outcome) -> str:
    """What the agent read from git_log (the repository's history, with each commit's author)."""
    return next(step.observation for step in outcome.steps if step.tool == "git_log")


def test_plain_vars_reach_mcp_server_git_and_stay_readable_while_env_is_masked(mcp_servers):
    """`vars` (plain settings) reach the real server's environment and are recorded as they are; the same value
    in `env` (a secret) is masked as before."""
    settings = SandboxSettings.from_environ({**os.environ, "AGENTFORGE_SANDBOX_PATHS": str(mcp_servers)})
    agent = {"kind": "command", "argv": [sys.executable, str(TESTS / "agents" / "git_agent.py")]}

    def trial(spec: dict):
        return run_trial(
            spec, agent, world_seed=7, seed=101, max_steps=10, timeout_s=60, trial_number=1, sandbox=settings
        )

    plain = trial({**git_spec(mcp_servers), "vars": {"GIT_AUTHOR_NAME": "tester"}})
    assert (plain.status, plain.reward) == ("succeeded", 1.0), plain.log
    assert "Author: tester" in git_log_seen(plain)
    secret = trial({**git_spec(mcp_servers), "env": {"NOTES_TITLE": "Field notes", "GIT_AUTHOR_NAME": "tester"}})
    assert (secret.status, secret.reward) == ("succeeded", 1.0), secret.log
    assert "Author: ***" in git_log_seen(secret) and "tester" not in git_log_seen(secret)
