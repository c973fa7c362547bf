"""Bad input everywhere: unknown and malformed ids on every route, broken forms and bodies, hostile text.

Each answers a clear 4xx (JSON under /api/, a page elsewhere) and changes nothing.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from sqlalchemy import text
from werkzeug.routing import UUIDConverter

from tests.factories import make_catalog
from tests.helpers import parse, table_counts, texts

pytestmark = pytest.mark.bad_input

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>\x07\x1b[31m' + "W" * 3000


@pytest.fixture
def owner(client, auth, owner):
    """The owner of Acme RL, logged in on `client`."""
    auth.login(owner.email)
    return owner


def uuid_routes(app):
    """Every (rule, method) whose URL holds an id."""
    for rule in app.url_map.iter_rules():
        if any(isinstance(c, UUIDConverter) for c in rule._converters.values()):
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                yield rule, method


def test_unknown_ids_answer_404_on_every_route_and_write_nothing(app, client, auth, owner, count_rows):
    before = table_counts(count_rows, owner.org.id)
    token, checked = auth.csrf(), 0
    for rule, method in uuid_routes(app):
        with app.test_request_context():
            url = app.url_for(rule.endpoint, **{name: uuid.uuid4() for name in rule.arguments})
        kwargs = {"headers": {"X-CSRFToken": token}}
        if method == "POST":
            kwargs["json" if url.startswith("/api/") else "data"] = (
                {"mode": "new_world", "spec": {"environment": "admin-console"}}
                if url.startswith("/api/")
                else {"csrf_token": token, "mode": "new_world", "role": "viewer"}
            )
        response = client.open(url, method=method, **kwargs)
        assert response.status_code == 404, (method, url, response.status_code)
        if url.startswith("/api/"):
            assert response.is_json and response.json["error"] == "not found"
        else:
            assert texts(response.text, "h1") == ["Not Found"]
        checked += 1
    assert checked >= 14
    assert table_counts(count_rows, owner.org.id) == before


@pytest.mark.parametrize("bad", ["not-a-uuid", "1234", "'; DROP TABLE rollouts; --", "%00", "0" * 33])
def test_malformed_ids_in_paths_answer_404(app, client, owner, bad):
    for url in (
        f"/environments/{bad}",
        f"/runs/{bad}",
        f"/trials/{bad}",
        f"/api/v1/evaluation-runs/{bad}",
        f"/api/v1/rollouts/{bad}",
        f"/api/v1/artifacts/{bad}",
        f"/partial-rewards/versions/{bad}",
    ):
        assert client.get(url).status_code == 404, url


@pytest.mark.parametrize(
    ("url", "param"),
    [
        ("/trials", "environmentId"),
        ("/trials", "environmentVersionId"),
        ("/trials", "evaluationRunId"),
        ("/trials", "after"),
        ("/trials", "evaluatorConfigId"),
        ("/api/v1/trials", "environmentId"),
        ("/api/v1/trials", "after"),
        ("/api/v1/rollouts", "evaluatorConfigId"),
        ("/capability-gap", "environmentId"),
        ("/capability-gap", "environmentVersionId"),
        ("/capability-gap", "evaluatorConfigId"),
        ("/partial-rewards", "evaluatorConfigId"),
        ("/api/v1/rollouts", "environmentId"),
        ("/api/v1/rollouts", "environmentVersionId"),
        ("/api/v1/rollouts", "evaluationRunId"),
        ("/api/v1/rollouts", "after"),
    ],
)
@pytest.mark.parametrize("bad", ["nope", "12", "' OR 1=1 --"])
def test_malformed_ids_in_query_strings_answer_400(client, owner, url, param, bad):
    response = client.get(url, query_string={param: bad})
    assert response.status_code == 400, (url, param)
    assert param in (response.json["error"] if url.startswith("/api/") else response.text)


@pytest.mark.parametrize(
    "bad",
    [
        "nope",
        "' OR 1=1 --",
        "%00",
        "\x00",
        "0" * 33,
        "{{7*7}}",
        "<script>alert(1)</script>",
        "00000000-0000-0000-0000-00000000000g",
        "a" * 5000,
        "00000000-0000-0000-0000-000000000000' --",
    ],
)
def test_hostile_evaluator_filters_answer_400_and_echo_nothing_raw(client, owner, database, bad):
    catalog = make_catalog(database, owner.org.id, {"kind": "scripted", "skill": 0.5})
    for url in ("/capability-gap", "/partial-rewards", f"/partial-rewards/versions/{catalog.version_id}"):
        for headers in ({}, {"HX-Request": "true"}):
            response = client.get(url, query_string={"evaluatorConfigId": bad}, headers=headers)
            assert response.status_code == 400, (url, bad)
            assert "evaluatorConfigId must be a UUID" in response.text
            assert "<script>alert(1)" not in response.text and "\x00" not in response.text


def test_unknown_evaluator_filters_answer_404_and_blank_ones_mean_every_evaluator(client, owner, database):
    catalog = make_catalog(database, owner.org.id, {"kind": "scripted", "skill": 0.5})
    for url in ("/capability-gap", "/partial-rewards", f"/partial-rewards/versions/{catalog.version_id}"):
        for unknown in (uuid.uuid4(), uuid.UUID(int=0), str(uuid.uuid4()).upper(), uuid.uuid4().hex):
            response = client.get(url, query_string={"evaluatorConfigId": str(unknown)})
            assert response.status_code == 404, (url, unknown)
            assert "No evaluator configuration" in response.text
        for blank in ("", " ", "\t"):
            assert client.get(url, query_string={"evaluatorConfigId": blank}).status_code == 200, (url, blank)
        # A repeated parameter: the first one counts, as for every other filter.
        twice = client.get(f"{url}?evaluatorConfigId={catalog.config_id}&evaluatorConfigId=nope")
        assert twice.status_code == 200, url


@pytest.mark.parametrize(
    ("url", "data", "status", "text_"),
    [
        ("/orgs/switch", {}, 400, "organization_id must be the id"),
        ("/login", {"email": ""}, 400, "Enter your email and password."),
        ("/settings/members", {}, 422, "Enter the new member"),
    ],
)
def test_forms_with_missing_fields_answer_4xx(client, auth, owner, count_rows, url, data, status, text_):
    before = table_counts(count_rows, owner.org.id)
    response = client.post(url, data={**data, "csrf_token": auth.csrf()})
    assert response.status_code == status and text_ in parse(response.text).get_text()
    assert table_counts(count_rows, owner.org.id) == before


def test_run_forms_with_missing_fields(client, auth, owner, database, count_rows):
    catalog = make_catalog(database, owner.org.id, {"kind": "scripted"}, attempt_count=1)
    before = table_counts(count_rows, owner.org.id)
    empty = client.post(f"/environments/{catalog.environment_id}/runs", data={"csrf_token": auth.csrf()})
    assert empty.status_code == 422 and "Choose an environment version." in empty.text
    other = client.post(
        f"/environments/{catalog.environment_id}/runs",
        data={
            "csrf_token": auth.csrf(),
            "environment_version_id": str(uuid.uuid4()),
            "evaluator_config_id": str(catalog.config_id),
        },
    )
    assert other.status_code == 422 and "Choose a version of this environment." in other.text
    assert table_counts(count_rows, owner.org.id) == before


@pytest.mark.parametrize(
    "body",
    [b"{", b"[]", b"null", b"\xff\xfe", b'{"environmentVersionId": ' + b"[" * 5000, b'"string"', b"1e999"],
)
def test_invalid_json_bodies_answer_400(client, auth, owner, count_rows, body):
    before = table_counts(count_rows, owner.org.id)
    for url in ("/api/v1/evaluation-runs", "/api/v1/environments", "/api/v1/evaluator-configs"):
        response = client.post(url, data=body, content_type="application/json", headers={"X-CSRFToken": auth.csrf()})
        assert response.status_code == 400, (url, body[:20])
        assert response.is_json and response.json["error"]
    assert table_counts(count_rows, owner.org.id) == before


@pytest.mark.parametrize("mode", ["", "NEW_WORLD", "new world", "initial", None, 1, ["new_world"]])
def test_unknown_reset_modes_answer_400(client, auth, owner, database, count_rows, mode):
    catalog = make_catalog(database, owner.org.id, {"kind": "scripted"}, attempt_count=1)
    run = client.post(
        "/api/v1/evaluation-runs",
        json={"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)},
        headers={"X-CSRFToken": auth.csrf()},
    ).json
    before = table_counts(count_rows, owner.org.id)
    response = client.post(
        f"/api/v1/evaluation-runs/{run['id']}/reset", json={"mode": mode}, headers={"X-CSRFToken": auth.csrf()}
    )
    assert response.status_code == 400 and "new_workspace, new_world" in response.json["detail"]
    form_mode = "" if mode is None else json.dumps(mode) if not isinstance(mode, str) else mode
    form = client.post(f"/runs/{run['id']}/reset", data={"mode": form_mode, "csrf_token": auth.csrf()})
    assert form.status_code == 400
    assert table_counts(count_rows, owner.org.id) == before


def test_hostile_names_and_text_render_escaped_and_readable_everywhere(client, auth, owner, database):
    token = auth.csrf()
    env = client.post(
        "/api/v1/environments",
        json={"name": HOSTILE[:200], "description": HOSTILE[:2000]},
        headers={"X-CSRFToken": token},
    ).json
    version = client.post(
        f"/api/v1/environments/{env['id']}/versions",
        json={"spec": {"environment": "admin-console"}},
        headers={"X-CSRFToken": token},
    ).json
    config = client.post(
        "/api/v1/evaluator-configs",
        json={"name": HOSTILE[:200], "agent": {"kind": "scripted"}, "attemptCount": 1},
        headers={"X-CSRFToken": token},
    ).json
    client.post(
        "/api/v1/evaluation-runs",
        json={"environmentVersionId": version["id"], "evaluatorConfigId": config["id"]},
        headers={"X-CSRFToken": token},
    )
    import threading

    from worker.loop import WorkerSettings, run_workers

    run_workers(database, WorkerSettings(), threading.Event(), 1, until_idle=True)
    with database.session(owner.org.id) as session:
        run_id, trial_id = session.execute(text("SELECT evaluation_run_id, id FROM evaluation_trials")).one()
    pages = [
        "/environments",
        f"/environments/{env['id']}",
        f"/environments/{env['id']}/export",
        f"/runs/{run_id}",
        f"/trials/{trial_id}",
        "/trials",
        "/capability-gap",
        "/partial-rewards",
    ]
    for url in pages:
        body = client.get(url).text
        assert "<script>alert" not in body and "<img src=x" not in body, url  # the raw bytes carry no live markup
        assert "\x07" not in body and "\x1b" not in body, url
        if url in ("/environments", f"/environments/{env['id']}", f"/runs/{run_id}", "/trials"):
            shown = parse(body).get_text()  # the hostile name, shown as text rather than run
            assert '<script>alert("x")</script>' in shown and "\u2407\u241b[31m" in shown, url
    for kind in ("all", "failed", "successful", "preference"):
        for fmt in ("atif-shaped", "atif", "trl"):
            raw = client.get(f"/api/v1/rollouts?kind={kind}&format={fmt}").get_data(as_text=True)
            lines = raw.splitlines()
            assert all(json.loads(line) for line in lines), (kind, fmt)
            assert raw.count("\n") == len(lines)


def test_very_long_lines_wrap_instead_of_overflowing(client, owner):
    with client.get("/static/app.css") as response:
        css = response.text
    assert re.search(r"pre \{[^}]*white-space: pre-wrap", css) and "overflow-wrap: anywhere" in css


def test_nul_characters_answer_400_not_500(client, auth, owner, count_rows):
    before = table_counts(count_rows, owner.org.id)
    api = client.post("/api/v1/environments", json={"name": "a\x00b"}, headers={"X-CSRFToken": auth.csrf()})
    assert api.status_code == 400 and "NUL" in api.json["detail"]
    page = client.get("/trials", query_string={"failureCategory": "gave\x00up"})
    assert page.status_code == 400 and "NUL" in page.text
    assert table_counts(count_rows, owner.org.id) == before


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/v1/environments", b'{"name": "a\\ud800b"}'),
        ("/api/v1/environments", b'{"name": "ok", "description": "\\udfff"}'),
        ("/api/v1/labels", b'{"name": "flaky\\udbff"}'),
        ("/api/v1/evaluator-configs", b'{"name": "x", "agent": {"kind": "scripted", "note": ["\\ud83d"]}}'),
    ],
    ids=["high half", "low half", "label", "nested"],
)
def test_a_lone_utf16_surrogate_answers_400_naming_it_not_500(client, auth, owner, count_rows, url, body):
    """JSON may escape half of a surrogate pair; no UTF-8 text holds it, and PostgreSQL refused it with a 500."""
    before = table_counts(count_rows, owner.org.id)
    answer = client.post(url, data=body, content_type="application/json", headers={"X-CSRFToken": auth.csrf()})
    assert answer.status_code == 400, answer.get_data(as_text=True)[:300]
    assert "a lone UTF-16 surrogate" in answer.json["detail"]
    assert table_counts(count_rows, owner.org.id) == before


def test_a_whole_surrogate_pair_is_the_character_it_escapes(client, auth, owner):
    answer = client.post(
        "/api/v1/environments",
        data=b'{"name": "rocket \\ud83d\\ude80"}',
        content_type="application/json",
        headers={"X-CSRFToken": auth.csrf()},
    )
    assert answer.status_code == 201 and answer.json["name"] == "rocket \U0001f680"
