"""What users expect on the way: a link of another organization of theirs offers to switch there, copy fields,
a confirmation before revoking a token, a run page that refreshes without JavaScript, the worker hint."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from tests.factories import finish_runs, make_catalog
from tests.helpers import attr, copied, one, parse, queue, texts


@pytest.fixture
def two_homes(database, make_member, make_org, join):
    """Ann works in Acme RL and also belongs to Globex Research, which holds a finished run."""
    ann = make_member("ann@acme.test", "Acme RL")
    globex = make_org("Globex Research")
    join(ann, globex, "viewer")
    catalog = make_catalog(database, globex.id, {"kind": "scripted", "skill": 0.5}, attempt_count=2)
    run = finish_runs(database, catalog, 1)[0]
    with database.session(globex.id) as session:
        trial = session.execute(text("SELECT id FROM evaluation_trials LIMIT 1")).scalar_one()
    return ann, globex, run, trial


@pytest.mark.leak
@pytest.mark.parametrize("kind", ["trial", "run"])
def test_a_link_of_another_of_your_organizations_offers_to_switch_and_open(client, auth, two_homes, kind):
    ann, globex, run, trial = two_homes
    auth.login(ann.email)
    url = f"/trials/{trial}#step-2" if kind == "trial" else f"/runs/{run}"
    path = url.split("#")[0]
    answer = client.get(path)
    assert answer.status_code == 404
    assert "belongs to Globex Research, another organization you are a member of" in answer.text
    form = one(answer.text, "main form[action='/orgs/switch']")
    assert attr(one(form, "input[name=organization_id]"), "value") == str(globex.id)
    assert attr(one(form, "input[name=next]"), "value") == path
    switched = client.post(
        "/orgs/switch", data={"organization_id": str(globex.id), "next": path, "csrf_token": auth.csrf()}
    )
    assert switched.status_code == 303 and switched.headers["Location"] == path
    assert client.get(path).status_code == 200


@pytest.mark.leak
def test_no_offer_names_an_organization_you_do_not_belong_to(client, auth, two_homes, make_member):
    _, _, run, trial = two_homes
    outsider = make_member("eve@initech.test", "Initech")
    auth.login(outsider.email)
    for path in (f"/trials/{trial}", f"/runs/{run}", f"/trials/{uuid.uuid4()}"):
        answer = client.get(path)
        assert answer.status_code == 404
        assert "Globex" not in answer.text
        assert parse(answer.text).select("main form[action='/orgs/switch']") == []


@pytest.mark.leak
def test_the_switch_never_goes_off_site(client, auth, two_homes):
    ann, globex, _, _ = two_homes
    auth.login(ann.email)
    for target in ("https://evil.test/", "//evil.test/", "/\\evil.test"):
        switched = client.post(
            "/orgs/switch", data={"organization_id": str(globex.id), "next": target, "csrf_token": auth.csrf()}
        )
        assert switched.status_code == 303 and switched.headers["Location"] == "/environments"


def test_the_runtime_role_learns_nothing_from_the_lookup_without_a_user(database, two_homes):
    _, _, run, trial = two_homes
    with database.session(None) as session:
        found = session.execute(text("SELECT * FROM organization_holding('trial', :id)"), {"id": trial}).all()
        assert found == []
        kinds = session.execute(text("SELECT * FROM organization_holding('users', :id)"), {"id": run}).all()
        assert kinds == []


def test_tokens_are_copied_from_a_read_only_field_and_revoked_after_a_confirmation(api, count_rows):
    page = api.client.post("/settings/tokens", data={"name": "nightly"}, headers={"X-CSRFToken": api.token})
    assert page.status_code == 201
    field = one(page.text, "#new-token")
    assert attr(field, "readonly") == "" and attr(field, "value").startswith("afk_")
    assert attr(one(page.text, "button[data-copy=new-token]"), "hidden") == ""  # shown by JavaScript only
    assert any(curl.startswith('curl -H "Authorization: Bearer $TOKEN"') for curl in copied(page.text))
    listing = parse(api.get("/settings/tokens").text)
    confirm = one(listing, "details.confirm-revoke")
    assert "Yes, revoke nightly" in one(confirm, "form button").get_text()
    action = attr(one(confirm, "form"), "action")
    assert api.client.post(action, headers={"X-CSRFToken": api.token}).status_code == 303
    assert count_rows("api_tokens", api.org, "revoked_at IS NOT NULL") == 1


def test_a_run_in_progress_refreshes_itself_without_javascript_and_a_finished_one_does_not(api, database, member):
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=2)
    queued = queue(database, catalog)[0]
    page = parse(api.get(f"/runs/{queued}").text)
    assert [attr(m, "content") for m in page.select("head noscript meta[http-equiv=refresh]")] == ["5"]
    assert "refresh now" in " ".join(str(n) for n in page.select("main noscript"))
    assert "No worker is running" in one(page, ".run-now").get_text()
    finished = finish_runs(database, catalog, 1)[0]
    done = parse(api.get(f"/runs/{finished}").text)
    assert done.select("meta[http-equiv=refresh]") == [] and "refresh now" not in done.get_text()


def test_the_queued_hint_counts_live_workers_and_their_runs(api, database, member):
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=2)
    queued, running = queue(database, catalog, count=2)
    with database.admin_session() as session, session.begin():
        session.execute(
            text("INSERT INTO worker_presence (name, sandbox_mode) VALUES ('w1', 'bwrap'), ('w2', 'bwrap')")
        )
    with database.admin_session(member.org.id) as session, session.begin():
        session.execute(text("UPDATE evaluation_runs SET status = 'running' WHERE id = :id"), {"id": running})
    hint = one(api.get(f"/runs/{queued}").text, ".run-now").get_text(" ", strip=True)
    assert "2 workers are running, busy with 1 run of this organization" in hint
    assert "No worker is running" not in " ".join(texts(api.get(f"/runs/{queued}").text, ".run-now"))


def test_the_start_run_form_says_the_attempt_counts_it_takes(api, database, member):
    """The label read "attemptCount (None to None; …)" and the input min="None" max="None": the bounds come from the
    rule the form follows (1 to 8, as the API's)."""
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.5}, attempt_count=2)
    page = parse(api.get(f"/environments/{catalog.environment_id}").text)
    assert one(page, "label[for=attempt_count]").get_text() == "attemptCount (1\u20138; empty uses the configuration's)"
    field = one(page, "#attempt_count")
    assert (attr(field, "min"), attr(field, "max")) == ("1", "8")
