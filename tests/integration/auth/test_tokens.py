"""Personal API tokens: shown once, stored hashed, same org scope and role as the user's session, revocable."""

from __future__ import annotations

import hashlib
import re

import pytest
from sqlalchemy import text

from tests.factories import make_catalog
from tests.helpers import attr, create_token, one


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_cli_token_prints_the_token_alone_on_its_last_line_and_stores_only_a_hash(runner, owner, owner_engine):
    token = create_token(runner, owner.email, "Acme RL")
    assert re.fullmatch(r"afk_[A-Za-z0-9_-]{40,}", token)
    with owner_engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :o, true)"), {"o": str(owner.org.id)})
        row = conn.execute(text("SELECT prefix, token_sha256 FROM api_tokens")).one()
    assert token.startswith(row.prefix) and bytes(row.token_sha256) == hashlib.sha256(token.encode()).digest()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create-token", "ghost@acme.test", "--org", "Acme RL"], "is not a member of Acme RL"),
        (["create-token", "olga@acme.test", "--org", "Nowhere"], "no organization named"),
    ],
)
def test_cli_token_bad_input(runner, owner, args, message):
    result = runner.invoke(args=args)
    assert result.exit_code == 1 and message in result.output


def test_a_token_downloads_failed_rollouts_without_cookie_or_csrf(app, runner, owner, database):
    catalog = make_catalog(database, owner.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=2)
    token = create_token(runner, owner.email, "Acme RL")
    client = app.test_client()
    response = client.get("/api/v1/rollouts?kind=failed", headers=bearer(token))
    assert response.status_code == 200 and response.headers["X-Privacy-Class"] == "PRIVATE"
    assert "Set-Cookie" not in response.headers  # token requests never start a session
    created = client.post(
        "/api/v1/evaluation-runs",
        headers=bearer(token),
        json={"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)},
    )
    assert created.status_code == 202  # no CSRF token needed with a bearer token
    assert client.get("/api/v1/me", headers=bearer(token)).json["email"] == owner.email


@pytest.mark.parametrize("token", ["", "afk_unknown", "Bearer", "x" * 500])
def test_unknown_tokens_answer_401_json(app, owner, token):
    response = app.test_client().get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401 and response.json["error"] in ("invalid token", "authentication required")


def test_a_bad_token_is_refused_even_with_a_valid_session(client, auth, owner):
    auth.login(owner.email)
    assert client.get("/api/v1/me").status_code == 200
    assert client.get("/api/v1/me", headers=bearer("afk_forged")).status_code == 401


def test_tokens_are_scoped_to_their_organization_and_the_users_role(app, runner, make_member, join, database):
    viewer = make_member("val@acme.test", "Acme RL", "viewer")
    other = make_member("gus@globex.test", "Globex Research", "owner")
    join(viewer, other.org, "owner")
    theirs = make_catalog(database, other.org.id, {"kind": "scripted"}, attempt_count=1)
    token = create_token(runner, viewer.email, "Acme RL")
    client = app.test_client()
    me = client.get("/api/v1/me", headers=bearer(token)).json
    assert me["organizationId"] == str(viewer.org.id) and me["role"] == "viewer"
    assert client.get(f"/api/v1/rollouts?environmentVersionId={theirs.version_id}", headers=bearer(token)).data == b""
    write = client.post("/api/v1/environments", json={"name": "x"}, headers=bearer(token))
    assert write.status_code == 403  # a viewer's token is read-only, like the viewer


def test_every_api_route_accepts_a_token(app, runner, owner):
    token = create_token(runner, owner.email, "Acme RL")
    client = app.test_client()
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/v1") and "GET" in rule.methods and not rule.arguments:
            response = client.get(rule.rule, headers=bearer(token))
            needs_query = rule.rule == "/api/v1/compare"  # a and b are required: 400, not 401, accepts the token
            assert response.status_code == (400 if needs_query else 200), rule.rule


def test_ui_creates_shows_once_and_revokes(app, client, auth, owner):
    auth.login(owner.email)
    page = client.post("/settings/tokens", data={"name": "training job", "csrf_token": auth.csrf()})
    assert page.status_code == 201
    token = attr(one(page.text, "#new-token"), "value")
    assert token.startswith("afk_") and len(token) > len("afk_"), token
    listing = client.get("/settings/tokens").text
    assert token not in listing and token[:10] in listing and "training job" in listing and "never" in listing
    api = app.test_client()
    assert api.get("/api/v1/me", headers=bearer(token)).status_code == 200
    assert "never" not in client.get("/settings/tokens").text  # last used is recorded
    revoke = one(client.get("/settings/tokens").text, 'form[action^="/settings/tokens/"][action$="/revoke"]')
    token_id = attr(revoke, "action").removeprefix("/settings/tokens/").removesuffix("/revoke")
    assert len(token_id) == 36 and set(token_id) <= set("0123456789abcdef-"), token_id
    assert client.post(f"/settings/tokens/{token_id}/revoke", data={"csrf_token": auth.csrf()}).status_code == 303
    assert api.get("/api/v1/me", headers=bearer(token)).status_code == 401
    assert client.post(f"/settings/tokens/{token_id}/revoke", data={"csrf_token": auth.csrf()}).status_code == 404


def test_a_removed_membership_disables_the_token(app, runner, owner, make_member, database):
    member = make_member("mike@acme.test", owner.org, "member")
    token = create_token(runner, member.email, "Acme RL")
    with database.admin_session(owner.org.id) as session, session.begin():
        session.execute(text("DELETE FROM memberships WHERE user_id = :u"), {"u": member.user.id})
    assert app.test_client().get("/api/v1/me", headers=bearer(token)).status_code == 401


def test_pages_ignore_bearer_tokens(app, runner, owner):
    token = create_token(runner, owner.email, "Acme RL")
    response = app.test_client().get("/environments", headers=bearer(token))
    assert response.status_code == 302 and response.location.startswith("/login")
