"""Creating in the browser: an environment from a template, a new version with its diff, evaluator configurations.

The forms are generated from the API's models and refuse exactly what the API refuses: the same configurations go
through both, and each is created by both or refused by both in the same words (the page answers 422 with the
refusal next to the input it names, nothing written).
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from sqlalchemy import select

from models import EnvironmentVersion
from queries.environments import runnable_spec
from tests.helpers import attr, error_summary_links, one, parse, texts


def form_post(api, url: str, data: dict, **kwargs):
    return api.client.post(url, data=data, headers={"X-CSRFToken": api.token}, **kwargs)


def environment_form(name: str, **spec_inputs: str) -> dict:
    return {"name": name, "description": "", "submission_key": str(uuid.uuid4()), "source": "fields", **spec_inputs}


def refusal_at(html: str, input_id: str) -> str:
    """The refusal shown under an input (its id + -error), which the input's aria-describedby names."""
    page = parse(html)
    assert f"{input_id}-error" in attr(one(page, f"#{input_id}"), "aria-describedby")
    return one(page, f"#{input_id}-error").get_text()


def test_a_member_creates_an_admin_console_environment_from_its_form(api, count_rows):
    page = parse(api.get("/environments/new").text)
    assert attr(one(page, "#f-spec-params-skus"), "value") == "8"
    assert "from 3 to 20" in one(page, "#f-spec-params-skus-help").get_text()
    made = form_post(
        api, "/environments/new?template=admin-console", environment_form("shop", **{"spec.params.skus": "12"})
    )
    assert made.status_code == 303
    shown = api.get(made.headers["Location"]).text
    assert "Created shop with version 1" in shown
    listed = api.get("/api/v1/environments").json
    assert [(e["name"], e["latestVersion"]) for e in listed] == [("shop", 1)]
    assert count_rows("environment_versions", api.org) == 1
    # the version is what the API pins for the same spec: same normalised spec, same sha256
    other = api.post("/api/v1/environments", {"name": "shop-api"}).json
    by_api = api.post(
        f"/api/v1/environments/{other['id']}/versions",
        {"spec": {"environment": "admin-console", "params": {"skus": 12}}},
    ).json
    with api_session(api) as session:
        version = session.scalar(
            select(EnvironmentVersion).where(
                EnvironmentVersion.version == 1, EnvironmentVersion.environment_id != uuid.UUID(other["id"])
            )
        )
        assert (version.spec, version.spec_sha256) == (by_api["spec"], by_api["specSha256"])


def api_session(api):
    return api.client.application.extensions["agentforge_db"].session(api.org.id)


def test_a_refused_input_is_shown_in_place_with_422_and_nothing_is_written(api, count_rows):
    answer = form_post(
        api, "/environments/new?template=admin-console", environment_form("shop", **{"spec.params.skus": "50"})
    )
    assert answer.status_code == 422
    assert "SKUs must be a whole number from 3 to 20" in refusal_at(answer.text, "f-spec-params-skus")
    assert attr(one(answer.text, "#f-name"), "value") == "shop"  # the form is kept
    assert attr(one(answer.text, "#f-spec-params-skus"), "value") == "50"
    not_a_number = form_post(api, "/environments/new", environment_form("shop", **{"spec.params.skus": "many"}))
    assert not_a_number.status_code == 422
    assert "SKUs must be a whole number from 3 to 20" in refusal_at(not_a_number.text, "f-spec-params-skus")
    nameless = form_post(api, "/environments/new", environment_form(""))
    assert nameless.status_code == 422 and "Enter a name of 1 to 200 characters" in refusal_at(nameless.text, "f-name")
    too_long = form_post(api, "/environments/new", environment_form("x" * 201))
    assert too_long.status_code == 422 and "Enter a name of 1 to 200 characters" in refusal_at(too_long.text, "f-name")
    assert (count_rows("environments", api.org), count_rows("environment_versions", api.org)) == (0, 0)


def test_an_mcp_environment_with_a_secret_from_its_form(api, count_rows):
    data = environment_form(
        "git",
        **{
            "spec.command": "python\r\n-m\r\nmcp_server_git",
            "spec.verifier.tool": "git_status",
            "spec.verifier.arguments": '{"repo_path": "."}',
            "spec.env.name.0": "GIT_TOKEN",
            "spec.env.value.0": "s3cret-value",
            "spec.limits.memoryMb": "2048",
            "spec.task": "Show the status.\r\nThen the log.",  # a text area's lines, as browsers send them
        },
    )
    made = form_post(api, "/environments/new?template=mcp", data)
    assert made.status_code == 303, made.text
    env_id = made.headers["Location"].rsplit("/", 1)[-1]
    page = api.get(f"/environments/{env_id}").text
    assert "s3cret-value" not in page and "GIT_TOKEN" in page
    with api_session(api) as session:
        version = session.scalar(select(EnvironmentVersion))
        assert version.spec["command"] == ["python", "-m", "mcp_server_git"]
        assert version.spec["limits"] == {"memoryMb": 2048} and version.spec["env"] == {"GIT_TOKEN": "***"}
        assert version.spec["task"] == "Show the status.\nThen the log."
        assert runnable_spec(session, version)["env"] == {"GIT_TOKEN": "s3cret-value"}


def test_a_secret_sent_back_as_the_mask_is_refused(api, count_rows):
    data = environment_form(
        "git", **{"spec.command": "srv", "spec.verifier.tool": "t", "spec.env.name.0": "K", "spec.env.value.0": "***"}
    )
    answer = form_post(api, "/environments/new?template=mcp", data)
    assert answer.status_code == 422 and "stands for a secret that is never shown back" in answer.text
    assert count_rows("environments", api.org) == 0


def test_a_double_submit_creates_one_environment(api, count_rows):
    data = environment_form("shop")
    first = form_post(api, "/environments/new", data)
    second = form_post(api, "/environments/new", data)
    assert (first.status_code, second.status_code) == (303, 303)
    assert first.headers["Location"] == second.headers["Location"]
    assert (count_rows("environments", api.org), count_rows("environment_versions", api.org)) == (1, 1)
    again = form_post(api, "/environments/new", {**data, "submission_key": str(uuid.uuid4())})
    assert again.status_code == 422 and "already exists" in refusal_at(again.text, "f-name")


def test_a_post_without_its_csrf_token_answers_400(api, count_rows):
    answer = api.client.post("/environments/new", data=environment_form("shop"))
    assert answer.status_code == 400
    assert count_rows("environments", api.org) == 0


def test_viewers_see_no_create_buttons_and_get_403(viewer_api, api, count_rows):
    assert "New environment" in api.get("/environments").text
    assert "New environment" not in viewer_api.get("/environments").text
    assert "New evaluator" not in viewer_api.get("/evaluators").text
    for url in ("/environments/new", "/evaluators/new"):
        assert viewer_api.get(url).status_code == 403
        assert form_post(viewer_api, url, environment_form("x")).status_code == 403
    assert count_rows("environments", api.org) == 0


def test_an_unknown_template_answers_404(api):
    assert api.get("/environments/new?template=docker").status_code == 404
    assert api.get("/evaluators/new?template=psychic").status_code == 404


def evaluator_form(name: str, **inputs: str) -> dict:
    return {"name": name, "attemptCount": "4", "submission_key": str(uuid.uuid4()), "source": "fields", **inputs}


def test_an_openai_chat_evaluator_with_a_write_only_key(api, count_rows):
    inputs = {
        "agent.baseUrl": "http://127.0.0.1:8000/v1",
        "agent.model": "smollm2",
        "agent.env.name.0": "OPENAI_API_KEY",
        "agent.env.value.0": "sk-test-123",
    }
    refused = form_post(api, "/evaluators/new?template=openai-chat", evaluator_form("llama", **inputs))
    assert refused.status_code == 422
    assert "Tick Network: an openai-chat agent reaches its model over the network" in refusal_at(
        refused.text, "f-agent-network"
    )  # network is an explicit opt-in
    assert "sk-test-123" not in refused.text  # a secret is never drawn back
    made = form_post(
        api, "/evaluators/new?template=openai-chat", evaluator_form("llama", **inputs, **{"agent.network": "true"})
    )
    assert made.status_code == 303
    listed = api.get("/evaluators").text
    assert "llama" in listed and "OPENAI_API_KEY" in listed and "sk-test-123" not in listed
    assert count_rows("evaluator_configs", api.org) == 1


# The same configurations through the API and through the forms' JSON view: created by both or refused by both, in
# the same words.
AGENTS = [
    {"kind": "scripted"},
    {"kind": "scripted", "skill": 0.3, "stepDelayS": 0},
    {"kind": "scripted", "skill": 3},
    {"kind": "scripted", "skill": "high"},
    {"kind": "psychic"},
    {"kind": "command", "argv": []},
    {"kind": "command", "argv": ["python", "agent.py"], "env": {"K": "v"}, "network": True},
    {"kind": "command", "argv": ["a"], "limits": {"memoryMb": 99999}},
    {"kind": "command", "argv": ["a"], "limits": {"gpus": 1}},
    {"kind": "openai-chat", "baseUrl": "ftp://x", "model": "m", "network": True},
    {"kind": "openai-chat", "baseUrl": "http://h/v1", "model": "m"},
    {"kind": "openai-chat", "baseUrl": "http://h/v1", "model": "m", "network": True, "temperature": 3},
    {"kind": "openai-chat", "baseUrl": "http://h/v1", "model": "m", "network": True, "apiKeyEnv": "KEY"},
    {"kind": "command", "argv": ["a"], "env": {"K": "***"}},
    {"kind": "oracle"},
]
SPECS = [
    {"environment": "admin-console"},
    {"environment": "admin-console", "params": {"skus": 0}},
    {"environment": "nope"},
    {"kind": "docker"},
    {"kind": "mcp", "command": ["srv"], "verifier": {"tool": "t"}},
    {"kind": "mcp", "command": ["srv"], "verifier": {}},
    {"kind": "mcp", "command": ["srv"], "verifier": {"tool": "t"}, "cwd": "/etc"},
    {"kind": "mcp", "command": ["srv"], "verifier": {"command": ["v"]}, "startupTimeoutS": 0},
    {"kind": "mcp", "command": ["srv"], "verifier": {"tool": "t"}, "task": "x" * 70_000},
    {"kind": "support-desk"},
    {
        "kind": "harbor-task",
        "name": "t",
        "treeSha256": "0" * 64,
        "treeBytes": 1,
        "files": 2,
        "agentTimeoutS": 60,
        "verifierTimeoutS": 60,
        "build": {},
    },  # refused by both: a Harbor task is uploaded with its files
]


@pytest.mark.bad_input
@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: json.dumps(a)[:60])
def test_the_evaluator_form_refuses_exactly_what_the_api_refuses(api, agent, count_rows):
    by_api = api.post("/api/v1/evaluator-configs", {"name": "api", "attemptCount": 2, "agent": agent})
    data = evaluator_form("form", source="json", config_json=json.dumps(agent), attemptCount="2")
    by_form = form_post(api, f"/evaluators/new?template={_agent_template(agent)}", data)
    if by_api.status_code == 201:
        assert by_form.status_code == 303, by_form.text
        assert count_rows("evaluator_configs", api.org) == 2
    else:
        assert by_form.status_code == 422
        assert by_api.json["detail"] in " ".join(texts(by_form.text, "#config_json-error, .error, .error-summary li"))
        assert count_rows("evaluator_configs", api.org) == 0


def _agent_template(agent: dict) -> str:
    return agent["kind"] if agent.get("kind") in ("command", "openai-chat", "oracle") else "scripted"


@pytest.mark.bad_input
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: json.dumps(s)[:60])
def test_the_environment_form_refuses_exactly_what_the_api_refuses(api, spec, count_rows):
    environment = api.post("/api/v1/environments", {"name": "api"}).json
    by_api = api.post(f"/api/v1/environments/{environment['id']}/versions", {"spec": spec})
    data = environment_form("form", source="json", config_json=json.dumps(spec))
    by_form = form_post(api, "/environments/new?template=mcp", data)
    versions = count_rows("environment_versions", api.org)
    if by_api.status_code == 201:
        assert by_form.status_code == 303, by_form.text
        assert versions == 2
    else:
        assert by_form.status_code == 422
        assert by_api.json["detail"] in " ".join(texts(by_form.text, "#config_json-error, .error, .error-summary li"))
        assert versions == 0 and count_rows("environments", api.org) == 1


def test_json_that_does_not_parse_is_refused_in_the_json_view(api, count_rows):
    answer = form_post(api, "/environments/new", environment_form("shop", source="json", config_json="{nope"))
    assert answer.status_code == 422 and "is not JSON" in refusal_at(answer.text, "config_json").replace("\n", " ")
    assert count_rows("environments", api.org) == 0


def test_a_new_version_shows_its_diff_and_sha_then_saves_and_an_unchanged_spec_names_its_version(api, count_rows):
    made = form_post(api, "/environments/new", environment_form("shop"))
    env_id = made.headers["Location"].rsplit("/", 1)[-1]
    url = f"/environments/{env_id}/versions/new"
    page = parse(api.get(url).text)
    assert attr(one(page, "#f-spec-params-skus"), "value") == "8"  # pre-filled from v1
    key = attr(one(page, "input[name=submission_key]"), "value")
    same = form_post(
        api,
        url,
        {
            "submission_key": key,
            "source": "fields",
            "spec.params.skus": "8",
            "spec.params.customers": "5",
            "action": "preview",
        },
    )
    assert same.status_code == 200 and "this spec is v1 already" in same.text
    refused = form_post(
        api,
        url,
        {
            "submission_key": key,
            "source": "fields",
            "spec.params.skus": "8",
            "spec.params.customers": "5",
            "action": "save",
        },
    )
    assert refused.status_code == 422 and count_rows("environment_versions", api.org) == 1
    changed = {"submission_key": key, "source": "fields", "spec.params.skus": "12", "spec.params.customers": "5"}
    preview = form_post(api, url, {**changed, "action": "preview"})
    assert preview.status_code == 200
    diff = one(preview.text, ".spec-diff").get_text()
    assert '-    "skus": 8' in diff and '+    "skus": 12' in diff
    sha = one(preview.text, ".sha").get_text()
    assert count_rows("environment_versions", api.org) == 1  # a preview writes nothing
    saved = form_post(api, url, {**changed, "action": "save"})
    assert saved.status_code == 303
    again = form_post(api, url, {**changed, "action": "save"})  # the same form twice: one version
    assert again.status_code in (303, 422)
    with api_session(api) as session:
        versions = session.scalars(select(EnvironmentVersion).order_by(EnvironmentVersion.version)).all()
        assert [(v.version, v.spec["params"]["skus"]) for v in versions] == [(1, 8), (2, 12)]
        assert versions[-1].spec_sha256 == sha
    assert count_rows("environment_versions", api.org) == 2


def test_a_new_version_keeps_a_secret_left_empty_and_takes_a_new_one(api):
    data = environment_form(
        "git",
        **{"spec.command": "srv", "spec.verifier.tool": "t", "spec.env.name.0": "TOKEN", "spec.env.value.0": "one"},
    )
    env_id = form_post(api, "/environments/new?template=mcp", data).headers["Location"].rsplit("/", 1)[-1]
    url = f"/environments/{env_id}/versions/new"
    page = parse(api.get(url).text)
    assert attr(one(page, "#f-spec-env-value-0"), "placeholder").startswith("set")
    assert "one" not in [attr(i, "value") for i in page.select("input[type=password][value]")]
    kept = {
        "source": "fields",
        "spec.command": "srv",
        "spec.verifier.tool": "t",
        "spec.task": "new task",
        "spec.env.name.0": "TOKEN",
        "spec.env.value.0": "",
    }
    assert form_post(api, url, {**kept, "submission_key": str(uuid.uuid4()), "action": "save"}).status_code == 303
    renewed = {**kept, "spec.task": "", "spec.env.value.0": "two"}
    preview = form_post(api, url, {**renewed, "submission_key": str(uuid.uuid4()), "action": "preview"})
    assert "Secret values set anew" in preview.text and "TOKEN" in one(preview.text, ".version-preview").get_text()
    assert form_post(api, url, {**renewed, "submission_key": str(uuid.uuid4()), "action": "save"}).status_code == 303
    with api_session(api) as session:
        versions = session.scalars(select(EnvironmentVersion).order_by(EnvironmentVersion.version)).all()
        assert [runnable_spec(session, v)["env"]["TOKEN"] for v in versions] == ["one", "one", "two"]


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("inputs", "input_id", "said"),
    [
        ({"name": ""}, "f-name", "Enter a name of 1 to 200 characters"),
        ({"name": "x" * 201}, "f-name", "Enter a name of 1 to 200 characters"),
        ({"attemptCount": ""}, "f-attemptCount", "Enter an attempt count: a whole number from 1 to 8"),
        ({"attemptCount": "two"}, "f-attemptCount", "Attempt count must be a whole number from 1 to 8"),
        ({"attemptCount": "9"}, "f-attemptCount", "Attempt count must be a whole number from 1 to 8"),
        ({"maxSteps": "0"}, "f-maxSteps", "Max steps must be a whole number from 1 to 500"),
        ({"timeoutS": "-1"}, "f-timeoutS", "Timeout (seconds) must be a number from 0 to 3600"),
        ({"agent.skill": "3"}, "f-agent-skill", "Skill must be a number from 0 to 1"),
        ({"agent.skill": "high"}, "f-agent-skill", "Skill must be a number from 0 to 1"),
        ({"agent.stepDelayS": "11"}, "f-agent-stepDelayS", "Step delay (seconds) must be a number from 0 to 10"),
    ],
)
def test_the_evaluator_form_refuses_in_place_and_keeps_the_form(api, count_rows, inputs, input_id, said):
    data = {**evaluator_form("novice"), **inputs}
    answer = form_post(api, "/evaluators/new?template=scripted", data)
    assert answer.status_code == 422
    assert said in refusal_at(answer.text, input_id)
    kept = one(answer.text, f"#{input_id}")
    assert attr(kept, "value") == next(iter(inputs.values()))
    assert count_rows("evaluator_configs", api.org) == 0


@pytest.mark.bad_input
def test_a_spec_over_64_kb_is_refused_by_the_form_and_the_api_alike(api, count_rows):
    data = environment_form("shop", **{"spec.command": "srv", "spec.verifier.tool": "t", "spec.task": "x" * 70_000})
    answer = form_post(api, "/environments/new?template=mcp", data)
    assert answer.status_code == 422
    assert re.search(r"spec is 68\.\d KB of JSON; it may hold at most 64 KB", one(answer.text, ".error-summary").text)
    assert one(answer.text, "#f-spec-task").get_text() == "x" * 70_000  # the form is kept
    environment = api.post("/api/v1/environments", {"name": "api"}).json
    spec = {"kind": "mcp", "command": ["srv"], "verifier": {"tool": "t"}, "task": "x" * 70_000}
    by_api = api.post(f"/api/v1/environments/{environment['id']}/versions", {"spec": spec})
    assert by_api.status_code == 400
    assert re.fullmatch(r"spec is 68\.\d KB of JSON; it may hold at most 64 KB", by_api.json["detail"])
    assert count_rows("environment_versions", api.org) == 0


def test_plain_vars_are_name_value_lines_shown_as_they_are(api, count_rows):
    data = environment_form("git", **{"spec.command": "srv", "spec.verifier.tool": "t", "spec.vars": "A=1\nBAD"})
    refused = form_post(api, "/environments/new?template=mcp", data)
    assert refused.status_code == 422
    assert "Plain variables: line 2 is not NAME=value" in refusal_at(refused.text, "f-spec-vars")
    made = form_post(api, "/environments/new?template=mcp", {**data, "spec.vars": "GIT_AUTHOR_NAME=tester\r\nMODE=a=b"})
    assert made.status_code == 303
    with api_session(api) as session:
        assert session.scalar(select(EnvironmentVersion)).spec["vars"] == {"GIT_AUTHOR_NAME": "tester", "MODE": "a=b"}
    assert "tester" in api.get(made.headers["Location"]).text  # plain: shown, unlike env values
    again = parse(api.get(f"{made.headers['Location']}/versions/new").text)
    assert one(again, "#f-spec-vars").get_text() == "GIT_AUTHOR_NAME=tester\nMODE=a=b"


def assert_each_link_names_its_input(html: str, links: list[tuple[str, str]]) -> None:
    """Every link of the summary leads to an input (or group) marked invalid, whose own message it repeats."""
    page = parse(html)
    for target, text in links:
        element = one(page, f"#{target}")
        assert f"{target}-error" in attr(element, "aria-describedby").split()
        if element.name != "fieldset":
            assert attr(element, "aria-invalid") == "true"
        assert one(page, f"#{target}-error").get_text().removeprefix("Error:").strip() == text


API_WORDS = ("must be text", "without NUL", "not ''", "attemptCount", "agent.", "spec.", "an integer")


@pytest.mark.bad_input
def test_every_refusal_of_the_evaluator_form_is_shown_at_once_in_the_pages_words(api, count_rows):
    data = {
        **evaluator_form(""),
        "attemptCount": "9",
        "maxSteps": "0",
        "checkpoint": "c" * 201,
        "agent.skill": "3",
        "agent.stepDelayS": "slow",
    }
    answer = form_post(api, "/evaluators/new?template=scripted", data)
    assert answer.status_code == 422
    links = error_summary_links(answer.text)
    assert links == [
        ("f-name", "Enter a name of 1 to 200 characters"),
        ("f-attemptCount", "Attempt count must be a whole number from 1 to 8"),
        ("f-maxSteps", "Max steps must be a whole number from 1 to 500"),
        ("f-checkpoint", "Checkpoint must be at most 200 characters"),
        ("f-agent-skill", "Skill must be a number from 0 to 1"),
        ("f-agent-stepDelayS", "Step delay (seconds) must be a number from 0 to 10"),
    ]
    assert_each_link_names_its_input(answer.text, links)
    shown = " ".join(texts(answer.text, ".error-summary, .error"))
    assert not [words for words in API_WORDS if words in shown]
    assert one(answer.text, "title").get_text().startswith("Error: New evaluator")
    assert count_rows("evaluator_configs", api.org) == 0


@pytest.mark.bad_input
def test_every_refusal_of_the_environment_form_is_shown_at_once_at_every_level(api, count_rows):
    data = environment_form(
        "",
        **{
            "spec.command": "",
            "spec.limits.memoryMb": "99999",
            "spec.vars": "A=1\nBAD",
            "spec.verifier.arguments": "{nope",
            "spec.startupTimeoutS": "0",
        },
    )
    answer = form_post(api, "/environments/new?template=mcp", data)
    assert answer.status_code == 422
    links = error_summary_links(answer.text)
    assert links == [
        ("f-name", "Enter a name of 1 to 200 characters"),
        ("f-spec-command", "Enter a command, one item per line"),
        ("f-spec-limits-memoryMb", "Memory (MB) must be a whole number from 1 to 8192"),
        ("f-spec-vars", "Plain variables: line 2 is not NAME=value"),
        ("f-spec-verifier", "Fill in the verifier: a tool or a command"),
        (
            "f-spec-verifier-arguments",
            "Arguments is not JSON (Expecting property name enclosed in double quotes at line 1)",
        ),
        ("f-spec-startupTimeoutS", "Startup timeout (seconds) must be a number from 1 to 300"),
    ]
    assert_each_link_names_its_input(answer.text, links)
    assert (count_rows("environments", api.org), count_rows("environment_versions", api.org)) == (0, 0)
    # A verifier with neither a tool nor a command is the group's refusal, linked to the group.
    no_verifier = form_post(api, "/environments/new?template=mcp", environment_form("git", **{"spec.command": "srv"}))
    assert error_summary_links(no_verifier.text) == [("f-spec-verifier", "Fill in the verifier: a tool or a command")]
    assert_each_link_names_its_input(no_verifier.text, error_summary_links(no_verifier.text))


@pytest.mark.bad_input
def test_a_new_versions_refusals_are_shown_at_once(api, count_rows):
    made = form_post(api, "/environments/new", environment_form("shop"))
    url = f"{made.headers['Location']}/versions/new"
    inputs = {"spec.params.skus": "50", "spec.params.customers": "many", "action": "save"}
    answer = form_post(api, url, {"submission_key": str(uuid.uuid4()), "source": "fields", **inputs})
    assert answer.status_code == 422
    assert error_summary_links(answer.text) == [
        ("f-spec-params-skus", "SKUs must be a whole number from 3 to 20"),
        ("f-spec-params-customers", "Customers must be a whole number from 2 to 12"),
    ]
    assert count_rows("environment_versions", api.org) == 1


def test_a_form_without_refusals_has_no_summary_and_labels_say_no_keys(api):
    for url in ("/environments/new?template=admin-console", "/environments/new?template=mcp", "/evaluators/new"):
        page = parse(api.get(url).text)
        assert page.select(".error-summary, .error") == []
        labels = [" ".join(label.get_text().split()) for label in page.select(".model-form label, .model-form legend")]
        assert not [label for label in labels if "code" in label or re.search(r"\b(\w+) \1\b", label, re.I)]
        assert page.select(".model-form code.key") == []
    labels = texts(api.get("/environments/new?template=admin-console").text, "label[for^=f-spec]")
    assert [" ".join(label.split()) for label in labels] == ["SKUs (optional)", "Customers (optional)"]
    agent = texts(api.get("/evaluators/new?template=openai-chat").text, "label[for=f-agent-apiKeyEnv]")
    assert [" ".join(label.split()) for label in agent] == ["API key variable (optional)"]


def test_a_taken_name_is_said_in_the_pages_words(api, count_rows):
    assert form_post(api, "/evaluators/new", evaluator_form("novice")).status_code == 303
    again = form_post(api, "/evaluators/new", {**evaluator_form("novice"), "attemptCount": "0"})
    assert again.status_code == 422
    assert error_summary_links(again.text) == [
        ("f-name", "An evaluator configuration named 'novice' already exists: choose another name"),
        ("f-attemptCount", "Attempt count must be a whole number from 1 to 8"),
    ]
    assert count_rows("evaluator_configs", api.org) == 1


def test_after_an_evaluator_is_created_it_offers_to_start_a_run_with_it(api, count_rows):
    shop = form_post(api, "/environments/new", environment_form("shop"))
    environment_id = shop.headers["Location"].rsplit("/", 1)[-1]
    made = form_post(api, "/evaluators/new", evaluator_form("novice"))
    assert made.status_code == 303
    landed = api.get(made.headers["Location"]).text
    assert "Created the evaluator novice." in landed
    start = one(landed, ".next-step a.button-link")
    assert start.get_text() == "Start a run with it"
    evaluator_id = made.headers["Location"].rsplit("=", 1)[-1]
    assert attr(start, "href") == f"/environments/{environment_id}?evaluatorConfigId={evaluator_id}#start-run"
    form = api.get(attr(start, "href")).text
    assert attr(one(form, f'#evaluator_config_id option[value="{evaluator_id}"]'), "selected") == ""
    started = form_post(
        api,
        f"/environments/{environment_id}/runs",
        {
            "environment_version_id": attr(one(form, "#environment_version_id option[selected]"), "value"),
            "evaluator_config_id": evaluator_id,
            "submission_key": attr(one(form, "#start-run input[name=submission_key]"), "value"),
        },
    )
    assert started.status_code == 303 and "/runs/" in started.headers["Location"]
    assert count_rows("evaluation_runs", api.org) == 1


def test_with_no_environment_yet_the_way_on_is_to_create_one(api):
    made = form_post(api, "/evaluators/new", evaluator_form("novice"))
    landed = api.get(made.headers["Location"]).text
    assert "A run needs an environment" in one(landed, ".next-step").get_text()
    assert attr(one(landed, ".next-step a"), "href") == "/environments/new"
