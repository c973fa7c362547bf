"""Invitations, landing organization and tokens that die with the membership, from the user's side (HTTP and CLI)."""

from __future__ import annotations

import re
import subprocess
import uuid

import pytest
from sqlalchemy import text

from cli import SERVING_URL_FILE
from tests.conftest import PASSWORD, AuthActions, csrf_token_from
from tests.helpers import attr, invitation_link, one, parse, texts
from tests.paths import ROOT


def rows(owner_engine, sql: str) -> list:
    with owner_engine.connect() as conn:
        return list(conn.execute(text(sql)).all())


def invite(client, auth, email: str, role: str = "member", **extra):
    """Invite through the owner's form on /settings/members; return the response."""
    return client.post("/settings/members", data={"email": email, "role": role, "csrf_token": auth.csrf(), **extra})


def link_of(response) -> str:
    return invitation_link(response.text)


def accept_with_password(client, link: str, password: str = PASSWORD):
    page = client.get(link)
    assert page.status_code == 200, page.text
    token = csrf_token_from(page.text)
    return client.post(link, data={"password": password, "password_confirmation": password, "csrf_token": token})


@pytest.fixture
def acme(make_member):
    return make_member("olga@acme.test", "Acme RL", "owner")


@pytest.fixture
def globex(make_member):
    return make_member("gus@globex.test", "Globex Research", "owner")


def test_capture_scenario_is_impossible(app, client, auth, acme, globex, owner_engine):
    auth.login(acme.email)
    # A owner tries the old way: a password for someone else's email. The field is gone and ignored.
    assert parse(client.get("/settings/members").text).select('[name="password"]') == []
    first = invite(client, auth, "new-hire@globex.test", password="chosen-by-acme")
    assert first.status_code == 201
    a_link = link_of(first)
    assert rows(owner_engine, "SELECT 1 FROM users WHERE email = 'new-hire@globex.test'") == []
    pending = rows(owner_engine, "SELECT id FROM invitations WHERE email = 'new-hire@globex.test'")
    revoked = client.post(f"/settings/invitations/{pending[0].id}/revoke", data={"csrf_token": auth.csrf()})
    assert revoked.status_code == 303
    assert AuthActions(app.test_client()).login("new-hire@globex.test", "chosen-by-acme").status_code == 401

    globex_owner = app.test_client()
    AuthActions(globex_owner).login(globex.email)
    g_link = link_of(invite(globex_owner, AuthActions(globex_owner), "new-hire@globex.test"))
    new_hire = app.test_client()
    joined = accept_with_password(new_hire, g_link, "the-hires-own-pw")
    assert joined.status_code == 303 and joined.headers["Location"].endswith("/environments")
    me = new_hire.get("/api/v1/me").json
    assert [m["organizationName"] for m in me["memberships"]] == ["Globex Research"]

    # A can never log in as the new hire, nor reuse its own (revoked) link, nor see Globex.
    assert client.get(a_link).status_code == 404
    attacker = AuthActions(app.test_client())
    assert attacker.login("new-hire@globex.test", "chosen-by-acme").status_code == 401
    assert attacker.login("new-hire@globex.test", PASSWORD).status_code == 401
    assert [m["organizationName"] for m in client.get("/api/v1/me").json["memberships"]] == ["Acme RL"]


def test_adding_answers_the_same_for_known_and_unknown_emails(client, auth, acme, globex, owner_engine):
    auth.login(acme.email)

    def answer(email: str) -> tuple[int, str]:
        """Invite `email`, then revoke it; the page with the email, link, ids, times and CSRF value blanked."""
        response = invite(client, auth, email, "viewer")
        link = f"http://localhost{invitation_link(response.text)}"
        page = response.text.replace(email, "EMAIL").replace(link, "LINK")
        page = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d{4}-\d\d-\d\d \d\d:\d\d|value=\"[^\"]+\"", "X", page)
        page = re.sub(r"[\w-]{20,}\.[\w-]{6}\.[\w-]{20,}", "CSRF", page)  # the CSRF token is signed with a time
        pending = rows(owner_engine, "SELECT id FROM invitations WHERE revoked_at IS NULL")[0].id
        client.post(f"/settings/invitations/{pending}/revoke", data={"csrf_token": auth.csrf()})
        return response.status_code, page

    known, unknown = answer("gus@globex.test"), answer("nobody@nowhere.test")
    assert known == unknown
    assert known[0] == 201 and "Invited EMAIL as viewer" in known[1] and "no account" not in known[1]
    assert rows(owner_engine, "SELECT email FROM invitations ORDER BY email") == [
        ("gus@globex.test",),
        ("nobody@nowhere.test",),
    ]
    # Nothing was joined without consent.
    assert rows(owner_engine, f"SELECT role FROM memberships WHERE organization_id = '{acme.org.id}'") == [("owner",)]


def test_link_is_single_use(app, client, auth, acme, owner_engine):
    auth.login(acme.email)
    link = link_of(invite(client, auth, "ann@acme.test", "viewer"))
    assert "ann@acme.test" in client.get("/settings/members").text  # pending
    newcomer = app.test_client()
    assert accept_with_password(newcomer, link).status_code == 303
    assert newcomer.get("/api/v1/me").json["role"] == "viewer"
    assert newcomer.get(link).status_code == 404
    other = app.test_client()
    token = csrf_token_from(other.get("/login").text)
    again = other.post(
        link, data={"password": "another-pw-1", "password_confirmation": "another-pw-1", "csrf_token": token}
    )
    assert again.status_code == 404 and "already used" in again.text
    assert "No pending invitations" in client.get("/settings/members").text


def test_expired_and_revoked_links_are_dead(app, client, auth, acme, owner_engine):
    auth.login(acme.email)
    expiring = link_of(invite(client, auth, "old@acme.test"))
    with owner_engine.begin() as conn:
        conn.execute(text("UPDATE invitations SET expires_at = now() - interval '1 second'"))
    revoked_link = link_of(invite(client, auth, "gone@acme.test"))
    invitation = rows(owner_engine, "SELECT id FROM invitations WHERE email = 'gone@acme.test'")[0].id
    assert (
        client.post(f"/settings/invitations/{invitation}/revoke", data={"csrf_token": auth.csrf()}).status_code == 303
    )
    for link in (expiring, revoked_link):
        visitor = app.test_client()
        assert visitor.get(link).status_code == 404
    assert rows(owner_engine, "SELECT 1 FROM users WHERE email IN ('old@acme.test', 'gone@acme.test')") == []
    assert (
        client.post(f"/settings/invitations/{invitation}/revoke", data={"csrf_token": auth.csrf()}).status_code == 404
    )


def test_existing_user_logs_in_and_accepts_and_wrong_user_is_refused(app, client, auth, acme, globex, owner_engine):
    auth.login(acme.email)
    link = link_of(invite(client, auth, "gus@globex.test", "member"))
    # A logged-in user whose email the invitation does not name cannot accept it.
    page = client.get(link)
    assert "Log out and log in as gus@globex.test" in page.text
    wrong = client.post(f"{link}/accept", data={"csrf_token": auth.csrf()})
    assert wrong.status_code == 403
    # Setting a password for an email that already has an account is refused.
    stranger = app.test_client()
    taken = accept_with_password(stranger, link, "not-gus-password")
    assert taken.status_code == 422 and "already has an account" in taken.text
    assert AuthActions(stranger).login("gus@globex.test", "not-gus-password").status_code == 401

    gus = app.test_client()
    assert "Log in as gus@globex.test" in gus.get(link).text
    assert AuthActions(gus).login(globex.email, next_url=link).headers["Location"] == link
    accepted = gus.post(f"{link}/accept", data={"csrf_token": csrf_token_from(gus.get(link).text)})
    assert accepted.status_code == 303
    me = gus.get("/api/v1/me").json
    assert me["organizationId"] == str(acme.org.id) and me["role"] == "member"
    assert gus.get(link).status_code == 404


def test_invitation_of_another_organization_cannot_be_revoked(client, auth, acme, globex, app, owner_engine):
    other = app.test_client()
    AuthActions(other).login(globex.email)
    invite(other, AuthActions(other), "x@globex.test")
    foreign = rows(owner_engine, "SELECT id FROM invitations")[0].id
    auth.login(acme.email)
    assert client.post(f"/settings/invitations/{foreign}/revoke", data={"csrf_token": auth.csrf()}).status_code == 404
    assert rows(owner_engine, "SELECT revoked_at FROM invitations")[0].revoked_at is None
    assert "x@globex.test" not in client.get("/settings/members").text


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_cannot_invite_or_revoke(client, auth, acme, make_member, owner_engine, app, role):
    owner = app.test_client()
    AuthActions(owner).login(acme.email)
    invite(owner, AuthActions(owner), "p@acme.test")
    pending = rows(owner_engine, "SELECT id FROM invitations")[0].id
    make_member("someone@acme.test", acme.org, role)
    auth.login("someone@acme.test")
    assert "p@acme.test" not in client.get("/settings/members").text
    assert invite(client, auth, "q@acme.test").status_code == 403
    assert client.post(f"/settings/invitations/{pending}/revoke", data={"csrf_token": auth.csrf()}).status_code == 403
    assert rows(owner_engine, "SELECT email, revoked_at FROM invitations") == [("p@acme.test", None)]


def test_invite_needs_csrf(client, auth, acme, owner_engine):
    auth.login(acme.email)
    assert client.post("/settings/members", data={"email": "c@acme.test", "role": "member"}).status_code == 400
    assert rows(owner_engine, "SELECT 1 FROM invitations") == []


def test_login_lands_in_the_organization_used_last(client, auth, acme, globex, join, app):
    join(acme, globex.org, "viewer")
    auth.login(acme.email)
    assert client.get("/api/v1/me").json["organizationId"] == str(acme.org.id)  # alphabetically first
    switched = client.post("/orgs/switch", data={"organization_id": str(globex.org.id), "csrf_token": auth.csrf()})
    assert switched.status_code == 303
    auth.logout()
    auth.login(acme.email)
    assert client.get("/api/v1/me").json["organizationId"] == str(globex.org.id)
    elsewhere = app.test_client()  # another browser, too
    AuthActions(elsewhere).login(acme.email)
    assert elsewhere.get("/api/v1/me").json["organizationId"] == str(globex.org.id)


def create_token(client, auth, name: str) -> str:
    page = client.post("/settings/tokens", data={"name": name, "csrf_token": auth.csrf()})
    assert page.status_code == 201
    token = attr(one(page.text, "#new-token"), "value")
    assert token.startswith("afk_"), token
    return token


def membership_id(owner_engine, email: str, org_id: uuid.UUID) -> uuid.UUID:
    return rows(
        owner_engine,
        f"SELECT m.id FROM memberships m JOIN users u ON u.id = m.user_id "
        f"WHERE u.email = '{email}' AND m.organization_id = '{org_id}'",
    )[0].id


def test_token_and_session_stay_dead_after_remove_and_re_add(app, client, auth, acme, make_member, join, owner_engine):
    mike = make_member("mike@acme.test", acme.org, "member")
    mike_client = app.test_client()
    mike_auth = AuthActions(mike_client)
    mike_auth.login(mike.email)
    token = create_token(mike_client, mike_auth, "nightly")
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/me", headers=bearer).status_code == 200

    auth.login(acme.email)
    removed = client.post(
        f"/settings/members/{membership_id(owner_engine, mike.email, acme.org.id)}/remove",
        data={"csrf_token": auth.csrf()},
    )
    assert removed.status_code == 303
    assert app.test_client().get("/api/v1/me", headers=bearer).status_code == 401
    assert mike_client.get("/environments").status_code == 302  # the login session ended too

    join(mike, acme.org, "member")
    assert app.test_client().get("/api/v1/me", headers=bearer).status_code == 401
    assert mike_client.get("/environments").status_code == 302
    assert mike_auth.login(mike.email).status_code == 303  # a fresh login works, with a fresh session


def test_owner_lists_and_revokes_another_members_token(app, client, auth, acme, make_member):
    mike = make_member("mike@acme.test", acme.org, "member")
    mike_client = app.test_client()
    mike_auth = AuthActions(mike_client)
    mike_auth.login(mike.email)
    token = create_token(mike_client, mike_auth, "mikes-export")
    bearer = {"Authorization": f"Bearer {token}"}

    auth.login(acme.email)
    create_token(client, auth, "olgas-own")
    page = client.get("/settings/tokens")
    table = one(page.text, "table#organization-tokens")
    rows_shown = [texts(tr, "td")[:3] for tr in table.select("tbody > tr")]
    assert ["mikes-export", f"{token[:10]}…", "mike@acme.test"] in rows_shown, rows_shown
    assert token not in page.text  # the secret is nowhere on the page, markup included
    token_id = rows_token_id(app, acme.org.id, "mikes-export")
    assert client.post(f"/settings/tokens/{token_id}/revoke", data={"csrf_token": auth.csrf()}).status_code == 303
    assert app.test_client().get("/api/v1/me", headers=bearer).status_code == 401

    # A member sees only their own tokens and cannot revoke the owner's.
    mine = mike_client.get("/settings/tokens").text
    assert "olgas-own" not in mine and parse(mine).select("#organization-tokens") == []
    olga_token = rows_token_id(app, acme.org.id, "olgas-own")
    assert (
        mike_client.post(f"/settings/tokens/{olga_token}/revoke", data={"csrf_token": mike_auth.csrf()}).status_code
        == 404
    )


def rows_token_id(app, org_id: uuid.UUID, name: str) -> uuid.UUID:
    with app.extensions["agentforge_db"].session(org_id) as session:
        return session.execute(text("SELECT id FROM api_tokens WHERE name = :n"), {"n": name}).scalar_one()


def test_cli_invite_prints_a_working_link(runner, app, make_org, owner_engine):
    make_org("Acme RL")
    result = runner.invoke(
        args=["invite", "Cli@Acme.test", "--org", "Acme RL", "--role", "viewer", "--base-url", "http://dash.example"]
    )
    assert result.exit_code == 0, result.output
    link = result.output.strip().splitlines()[-1]
    assert link.startswith("http://dash.example/invitations/")
    newcomer = app.test_client()
    assert accept_with_password(newcomer, link.removeprefix("http://dash.example")).status_code == 303
    me = newcomer.get("/api/v1/me").json
    assert me["email"] == "cli@acme.test" and me["role"] == "viewer"


@pytest.fixture
def instance(app, monkeypatch, tmp_path):
    """An instance folder of the test's own (where `make run` writes the address it serves on) and no
    AGENTFORGE_BASE_URL."""
    monkeypatch.setattr(app, "instance_path", str(tmp_path))
    monkeypatch.setitem(app.config, "AGENTFORGE_BASE_URL", None)
    monkeypatch.delenv("AGENTFORGE_BASE_URL", raising=False)
    return tmp_path


def cli_invite(runner, email: str) -> list[str]:
    """`flask invite EMAIL --org "Acme RL"` without --base-url; its lines."""
    result = runner.invoke(args=["invite", email, "--org", "Acme RL"])
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()


def test_cli_invite_links_to_the_port_make_run_serves_on(runner, app, make_org, instance):
    make_org("Acme RL")
    (instance / SERVING_URL_FILE).write_text("http://127.0.0.1:8000\n")  # `PORT=8000 make run` serving
    link = cli_invite(runner, "new@acme.test")[-1]
    assert link.startswith("http://127.0.0.1:8000/invitations/"), link
    assert accept_with_password(app.test_client(), link.removeprefix("http://127.0.0.1:8000")).status_code == 303


def test_cli_invite_links_to_agentforge_base_url_first(runner, app, make_org, instance, monkeypatch):
    make_org("Acme RL")
    (instance / SERVING_URL_FILE).write_text("http://127.0.0.1:8000\n")
    monkeypatch.setitem(app.config, "AGENTFORGE_BASE_URL", "https://rl.example.com/")
    assert cli_invite(runner, "new@acme.test")[-1].startswith("https://rl.example.com/invitations/")


def test_cli_invite_without_an_address_prints_the_path_and_how_to_give_one(runner, app, make_org, instance):
    make_org("Acme RL")
    (instance / SERVING_URL_FILE).write_text("not an address")  # ignored, as a missing one
    lines = cli_invite(runner, "new@acme.test")
    assert re.fullmatch(r"/invitations/[A-Za-z0-9_-]+", lines[-1]), lines
    assert "set AGENTFORGE_BASE_URL or pass --base-url" in lines[-2]
    assert not any("5000" in line for line in lines)
    assert accept_with_password(app.test_client(), lines[-1]).status_code == 303


def test_make_run_writes_the_address_it_serves_on_while_it_runs():
    planned = subprocess.run(
        ["make", "-n", "run", "PORT=8123"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert f"echo http://127.0.0.1:8123 > instance/{SERVING_URL_FILE}" in planned
    assert f"rm -f instance/{SERVING_URL_FILE}" in planned  # in the trap that stops the worker
    assert "--port 8123" in planned


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["invite", "x@acme.test", "--org", "Nope"], "no organization named 'Nope'"),
        (["invite", "x@acme.test", "--org", "Acme RL", "--role", "admin"], "role must be one of"),
        (["invite", "not an email", "--org", "Acme RL"], "is not an email address"),
    ],
)
def test_cli_invite_bad_input_prints_one_error_line(runner, make_org, owner_engine, args, message):
    make_org("Acme RL")
    result = runner.invoke(args=args)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0], result.output
    assert rows(owner_engine, "SELECT 1 FROM invitations") == []


def proven(owner_engine, email: str) -> bool:
    return rows(owner_engine, f"SELECT email_proven FROM users WHERE email = '{email}'")[0].email_proven


def organizations_of(client) -> list[str]:
    return [m["organizationName"] for m in client.get("/api/v1/me").json["memberships"]]


@pytest.mark.leak
def test_an_owner_who_opens_their_own_link_cannot_keep_the_account(
    app, client, auth, acme, globex, runner, owner_engine
):
    """Org A's owner invites victim@x and sets its password through the link; org B's link takes the account back."""
    auth.login(acme.email)
    a_link = link_of(invite(client, auth, "victim@x.test"))
    squatter = app.test_client()
    squatter_auth = AuthActions(squatter)
    assert accept_with_password(squatter, a_link, "squatters-pw").status_code == 303
    squatters_token = create_token(squatter, squatter_auth, "squatters-export")
    bearer = {"Authorization": f"Bearer {squatters_token}"}
    assert organizations_of(squatter) == ["Acme RL"] and not proven(owner_engine, "victim@x.test")
    # The operator's add-member does not attach the squatted account to another organization.
    refused = runner.invoke(args=["add-member", "victim@x.test", "--org", "Globex Research", "--role", "member"])
    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [
        "Error: the account victim@x.test was made through an invitation link and nobody has proven the address is "
        "theirs yet: invite victim@x.test instead, so that whoever holds the address accepts"
    ]

    globex_owner = app.test_client()
    globex_auth = AuthActions(globex_owner)
    globex_auth.login(globex.email)
    b_link = link_of(invite(globex_owner, globex_auth, "victim@x.test"))
    victim = app.test_client()
    page = victim.get(b_link).text
    assert "Never chose a password for victim@x.test?" in page and "Take over the account and join" in page
    joined = accept_with_password(victim, b_link, "the-victims-own-pw")
    assert joined.status_code == 303 and joined.headers["Location"].endswith("/environments")
    assert "The account is yours alone now" in victim.get("/environments").text
    assert organizations_of(victim) == ["Globex Research"] and proven(owner_engine, "victim@x.test")

    # The squatter's session, token and password are dead, and Globex is out of reach.
    assert squatter.get("/api/v1/me").status_code == 401
    assert squatter.get("/environments").status_code == 302
    assert app.test_client().get("/api/v1/me", headers=bearer).status_code == 401
    assert AuthActions(app.test_client()).login("victim@x.test", "squatters-pw").status_code == 401
    assert organizations_of(client) == ["Acme RL"]
    switch = client.post("/orgs/switch", data={"organization_id": str(globex.org.id), "csrf_token": auth.csrf()})
    assert switch.status_code == 403
    # A new link of org A cannot take the account back: it is proven now.
    again = link_of(invite(client, auth, "victim@x.test"))
    assert "Never chose a password" not in app.test_client().get(again).text
    retake = accept_with_password(app.test_client(), again, "squatters-pw-2")
    assert retake.status_code == 422 and "already has an account" in retake.text
    assert AuthActions(app.test_client()).login("victim@x.test", "the-victims-own-pw").status_code == 303


@pytest.mark.leak
def test_removing_and_reinviting_a_squatted_account_does_not_prove_it(app, client, auth, acme, owner_engine):
    """Org A's own links never count as another organization's, even after A removed the account it made."""
    auth.login(acme.email)
    first = link_of(invite(client, auth, "victim@x.test"))
    assert accept_with_password(app.test_client(), first, "squatters-pw").status_code == 303
    removed = client.post(
        f"/settings/members/{membership_id(owner_engine, 'victim@x.test', acme.org.id)}/remove",
        data={"csrf_token": auth.csrf()},
    )
    assert removed.status_code == 303
    second = link_of(invite(client, auth, "victim@x.test"))
    squatter = app.test_client()
    assert "Never chose a password" not in squatter.get(second).text
    refused = accept_with_password(squatter, second, "squatters-pw-2")
    assert refused.status_code == 422 and "already has an account" in refused.text
    logged_in = AuthActions(squatter)
    assert logged_in.login("victim@x.test", "squatters-pw").status_code == 303
    rejoined = squatter.post(f"{second}/accept", data={"csrf_token": csrf_token_from(squatter.get(second).text)})
    assert rejoined.status_code == 303 and not proven(owner_engine, "victim@x.test")


def test_the_person_who_made_the_account_logs_in_to_accept_and_keeps_everything(
    app, auth, acme, globex, runner, owner_engine
):
    """The real invitee, whose account an earlier link made, accepts another organization's link by logging in: the
    account keeps its organizations and is proven, so later links cannot take it over and add-member takes it."""
    owner_a, owner_b = app.test_client(), app.test_client()
    AuthActions(owner_a).login(acme.email)
    AuthActions(owner_b).login(globex.email)
    alice = app.test_client()
    a_link = link_of(invite(owner_a, AuthActions(owner_a), "alice@x.test"))
    assert accept_with_password(alice, a_link, "alices-own-pw").status_code == 303
    b_link = link_of(invite(owner_b, AuthActions(owner_b), "alice@x.test"))
    assert "Did you make the account alice@x.test?" in app.test_client().get(b_link).text
    accepted = alice.post(f"{b_link}/accept", data={"csrf_token": csrf_token_from(alice.get(b_link).text)})
    assert accepted.status_code == 303
    assert sorted(organizations_of(alice)) == ["Acme RL", "Globex Research"] and proven(owner_engine, "alice@x.test")
    b_again = link_of(invite(owner_b, AuthActions(owner_b), "alice@x.test", "viewer"))
    taken = accept_with_password(app.test_client(), b_again, "owner-bs-pw")
    assert taken.status_code == 422 and "already has an account" in taken.text
    runner.invoke(args=["create-org", "Initech"])
    added = runner.invoke(args=["add-member", "alice@x.test", "--org", "Initech", "--role", "viewer"])
    assert added.exit_code == 0, added.output
    assert alice.get("/api/v1/me").status_code == 200  # her session lived through all of it


@pytest.mark.leak
def test_taking_an_account_over_brings_nothing_it_reached_before(app, acme, globex, owner_engine):
    """Org B's owner opens B's own link for an account that A's link made: whoever holds a link may take an unproven
    account over, but it leaves every organization first, so B's owner never reaches org A's rows through it."""
    owner_a, owner_b = app.test_client(), app.test_client()
    AuthActions(owner_a).login(acme.email)
    AuthActions(owner_b).login(globex.email)
    alice = app.test_client()
    a_link = link_of(invite(owner_a, AuthActions(owner_a), "alice@x.test"))
    assert accept_with_password(alice, a_link, "pw-alice1").status_code == 303
    b_link = link_of(invite(owner_b, AuthActions(owner_b), "alice@x.test"))
    thief = app.test_client()
    assert accept_with_password(thief, b_link, "pw-of-owner-b").status_code == 303
    assert organizations_of(thief) == ["Globex Research"]
    switch = thief.post("/orgs/switch", data={"organization_id": str(acme.org.id), "csrf_token": csrf_token(thief)})
    assert switch.status_code == 403
    acme_members = rows(owner_engine, f"SELECT user_id FROM memberships WHERE organization_id = '{acme.org.id}'")
    assert acme_members == [(acme.user.id,)]
    assert alice.get("/api/v1/me").status_code == 401


def csrf_token(client) -> str:
    return csrf_token_from(client.get("/environments").text)


def test_accounts_made_through_a_link_before_the_migration_start_unproven(
    app, client, auth, acme, globex, database, database_urls, owner_engine
):
    """Migration 0026 marks accounts made through a link unproven, unless another organization's link reached them."""
    from tests.helpers import migrate

    owner_a, owner_b = AuthActions(client), AuthActions(app.test_client())
    owner_a.login(acme.email)
    owner_b.login(globex.email)
    for email in ("squatted@x.test", "alice@x.test"):
        made = accept_with_password(app.test_client(), link_of(invite(client, owner_a, email)), "pw-12345678")
        assert made.status_code == 303
    alice = app.test_client()
    AuthActions(alice).login("alice@x.test", "pw-12345678")
    b_link = link_of(invite(owner_b.client, owner_b, "alice@x.test"))
    accepted = alice.post(f"{b_link}/accept", data={"csrf_token": csrf_token_from(alice.get(b_link).text)})
    assert accepted.status_code == 303
    migrate(database_urls, database, "0025", downgrade=True)  # the column goes: a database from before 0026
    migrate(database_urls, database, "head")
    found = dict(rows(owner_engine, "SELECT email, email_proven FROM users"))
    assert found == {acme.email: True, globex.email: True, "squatted@x.test": False, "alice@x.test": True}
