"""Creating environments, immutable versions (the spec must validate) and evaluator configurations."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.bad_input


def test_environment_then_versions_numbered_and_hashed(api, client):
    env = api.post("/api/v1/environments", {"name": "admin-console", "description": "shop"})
    assert env.status_code == 201
    spec = {"environment": "admin-console", "params": {"skus": 4}}
    first = api.post(f"/api/v1/environments/{env.json['id']}/versions", {"spec": spec})
    second = api.post(f"/api/v1/environments/{env.json['id']}/versions", {"spec": {**spec, "params": {"skus": 5}}})
    assert (first.status_code, second.status_code) == (201, 201)
    assert (first.json["version"], second.json["version"]) == (1, 2)
    assert first.json["spec"] == {
        "kind": "builtin",
        "environment": "admin-console",
        "params": {"skus": 4, "customers": 5},
    }
    assert first.json["specSha256"] != second.json["specSha256"] and len(first.json["specSha256"]) == 64
    assert client.get("/api/v1/environments").json[0]["latestVersion"] == 2


@pytest.mark.parametrize(
    ("spec", "detail"),
    [
        ({"environment": "nope"}, "spec.environment must be one of admin-console, support-desk"),
        ({"environment": "admin-console", "params": {"skus": 0}}, "params.skus must be an integer from 3 to 20"),
        ({"environment": "admin-console", "params": []}, "spec.params must be a JSON object"),
        ("admin-console", "spec must be a JSON object"),
        ({"kind": "docker", "environment": "admin-console"}, "spec.kind must be 'builtin'"),
    ],
)
def test_a_spec_that_does_not_validate_answers_400_and_writes_nothing(api, spec, detail, count_rows):
    env = api.post("/api/v1/environments", {"name": "admin-console"}).json
    response = api.post(f"/api/v1/environments/{env['id']}/versions", {"spec": spec})
    assert response.status_code == 400 and response.json["error"] == "invalid spec"
    assert detail in response.json["detail"]
    assert count_rows("environment_versions", api.org) == 0


@pytest.mark.parametrize(
    ("url", "body", "status", "error"),
    [
        ("/api/v1/environments", {}, 400, "invalid name"),
        ("/api/v1/environments", {"name": ""}, 400, "invalid name"),
        ("/api/v1/environments", {"name": "x" * 201}, 400, "invalid name"),
        ("/api/v1/environments", {"name": "ok", "description": 5}, 400, "invalid description"),
        ("/api/v1/environments/6d1f2c3e-8b4a-4e0f-9a7d-2c5b1e0f4a99/versions", {"spec": {}}, 404, "not found"),
        ("/api/v1/evaluator-configs", {"name": "c", "agent": {"kind": "scripted"}}, 400, "invalid attemptCount"),
        (
            "/api/v1/evaluator-configs",
            {"name": "c", "agent": {"kind": "scripted"}, "attemptCount": 9},
            400,
            "invalid attemptCount",
        ),
        (
            "/api/v1/evaluator-configs",
            {"name": "c", "agent": {"kind": "psychic"}, "attemptCount": 2},
            400,
            "invalid agent",
        ),
        (
            "/api/v1/evaluator-configs",
            {"name": "c", "agent": {"kind": "scripted", "skill": 3}, "attemptCount": 2},
            400,
            "invalid agent",
        ),
        (
            "/api/v1/evaluator-configs",
            {"name": "c", "agent": {"kind": "command", "argv": []}, "attemptCount": 2},
            400,
            "invalid agent",
        ),
        (
            "/api/v1/evaluator-configs",
            {"name": "c", "agent": {"kind": "scripted"}, "attemptCount": 2, "maxSteps": 0},
            400,
            "invalid maxSteps",
        ),
        (
            "/api/v1/evaluator-configs",
            {"name": "c", "agent": {"kind": "scripted"}, "attemptCount": 2, "timeoutS": -1},
            400,
            "invalid timeoutS",
        ),
    ],
)
def test_bad_catalog_input_answers_4xx_and_writes_nothing(api, url, body, status, error, count_rows):
    api.post("/api/v1/environments", {"name": "existing"})
    before = (count_rows("environments", api.org), count_rows("evaluator_configs", api.org))
    assert before == (1, 0)
    response = api.post(url, body)
    assert response.status_code == status and response.json["error"] == error
    after = (count_rows("environments", api.org), count_rows("evaluator_configs", api.org))
    assert after == before


def test_duplicate_names_answer_409(api):
    assert api.post("/api/v1/environments", {"name": "a"}).status_code == 201
    assert api.post("/api/v1/environments", {"name": "a"}).status_code == 409
    config = {"name": "c", "agent": {"kind": "scripted"}, "attemptCount": 2}
    assert api.post("/api/v1/evaluator-configs", config).status_code == 201
    assert api.post("/api/v1/evaluator-configs", config).status_code == 409


def test_viewers_cannot_create(viewer_api, count_rows):
    response = viewer_api.post("/api/v1/environments", {"name": "x"})
    assert response.status_code == 403
    assert count_rows("environments", viewer_api.org) == 0


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("constant", "said"),
    [
        ("NaN", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
        ("-Infinity", "-Infinity is not a JSON number"),
        ("-1e999", "-1e999 is too large a number"),
    ],
)
def test_a_body_with_python_only_numbers_answers_400_naming_them_and_writes_nothing(
    client, auth, member, constant, said, count_rows
):
    # Python's json module reads and writes NaN and Infinity; JSON has neither, and jsonb refuses them.
    auth.login(member.email)
    env = client.post("/api/v1/environments", json={"name": "mcp-git"}, headers={"X-CSRFToken": auth.csrf()}).json
    spec = json.dumps({"kind": "mcp", "command": ["x"], "verifier": {"tool": "score", "arguments": {"weight": 0}}})
    response = client.post(
        f"/api/v1/environments/{env['id']}/versions",
        data='{"spec": ' + spec.replace('"weight": 0', f'"weight": {constant}') + "}",
        content_type="application/json",
        headers={"X-CSRFToken": auth.csrf()},
    )
    assert response.status_code == 400
    assert response.json == {
        "error": "invalid JSON body",
        "detail": f"the body must be a JSON object ({said})",
    }
    assert count_rows("environment_versions") == 0
