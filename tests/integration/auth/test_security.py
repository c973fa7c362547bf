"""Roles, member management, login throttling, security headers, request size limits."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from tests.conftest import PASSWORD, AuthActions, csrf_token_from
from tests.factories import make_catalog
from tests.helpers import attr, invitation_link, one, parse


def memberships(owner_engine) -> set[tuple[str, str]]:
    with owner_engine.connect() as conn:
        return set(
            conn.execute(text("SELECT u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id")).all()
        )


@pytest.fixture
def acme(make_member, join):
    owner = make_member("olga@acme.test", "Acme RL", "owner")
    member = make_member("mike@acme.test", owner.org, "member")
    viewer = make_member("vera@acme.test", owner.org, "viewer")
    return {"owner": owner, "member": member, "viewer": viewer}


def membership_id(database, org_id, email) -> uuid.UUID:
    with database.session(org_id) as session:
        return session.execute(
            text("SELECT m.id FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = :e"), {"e": email}
        ).scalar()


def test_owner_adds_changes_and_removes_members(client, auth, acme, database, owner_engine):
    org = acme["owner"].org
    auth.login(acme["owner"].email)
    assert "olga@acme.test" in client.get("/settings/members").text
    invited = client.post(
        "/settings/members", data={"email": "new@acme.test", "role": "viewer", "csrf_token": auth.csrf()}
    )
    assert invited.status_code == 201 and "new@acme.test" not in {email for email, _ in memberships(owner_engine)}
    link = invitation_link(invited.text)
    newcomer = client.application.test_client()
    form = {"password": "long-enough-pw", "password_confirmation": "long-enough-pw"}
    accepted = newcomer.post(link, data={**form, "csrf_token": csrf_token_from(newcomer.get(link).text)})
    assert accepted.status_code == 303
    assert ("new@acme.test", "viewer") in memberships(owner_engine)
    new_id = membership_id(database, org.id, "new@acme.test")
    assert (
        client.post(f"/settings/members/{new_id}/role", data={"role": "member", "csrf_token": auth.csrf()}).status_code
        == 303
    )
    assert ("new@acme.test", "member") in memberships(owner_engine)
    assert client.post(f"/settings/members/{new_id}/remove", data={"csrf_token": auth.csrf()}).status_code == 303
    assert "new@acme.test" not in {email for email, _ in memberships(owner_engine)}
    assert AuthActions(client.application.test_client()).login("new@acme.test", "long-enough-pw").status_code == 303


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"email": "", "role": "member"}, "Enter the new member's email."),
        ({"email": "x@acme.test", "role": "admin"}, "Choose a role: one of owner, member, viewer."),
        ({"email": "x@acme.test"}, "Choose a role: one of owner, member, viewer."),
        ({"email": "not an email", "role": "member"}, "Enter the new member's email address, like name@example.com"),
    ],
)
@pytest.mark.bad_input
def test_bad_member_forms_answer_422_and_write_nothing(client, auth, acme, owner_engine, data, message):
    auth.login(acme["owner"].email)
    before = memberships(owner_engine)
    response = client.post("/settings/members", data={**data, "csrf_token": auth.csrf()})
    assert response.status_code == 422
    assert message in one(response.text, ".error-summary li").get_text()
    assert memberships(owner_engine) == before


def test_the_last_owner_cannot_leave_or_be_demoted(client, auth, acme, database, owner_engine):
    auth.login(acme["owner"].email)
    own = membership_id(database, acme["owner"].org.id, "olga@acme.test")
    for url, data in ((f"/settings/members/{own}/role", {"role": "viewer"}), (f"/settings/members/{own}/remove", {})):
        response = client.post(url, data={**data, "csrf_token": auth.csrf()})
        assert response.status_code == 422 and "at least one owner" in response.text
    assert ("olga@acme.test", "owner") in memberships(owner_engine)


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_only_owners_manage_members(client, auth, acme, database, owner_engine, who):
    auth.login(acme[who].email)
    page = client.get("/settings/members")
    assert page.status_code == 200 and "Add a member" not in page.text
    before = memberships(owner_engine)
    target = membership_id(database, acme["owner"].org.id, "olga@acme.test")
    for url, data in (
        ("/settings/members", {"email": "z@acme.test", "role": "owner", "password": "long-enough"}),
        (f"/settings/members/{target}/role", {"role": "viewer"}),
        (f"/settings/members/{target}/remove", {}),
    ):
        response = client.post(url, data={**data, "csrf_token": auth.csrf()})
        assert response.status_code == 403, url
    assert memberships(owner_engine) == before


def test_viewers_cannot_start_or_reset_runs(client, auth, acme, database, count_rows):
    catalog = make_catalog(database, acme["owner"].org.id, {"kind": "scripted"}, attempt_count=1)
    auth.login(acme["owner"].email)
    run = client.post(
        "/api/v1/evaluation-runs",
        json={"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)},
        headers={"X-CSRFToken": auth.csrf()},
    ).json
    auth.logout()
    auth.login(acme["viewer"].email)
    token = auth.csrf()
    attempts = [
        client.post(
            f"/api/v1/evaluation-runs/{run['id']}/reset", json={"mode": "new_world"}, headers={"X-CSRFToken": token}
        ),
        client.post(f"/runs/{run['id']}/reset", data={"mode": "new_world", "csrf_token": token}),
        client.post(
            f"/environments/{catalog.environment_id}/runs",
            data={
                "environment_version_id": str(catalog.version_id),
                "evaluator_config_id": str(catalog.config_id),
                "csrf_token": token,
            },
        ),
    ]
    assert [r.status_code for r in attempts] == [403, 403, 403]
    assert count_rows("evaluation_runs") == 1
    assert client.get(f"/runs/{run['id']}").status_code == 200  # reading is fine


def test_repeated_failures_for_an_account_are_throttled_without_revealing_it(client, auth, acme):
    for email in ("mike@acme.test", "nobody@acme.test"):
        answers = [auth.login(email, "wrong password").status_code for _ in range(5)]
        assert answers == [401] * 5
        throttled = auth.login(email, PASSWORD)
        assert throttled.status_code == 429
        assert int(throttled.headers["Retry-After"]) > 0
        assert "Too many failed logins. Try again in 15 minutes." in throttled.text
    assert auth.login("vera@acme.test").status_code == 303  # other accounts are unaffected


def test_a_successful_login_erases_no_failure_of_the_window(client, auth, acme):
    for _ in range(4):
        auth.login("mike@acme.test", "wrong password")
    assert auth.login("mike@acme.test").status_code == 303  # four failures do not lock the account
    auth.logout()
    assert auth.login("mike@acme.test", "wrong password").status_code == 401  # the fifth of the window
    assert auth.login("mike@acme.test", "wrong password").status_code == 429


def test_failures_from_one_address_are_throttled_across_accounts(client, auth, acme):
    for n in range(30):
        assert auth.login(f"guess{n}@acme.test", "wrong").status_code == 401
    response = auth.login("mike@acme.test")
    assert response.status_code == 429 and "Retry-After" in response.headers


def test_other_address_is_not_throttled(app, auth, acme):
    for n in range(30):
        auth.login(f"guess{n}@acme.test", "wrong")
    elsewhere = app.test_client()
    elsewhere.environ_base["REMOTE_ADDR"] = "10.9.8.7"
    assert AuthActions(elsewhere).login("mike@acme.test").status_code == 303


@pytest.mark.parametrize("url", ["/login", "/environments", "/healthz", "/api/v1/me", "/static/app.css", "/nope"])
def test_security_headers_on_every_response(client, auth, acme, url):
    auth.login(acme["viewer"].email)
    with client.get(url) as response:  # closed: a static file's answer holds the file open
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"


def test_pages_carry_no_inline_script(client, auth, acme):
    auth.login(acme["owner"].email)
    for url in ("/login", "/environments", "/settings/members", "/capability-gap"):
        body = client.get(url).text
        page = parse(body)
        scripts = page.select("script")
        assert all(s.has_attr("src") and attr(s, "src").startswith("/static/") for s in scripts), scripts
        handlers = [(e.name, name) for e in page.find_all(True) for name in e.attrs if name.startswith("on")]
        assert not handlers, handlers


@pytest.mark.bad_input
def test_huge_bodies_answer_413_and_write_nothing(client, auth, acme, owner_engine):
    auth.login(acme["owner"].email)
    huge = {"environmentVersionId": "x" * (2 * 1024 * 1024)}
    response = client.post("/api/v1/evaluation-runs", json=huge, headers={"X-CSRFToken": auth.csrf()})
    assert response.status_code == 413 and response.is_json
    form = client.post("/settings/members", data={"email": "a" * (2 * 1024 * 1024), "csrf_token": auth.csrf()})
    assert form.status_code == 413
    assert len(memberships(owner_engine)) == 3
