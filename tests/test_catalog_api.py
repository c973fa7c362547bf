"""Creating environments, immutable versions (the spec must validate) and evaluator configurations."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

pytestmark = pytest.mark.bad_input


@pytest.fixture
def api(client, auth, make_member):
    member = make_member("mike@acme.test", "Acme RL", "member")
    auth.login(member.email)
    token = auth.csrf()

    def post(url, body):
        return client.post(url, json=body, headers={"X-CSRFToken": token})

    post.org = member.org
    return post


def count(owner_engine, table, org_id) -> int:
    """Rows of `table` in the organization (the owner role is under forced RLS too, so scope it)."""
    with owner_engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :o, true)"), {"o": str(org_id)})
        return conn.execute(text(f"SELECT count(*) FROM {table}")).scalar()


def test_environment_then_versions_numbered_and_hashed(api, client):
    env = api("/api/v1/environments", {"name": "admin-console", "description": "shop"})
    assert env.status_code == 201
    spec = {"environment": "admin-console", "params": {"skus": 4}}
    first = api(f"/api/v1/environments/{env.json['id']}/versions", {"spec": spec})
    second = api(f"/api/v1/environments/{env.json['id']}/versions", {"spec": {**spec, "params": {"skus": 5}}})
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
def test_a_spec_that_does_not_validate_answers_400_and_writes_nothing(api, owner_engine, spec, detail):
    env = api("/api/v1/environments", {"name": "admin-console"}).json
    response = api(f"/api/v1/environments/{env['id']}/versions", {"spec": spec})
    assert response.status_code == 400 and response.json["error"] == "invalid spec"
    assert detail in response.json["detail"]
    with owner_engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :o, true)"), {"o": str(api.org.id)})
        assert conn.execute(text("SELECT count(*) FROM environment_versions")).scalar() == 0


@pytest.mark.parametrize(
    ("url", "body", "status", "error"),
    [
        ("/api/v1/environments", {}, 400, "invalid name"),
        ("/api/v1/environments", {"name": ""}, 400, "invalid name"),
        ("/api/v1/environments", {"name": "x" * 201}, 400, "invalid name"),
        ("/api/v1/environments", {"name": "ok", "description": 5}, 400, "invalid description"),
        (f"/api/v1/environments/{uuid.uuid4()}/versions", {"spec": {}}, 404, "not found"),
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
def test_bad_catalog_input_answers_4xx_and_writes_nothing(api, owner_engine, url, body, status, error):
    api("/api/v1/environments", {"name": "existing"})
    before = (count(owner_engine, "environments", api.org.id), count(owner_engine, "evaluator_configs", api.org.id))
    assert before == (1, 0)
    response = api(url, body)
    assert response.status_code == status and response.json["error"] == error
    after = (count(owner_engine, "environments", api.org.id), count(owner_engine, "evaluator_configs", api.org.id))
    assert after == before


def test_duplicate_names_answer_409(api):
    assert api("/api/v1/environments", {"name": "a"}).status_code == 201
    assert api("/api/v1/environments", {"name": "a"}).status_code == 409
    config = {"name": "c", "agent": {"kind": "scripted"}, "attemptCount": 2}
    assert api("/api/v1/evaluator-configs", config).status_code == 201
    assert api("/api/v1/evaluator-configs", config).status_code == 409


def test_viewers_cannot_create(client, auth, make_member, owner_engine):
    viewer = make_member("val@acme.test", "Acme RL", "viewer")
    auth.login(viewer.email)
    response = client.post("/api/v1/environments", json={"name": "x"}, headers={"X-CSRFToken": auth.csrf()})
    assert response.status_code == 403
    assert count(owner_engine, "environments", viewer.org.id) == 0
