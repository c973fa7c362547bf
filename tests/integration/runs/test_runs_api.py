"""Starting and resetting runs through the JSON API and the pages: 202 on success, 4xx and nothing written."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from tests.factories import make_catalog
from tests.helpers import is_fragment, one

SCRIPTED = {"kind": "scripted", "skill": 1.0}


@pytest.fixture
def catalog(database, member):
    return make_catalog(database, member.org.id, SCRIPTED, attempt_count=4)


def test_create_run_answers_202_with_the_queued_run(api, client, catalog):
    response = api.post(
        "/api/v1/evaluation-runs",
        {"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)},
    )
    assert response.status_code == 202
    run = response.json
    assert run["status"] == "queued" and run["attemptCount"] == 4 and run["resetMode"] == "initial"
    assert run["environmentVersionId"] == str(catalog.version_id) and run["trials"] == []
    assert response.headers["Location"] == f"/api/v1/evaluation-runs/{run['id']}"
    assert client.get(response.headers["Location"]).json["status"] == "queued"


def test_attempt_count_overrides_the_configuration(api, catalog):
    body = {"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)}
    assert api.post("/api/v1/evaluation-runs", {**body, "attemptCount": 8}).json["attemptCount"] == 8


@pytest.mark.parametrize("attempts", [0, 9, -1, 1.5, 8.5, "x", "3", True, [1]])
@pytest.mark.bad_input
def test_bad_attempt_count_answers_400_naming_the_range_and_writes_nothing(api, catalog, attempts, count_rows):
    body = {
        "environmentVersionId": str(catalog.version_id),
        "evaluatorConfigId": str(catalog.config_id),
        "attemptCount": attempts,
    }
    response = api.post("/api/v1/evaluation-runs", body)
    assert response.status_code == 400
    assert response.json["error"] == "invalid attemptCount"
    assert "from 1 to 8" in response.json["detail"]
    assert count_rows("evaluation_runs") == 0


@pytest.mark.bad_input
def test_unknown_or_other_orgs_ids_answer_404_naming_the_id(api, catalog, database, make_member, count_rows):
    other = make_member("bob@globex.test", "Globex Research")
    theirs = make_catalog(database, other.org.id, SCRIPTED)
    missing = uuid.uuid4()
    for version_id, config_id, named in (
        (missing, catalog.config_id, missing),
        (theirs.version_id, catalog.config_id, theirs.version_id),
        (catalog.version_id, theirs.config_id, theirs.config_id),
    ):
        response = api.post(
            "/api/v1/evaluation-runs", {"environmentVersionId": str(version_id), "evaluatorConfigId": str(config_id)}
        )
        assert response.status_code == 404
        assert str(named) in response.json["detail"]
    assert count_rows("evaluation_runs") == 0


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"evaluatorConfigId": "x"}, "missing environmentVersionId"),
        ({"environmentVersionId": "not-a-uuid", "evaluatorConfigId": "x"}, "invalid environmentVersionId"),
        ([1, 2], "invalid JSON body"),
    ],
)
@pytest.mark.bad_input
def test_malformed_bodies_answer_400(api, catalog, body, error, count_rows):
    response = api.post("/api/v1/evaluation-runs", body)
    assert response.status_code == 400 and response.json["error"] == error
    assert count_rows("evaluation_runs") == 0


@pytest.mark.bad_input
def test_invalid_json_answers_400(client, auth, member, catalog, count_rows):
    auth.login(member.email)
    response = client.post(
        "/api/v1/evaluation-runs", data="{nope", content_type="application/json", headers={"X-CSRFToken": auth.csrf()}
    )
    assert response.status_code == 400 and response.json["error"] == "invalid JSON body"
    assert count_rows("evaluation_runs") == 0


@pytest.mark.bad_input
@pytest.mark.parametrize("body", [b'{"environmentVersionId": "\xff"}', '{"x": 1}'.encode("utf-16")])
def test_a_body_that_is_not_utf8_answers_400(client, auth, member, catalog, count_rows, body):
    auth.login(member.email)
    response = client.post(
        "/api/v1/evaluation-runs", data=body, content_type="application/json", headers={"X-CSRFToken": auth.csrf()}
    )
    assert response.status_code == 400 and response.json["error"] == "invalid JSON body"
    assert count_rows("evaluation_runs") == 0


@pytest.mark.bad_input
def test_json_post_without_csrf_header_is_refused(client, auth, member, catalog, count_rows):
    auth.login(member.email)
    body = {"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)}
    response = client.post("/api/v1/evaluation-runs", json=body)
    assert response.status_code == 400 and response.is_json
    assert count_rows("evaluation_runs") == 0


def test_viewer_cannot_start_runs(viewer_api, database, count_rows):
    catalog = make_catalog(database, viewer_api.org.id, SCRIPTED)
    body = {"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)}
    response = viewer_api.post("/api/v1/evaluation-runs", body)
    assert response.status_code == 403
    assert count_rows("evaluation_runs") == 0


def _queued_run(api, catalog) -> dict:
    return api.post(
        "/api/v1/evaluation-runs",
        {"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)},
    ).json


@pytest.mark.parametrize("mode", ["new_workspace", "new_world"])
def test_reset_enqueues_a_new_run_on_the_same_version(api, catalog, owner_engine, mode):
    original = _queued_run(api, catalog)
    response = api.post(f"/api/v1/evaluation-runs/{original['id']}/reset", {"mode": mode})
    assert response.status_code == 202
    reset = response.json
    assert reset["id"] != original["id"] and reset["status"] == "queued"
    assert reset["environmentVersionId"] == original["environmentVersionId"]
    assert (reset["resetMode"], reset["resetOfRunId"], reset["attemptCount"]) == (mode, original["id"], 4)
    with owner_engine.connect() as conn:
        worlds = dict(conn.execute(text("SELECT id::text, world_seed FROM evaluation_runs")).all())
    assert (worlds[reset["id"]] == worlds[original["id"]]) is (mode == "new_workspace")


@pytest.mark.parametrize("body", [{"mode": "sideways"}, {}, {"mode": None}])
@pytest.mark.bad_input
def test_reset_with_a_bad_mode_answers_400_and_writes_nothing(api, catalog, body, count_rows):
    original = _queued_run(api, catalog)
    response = api.post(f"/api/v1/evaluation-runs/{original['id']}/reset", body)
    assert response.status_code == 400
    assert response.json["error"] == "invalid mode"
    assert "new_workspace, new_world" in response.json["detail"]
    assert count_rows("evaluation_runs") == 1


def test_reset_or_get_of_an_unknown_run_answers_404(api, client, catalog):
    missing = uuid.uuid4()
    assert api.post(f"/api/v1/evaluation-runs/{missing}/reset", {"mode": "new_world"}).status_code == 404
    response = client.get(f"/api/v1/evaluation-runs/{missing}")
    assert response.status_code == 404 and response.json["error"] == "not found"


def test_start_run_form_redirects_to_the_run_page(client, auth, member, catalog):
    auth.login(member.email)
    page = client.get(f"/environments/{catalog.environment_id}")
    assert page.status_code == 200 and "Start a run" in page.text
    response = client.post(
        f"/environments/{catalog.environment_id}/runs",
        data={
            "csrf_token": auth.csrf(),
            "environment_version_id": str(catalog.version_id),
            "evaluator_config_id": str(catalog.config_id),
            "attempt_count": "3",
        },
    )
    assert response.status_code == 303 and response.location.startswith("/runs/")
    run_page = client.get(response.location)
    assert "0 of 3 trials" in run_page.text and one(run_page.text, '#run-live[hx-trigger="every 2s"]')  # it polls


@pytest.mark.parametrize("value", ["0", "9", "x", "1.5"])
@pytest.mark.bad_input
def test_start_run_form_shows_errors_in_place_with_422(client, auth, member, catalog, value, count_rows):
    auth.login(member.email)
    response = client.post(
        f"/environments/{catalog.environment_id}/runs",
        data={
            "csrf_token": auth.csrf(),
            "environment_version_id": str(catalog.version_id),
            "evaluator_config_id": str(catalog.config_id),
            "attempt_count": value,
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 422
    assert is_fragment(response.text) and "from 1 to 8" in response.text
    assert count_rows("evaluation_runs") == 0


def test_reset_buttons_enqueue_and_go_to_the_new_run(client, auth, api, catalog, database):
    from tests.factories import finish_run

    original = {"id": finish_run(database, catalog)}  # Reset is offered on finished runs only
    page = client.get(f"/runs/{original['id']}")
    assert "Reset (new_workspace)" in page.text and "Reset (new_world)" in page.text
    response = client.post(f"/runs/{original['id']}/reset", data={"mode": "new_world", "csrf_token": auth.csrf()})
    assert response.status_code == 303
    new_page = client.get(response.location)
    assert "reset mode new_world" in new_page.text and "resets" in new_page.text


def test_other_orgs_pages_answer_404(client, auth, member, database, make_member):
    other = make_member("bob@globex.test", "Globex Research")
    theirs = make_catalog(database, other.org.id, SCRIPTED)
    auth.login(member.email)
    assert client.get(f"/environments/{theirs.environment_id}").status_code == 404
    assert client.get(f"/runs/{uuid.uuid4()}").status_code == 404
