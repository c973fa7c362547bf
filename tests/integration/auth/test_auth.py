"""Login, logout, CSRF, organization switching, and the guard that keeps every other route behind a login."""

from __future__ import annotations

import uuid

import pytest
from werkzeug.routing import IntegerConverter, UUIDConverter
from werkzeug.security import generate_password_hash

from app import create_app
from tests.conftest import PASSWORD, AuthActions
from tests.helpers import attr, is_fragment, is_whole_page, one
from writes import accounts

# Invitation links are opened before their invitee has an account; an unknown link answers 404 (test_invitations).
PUBLIC_ENDPOINTS = {
    "auth.login",
    "health.healthz",
    "static",
    "api.openapi",
    "invitations.show",
    "invitations.accept",
    "invitations.create_account",
}


def _example_url(app, rule) -> str:
    """Build a URL for `rule`, filling each argument with a well-formed value of its converter's type."""
    values: dict[str, uuid.UUID | int | str] = {}
    for name, converter in rule._converters.items():
        if isinstance(converter, UUIDConverter):
            values[name] = uuid.uuid4()
        elif isinstance(converter, IntegerConverter):
            values[name] = 1
        else:
            values[name] = "x"
    with app.test_request_context():
        return app.url_for(rule.endpoint, **values)


def test_every_route_requires_login_except_the_allowed_list(app, client):
    """Crawl app.url_map logged out: pages redirect to /login with next, API routes answer 401 JSON."""
    checked = 0
    for rule in app.url_map.iter_rules():
        if rule.endpoint in PUBLIC_ENDPOINTS:
            continue
        url = _example_url(app, rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            response = client.open(url, method=method)
            checked += 1
            if rule.rule.startswith("/api/"):
                assert response.status_code == 401, (method, url)
                assert response.is_json and response.json["error"] == "authentication required"
            else:
                assert response.status_code == 302, (method, url)
                assert response.location.startswith("/login?next="), (method, url, response.location)
    assert checked >= 5


def test_public_routes_answer_without_login(client):
    assert client.get("/login").status_code == 200
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json == {"status": "ok", "database": "ok"}
    with client.get("/static/htmx.min.js") as static:
        assert static.status_code == 200 and b"htmx" in static.data


def test_unknown_url_logged_out_redirects_instead_of_revealing_routes(client):
    assert client.get("/no-such-page").status_code == 302


def test_login_redirects_to_next_and_shows_environments(client, auth, make_member):
    member = make_member("ann@acme.test", "Acme RL", "owner")
    assert client.get("/environments").location == "/login?next=/environments"
    response = auth.login(member.email, next_url="/environments")
    assert response.status_code == 303 and response.location == "/environments"
    page = client.get("/environments")
    assert page.status_code == 200
    assert "ann@acme.test" in page.text and "Acme RL" in page.text and "No environments yet." in page.text
    assert attr(one(page.text, 'meta[name="csrf-token"]'), "content")


def test_login_ignores_offsite_next(auth, make_member):
    member = make_member("ann@acme.test", "Acme RL")
    for target in ("https://evil.test/", "//evil.test/x", "/\\evil.test"):
        assert auth.login(member.email, next_url=target).location == "/environments"


def test_session_cookie_is_httponly_and_samesite_lax(client, auth, make_member):
    response = auth.login(make_member("ann@acme.test", "Acme RL").email)
    cookie = next(c for c in response.headers.getlist("Set-Cookie") if c.startswith("session="))
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_wrong_password_and_unknown_email_get_the_same_answer(client, auth, make_member):
    make_member("ann@acme.test", "Acme RL")
    wrong_password = auth.login("ann@acme.test", "not the password")
    unknown_email = auth.login("nobody@acme.test", PASSWORD)
    assert wrong_password.status_code == unknown_email.status_code == 401
    assert "Invalid email or password." in wrong_password.text
    assert "Invalid email or password." in unknown_email.text
    assert client.get("/environments").status_code == 302


def test_email_is_case_insensitive(auth, make_member):
    make_member("ann@acme.test", "Acme RL")
    assert auth.login("  ANN@Acme.Test ").status_code == 303


def test_login_renews_the_session_and_logout_invalidates_it(app, client, auth, make_member):
    member = make_member("ann@acme.test", "Acme RL")
    auth.login(member.email)
    with client.session_transaction() as session:
        first_token = session["_user_id"]
    stolen_cookie = client.get_cookie("session").value
    auth.login(member.email)  # a second login gets a new session id
    with client.session_transaction() as session:
        assert session["_user_id"] != first_token

    assert auth.logout().location == "/login"
    assert client.get("/environments").status_code == 302

    thief = app.test_client()
    thief.set_cookie("session", stolen_cookie)
    assert thief.get("/api/v1/me").status_code == 401


@pytest.mark.bad_input
def test_login_without_csrf_token_is_rejected(client, make_member):
    make_member("ann@acme.test", "Acme RL")
    client.get("/login")
    response = client.post("/login", data={"email": "ann@acme.test", "password": PASSWORD})
    assert response.status_code == 400
    assert "CSRF token missing or invalid" in response.text
    assert client.get("/environments").status_code == 302


@pytest.mark.bad_input
def test_state_changing_requests_need_the_csrf_token(client, auth, make_member):
    auth.login(make_member("ann@acme.test", "Acme RL").email)
    assert client.post("/logout").status_code == 400
    assert client.post("/logout", data={"csrf_token": "forged"}).status_code == 400
    assert client.get("/environments").status_code == 200  # still logged in
    json_post = client.post("/logout", headers={"X-CSRFToken": auth.csrf()})
    assert json_post.status_code == 303  # the header the htmx pages send is accepted


def test_api_csrf_failure_answers_json(client, auth, make_member):
    auth.login(make_member("ann@acme.test", "Acme RL").email)
    response = client.post("/api/v1/me", json={})
    assert response.status_code in (400, 405)
    assert response.is_json


def test_switching_between_own_organizations(client, auth, make_member, make_org, join):
    member = make_member("ann@acme.test", "Acme RL")
    globex = make_org("Globex Research")
    join(member, globex, "viewer")
    auth.login(member.email)
    assert client.get("/api/v1/me").json["organizationId"] == str(member.org.id)
    page = client.get("/environments").text
    assert "Globex Research (viewer)" in page and "Acme RL (member)" in page

    response = client.post("/orgs/switch", data={"organization_id": str(globex.id), "csrf_token": auth.csrf()})
    assert response.status_code == 303
    me = client.get("/api/v1/me").json
    assert me["organizationId"] == str(globex.id) and me["role"] == "viewer"


@pytest.mark.leak
def test_switching_to_an_org_you_do_not_belong_to_is_refused(client, auth, make_member, make_org):
    member = make_member("ann@acme.test", "Acme RL")
    other = make_org("Initech")
    auth.login(member.email)
    for org_id in (str(other.id), str(uuid.uuid4())):
        response = client.post("/orgs/switch", data={"organization_id": org_id, "csrf_token": auth.csrf()})
        assert response.status_code == 403
        assert "You are not a member of that organization." in response.text
    assert client.post("/orgs/switch", data={"organization_id": "nope", "csrf_token": auth.csrf()}).status_code == 400
    assert client.get("/api/v1/me").json["organizationId"] == str(member.org.id)


@pytest.mark.leak
def test_forged_org_in_cookie_falls_back_to_a_real_membership(client, auth, make_member, make_org):
    member = make_member("ann@acme.test", "Acme RL")
    other = make_org("Initech")
    auth.login(member.email)
    with client.session_transaction() as session:
        session["org_id"] = str(other.id)
    assert client.get("/api/v1/me").json["organizationId"] == str(member.org.id)


def test_removed_membership_takes_effect_on_the_next_request(client, auth, make_member, database):
    from sqlalchemy import text

    member = make_member("ann@acme.test", "Acme RL")
    auth.login(member.email)
    assert client.get("/environments").status_code == 200
    with database.admin_session(member.org.id) as session, session.begin():
        session.execute(text("DELETE FROM memberships"))
    response = client.get("/environments")
    assert response.status_code == 403
    assert "not a member of any organization" in response.text


def test_htmx_request_gets_the_fragment_and_boosted_gets_the_page(client, auth, make_member):
    auth.login(make_member("ann@acme.test", "Acme RL").email)
    fragment = client.get("/environments", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and is_fragment(fragment.text) and "No environments yet." in fragment.text
    assert "HX-Request" in fragment.headers["Vary"]
    boosted = client.get("/environments", headers={"HX-Request": "true", "HX-Boosted": "true"})
    assert is_whole_page(boosted.text)


@pytest.mark.parametrize("secure", ["1", ""])
def test_secure_cookie_is_configurable(database_urls, make_member, monkeypatch, secure):
    monkeypatch.setenv("SESSION_COOKIE_SECURE", secure)
    app = create_app(
        {"SECRET_KEY": "x", "DATABASE_URL": database_urls.runtime, "MIGRATE_ON_START": False, "TESTING": True}
    )
    member = make_member("ann@acme.test", "Acme RL")
    response = AuthActions(app.test_client()).login(member.email)
    cookie = next(c for c in response.headers.getlist("Set-Cookie") if c.startswith("session="))
    assert ("Secure" in cookie) is bool(secure)
    app.extensions["agentforge_db"].dispose()


@pytest.mark.parametrize("method", ["scrypt", "pbkdf2:sha256", "pbkdf2:sha256:1000"])
def test_the_derived_key_is_the_one_werkzeug_stores(method):
    stored = generate_password_hash("correct horse", method=method)
    method_and_salt, key = stored.rsplit("$", 1)
    assert accounts.derive_key(method_and_salt, "correct horse") == key
    assert accounts.derive_key(method_and_salt, "wrong horse") != key
