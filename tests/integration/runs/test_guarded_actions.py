"""Guarded actions: one run per submitted form, Reset only on finished runs a worker can rerun (after a confirmation
step), imported evaluators never preselected, and an organization that never loses its last owner."""

from __future__ import annotations

import threading
import uuid

import pytest
from bs4 import Tag
from sqlalchemy import text
from werkzeug.test import TestResponse

from tests.conftest import csrf_token_from
from tests.factories import finish_run, make_catalog
from tests.helpers import attr, one, parse
from writes.accounts import AccountError, change_role
from writes.runs import queue_once, start_run

SCRIPTED = {"kind": "scripted", "skill": 1.0}
IMPORTED = {"kind": "external", "name": "other-harness-agent"}


def submission_keys(body: str) -> list[str]:
    """The submission keys a page's forms carry: each field named submission_key whose value is a UUID's text."""
    values = [attr(field, "value") for field in parse(body).select('[name="submission_key"][value]')]
    return [v for v in values if len(v) == 36 and set(v) <= set("0123456789abcdef-")]


def submission_key(body: str) -> str:
    """The first submission key of a page; the test fails when it has none."""
    keys = submission_keys(body)
    assert keys, "no submission key"
    return keys[0]


@pytest.fixture
def catalog(database, member):
    return make_catalog(database, member.org.id, SCRIPTED, attempt_count=3, config_name="scripted-solver")


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def start_form(page, catalog, key: str | None, **headers) -> TestResponse:
    body = page.get(f"/environments/{catalog.environment_id}").text
    data = {
        "csrf_token": csrf_token_from(body),
        "environment_version_id": str(catalog.version_id),
        "evaluator_config_id": str(catalog.config_id),
        "attempt_count": "2",
    }
    if key is not None:
        data["submission_key"] = key
    return page.post(f"/environments/{catalog.environment_id}/runs", data=data, headers=headers)


def set_run(database, org_id, run_id, **values) -> None:
    assignments = ", ".join(f"{name} = :{name}" for name in values)
    with database.session(org_id) as session, session.begin():
        session.execute(text(f"UPDATE evaluation_runs SET {assignments} WHERE id = :id"), {"id": run_id, **values})


# One run per submission ---------------------------------------------------------------------------------------------


def test_each_rendering_of_the_start_form_carries_a_new_submission_key(page, catalog):
    first = submission_keys(page.get(f"/environments/{catalog.environment_id}").text)
    second = submission_keys(page.get(f"/environments/{catalog.environment_id}").text)
    assert len(first) == len(second) == 1 and first != second


def test_a_second_post_with_the_same_key_queues_nothing_and_goes_to_the_first_run(page, catalog, count_rows):
    key = submission_key(page.get(f"/environments/{catalog.environment_id}").text)
    first = start_form(page, catalog, key, **{"HX-Request": "true"})
    assert first.status_code == 204 and first.headers["HX-Redirect"].startswith("/runs/")
    assert count_rows("evaluation_runs") == 1
    again = start_form(page, catalog, key, **{"HX-Request": "true"})
    plain = start_form(page, catalog, key)
    assert again.status_code == 204 and again.headers["HX-Redirect"] == first.headers["HX-Redirect"]
    assert plain.status_code == 303 and plain.location == first.headers["HX-Redirect"]
    assert count_rows("evaluation_runs") == 1
    assert "already submitted" in page.get(plain.location).text
    other = start_form(page, catalog, str(uuid.uuid4()))
    assert other.status_code == 303 and other.location != plain.location
    assert count_rows("evaluation_runs") == 2


def test_a_form_redrawn_with_errors_keeps_its_key(page, catalog, count_rows):
    key = str(uuid.uuid4())
    body = page.get(f"/environments/{catalog.environment_id}").text
    response = page.post(
        f"/environments/{catalog.environment_id}/runs",
        data={
            "csrf_token": csrf_token_from(body),
            "environment_version_id": str(catalog.version_id),
            "evaluator_config_id": str(catalog.config_id),
            "attempt_count": "9",
            "submission_key": key,
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 422 and submission_keys(response.text) == [key]
    assert count_rows("evaluation_runs") == 0


def test_two_concurrent_submissions_with_one_key_queue_one_run(database, catalog, count_rows):
    """The second transaction waits on the unique index until the first commits, then answers the first one's run."""
    key = uuid.uuid4()
    org = catalog.org_id
    answers: dict[str, tuple[uuid.UUID, bool]] = {}
    with database.session(org) as first:
        run, new = queue_once(
            first, key, lambda: start_run(first, catalog.version_id, catalog.config_id, 1, submission_key=key)
        )
        answers["first"] = (run.id, new)

        def second_request() -> None:
            with database.session(org) as second:
                other, created = queue_once(
                    second, key, lambda: start_run(second, catalog.version_id, catalog.config_id, 1, submission_key=key)
                )
                second.commit()
                answers["second"] = (other.id, created)

        thread = threading.Thread(target=second_request)
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive()  # blocked on the first one's uncommitted key
        first.commit()
    thread.join(timeout=30)
    assert answers["first"] == (answers["second"][0], True) and answers["second"][1] is False
    assert count_rows("evaluation_runs", org) == 1


# Reset -----------------------------------------------------------------------------------------------------------


def reset_offers(run_page: str) -> list[Tag]:
    """Every link, button or form of a run page that leads to a reset."""
    return parse(run_page).select(
        '[href*="/reset?mode="], [hx-get*="/reset?mode="], form[action*="/reset"], [hx-post*="/reset"]'
    )


def reset_post(page, run_id, key: str | None = None, mode: str = "new_world"):
    body = page.get("/environments").text
    data = {"mode": mode, "csrf_token": csrf_token_from(body)}
    if key:
        data["submission_key"] = key
    return page.post(f"/runs/{run_id}/reset", data=data)


def test_reset_is_offered_on_a_finished_run_and_confirmed_once(page, database, catalog, count_rows):
    run_id = finish_run(database, catalog)
    run_page = page.get(f"/runs/{run_id}").text
    link = f"/runs/{run_id}/reset?mode=new_world"
    assert one(run_page, f'div.run-actions a[href="{link}"]').get_text() == "Reset (new_world)…"
    confirm = page.get(link)
    assert confirm.status_code == 200 and "Confirm reset (new_world)" in confirm.text
    assert "queues a new run of 3 trials of scripted-solver on admin-console v1" in " ".join(confirm.text.split())
    assert count_rows("evaluation_runs") == 1  # looking at the confirmation writes nothing
    key = submission_key(confirm.text)
    first = reset_post(page, run_id, key)
    second = reset_post(page, run_id, key)
    assert first.status_code == second.status_code == 303 and first.location == second.location
    assert count_rows("evaluation_runs") == 2
    assert "reset mode new_world" in page.get(first.location).text


def test_a_used_confirmation_says_so_and_queues_nothing(page, database, catalog, count_rows):
    """Back to a confirmation that was used (the page fetched again, with a fresh key) or a second tab's older
    confirmation: the run was reset since it was shown, so it queues nothing and opens the reset run; only the
    explicit "Queue another reset" of a confirmation that says so queues another."""
    run_id = finish_run(database, catalog)
    link = f"/runs/{run_id}/reset?mode=new_world"
    older_tab = page.get(link).text  # shown before any reset
    first = reset_post(page, run_id, submission_key(page.get(link).text))
    assert first.status_code == 303 and count_rows("evaluation_runs") == 2
    stale = page.post(
        f"/runs/{run_id}/reset",
        data={
            "mode": "new_world",
            "csrf_token": csrf_token_from(older_tab),
            "submission_key": submission_key(older_tab),
            "seen": "",
        },
    )
    assert stale.status_code == 303 and stale.location == first.location
    assert "This confirmation was already used" in page.get(stale.location).text
    assert count_rows("evaluation_runs") == 2
    again = page.get(link)
    assert "This run was already reset" in again.text and "Queue another reset (new_world)" in again.text
    form = one(again.text, "form[action$='/reset']")
    data = {field["name"]: field.get("value", "") for field in form.select("input[name]")}
    another = page.post(f"/runs/{run_id}/reset", data=data)
    assert another.status_code == 303 and another.location != first.location
    assert count_rows("evaluation_runs") == 3


@pytest.mark.parametrize("status", ["queued", "running"])
def test_reset_of_an_unfinished_run_is_refused_with_409_and_nothing_written(
    page, database, catalog, count_rows, status
):
    run_id = finish_run(database, catalog)
    set_run(database, catalog.org_id, run_id, status=status)
    run_page = page.get(f"/runs/{run_id}").text
    assert reset_offers(run_page) == [] and "Reset is offered once the run has finished." in run_page
    confirm = page.get(f"/runs/{run_id}/reset?mode=new_world")
    assert confirm.status_code == 409 and f"This run is still {status}" in confirm.text
    assert "Confirm reset" not in confirm.text
    refused = reset_post(page, run_id, str(uuid.uuid4()))
    assert refused.status_code == 409 and f"This run is still {status}" in parse(refused.text).get_text()
    assert count_rows("evaluation_runs") == 1


def test_reset_of_an_imported_run_is_refused_on_the_page_and_the_api(page, api, database, member, count_rows):
    imported = make_catalog(database, member.org.id, IMPORTED, attempt_count=2, config_name="harbor-agent")
    run_id = finish_run(database, imported)
    run_page = page.get(f"/runs/{run_id}").text
    assert reset_offers(run_page) == [] and "Imported results" in run_page
    assert page.get(f"/runs/{run_id}/reset?mode=new_workspace").status_code == 409
    refused = reset_post(page, run_id, str(uuid.uuid4()), mode="new_workspace")
    assert refused.status_code == 409 and "ran in another harness" in parse(refused.text).get_text()
    through_api = api.post(f"/api/v1/evaluation-runs/{run_id}/reset", {"mode": "new_world"})
    assert through_api.status_code == 409 and through_api.json["error"] == "cannot reset"
    assert count_rows("evaluation_runs") == 1


def test_a_bad_reset_mode_on_the_confirmation_page_answers_400(page, database, catalog):
    run_id = finish_run(database, catalog)
    assert page.get(f"/runs/{run_id}/reset?mode=initial").status_code == 400


# Imported evaluators ---------------------------------------------------------------------------------------------


def test_imported_evaluators_are_marked_and_never_preselected(page, database, member, count_rows):
    # "aaa-…" sorts first: the browser would preselect it if nothing else were selected.
    imported = make_catalog(database, member.org.id, IMPORTED, attempt_count=2, config_name="aaa-imported")
    runnable = make_catalog(database, member.org.id, SCRIPTED, attempt_count=2, config_name="zzz-scripted")
    body = page.get(f"/environments/{runnable.environment_id}").text
    select = one(body, "select#evaluator_config_id")
    options = [
        (attr(o, "value"), "selected" if o.has_attr("selected") else "", o.get_text()) for o in select.select("option")
    ]
    assert [(value, label) for value, chosen, label in options if chosen] == [
        (str(runnable.config_id), "zzz-scripted (attemptCount 2)")
    ]
    assert (str(imported.config_id), "", "aaa-imported (attemptCount 2) (imported)") in options
    refused = page.post(
        f"/environments/{runnable.environment_id}/runs",
        data={
            "csrf_token": csrf_token_from(body),
            "environment_version_id": str(runnable.version_id),
            "evaluator_config_id": str(imported.config_id),
            "submission_key": str(uuid.uuid4()),
        },
        headers={"HX-Request": "true"},
    )
    assert refused.status_code == 422 and "aaa-imported is imported" in refused.text
    assert count_rows("evaluation_runs") == 0


def test_with_only_imported_evaluators_nothing_is_preselected(page, database, member):
    imported = make_catalog(database, member.org.id, IMPORTED, attempt_count=2, config_name="harbor-agent")
    body = page.get(f"/environments/{imported.environment_id}").text
    select = one(body, "select#evaluator_config_id")
    assert [o.get_text() for o in select.select("option[selected]")] == ["Choose an evaluator"]


# The last owner --------------------------------------------------------------------------------------------------


@pytest.fixture
def owners(make_member):
    olga = make_member("olga@acme.test", "Acme RL", "owner")
    otto = make_member("otto@acme.test", olga.org, "owner")
    return olga, otto


def memberships(database, org_id) -> dict[str, tuple[str, uuid.UUID]]:
    with database.session(org_id) as session:
        rows = session.execute(text("SELECT u.email, m.role, m.id FROM memberships m JOIN users u ON u.id = m.user_id"))
        return {email: (role, membership) for email, role, membership in rows}


def test_leaving_or_demoting_yourself_needs_the_confirmation_box(client, auth, database, owners):
    olga, _ = owners
    auth.login(olga.email)
    page = client.get("/settings/members").text
    assert len(parse(page).select('input[name="confirm"][value="yes"][required]')) == 2  # own row: role and leave
    own = memberships(database, olga.org.id)["olga@acme.test"][1]
    for url, data in ((f"/settings/members/{own}/role", {"role": "member"}), (f"/settings/members/{own}/remove", {})):
        refused = client.post(url, data={**data, "csrf_token": auth.csrf()})
        assert refused.status_code == 422 and "Tick the confirmation box" in refused.text
        assert memberships(database, olga.org.id)["olga@acme.test"][0] == "owner"
    demoted = client.post(
        f"/settings/members/{own}/role", data={"role": "member", "confirm": "yes", "csrf_token": auth.csrf()}
    )
    assert demoted.status_code == 303 and memberships(database, olga.org.id)["olga@acme.test"][0] == "member"


def test_the_only_owner_has_no_controls_on_their_row_and_is_refused(client, auth, database, make_member):
    olga = make_member("olga@acme.test", "Acme RL", "owner")
    make_member("mike@acme.test", olga.org, "member")
    auth.login(olga.email)
    page = client.get("/settings/members").text
    assert "The only owner: make someone else owner before changing your role or removing yourself." in page
    own = memberships(database, olga.org.id)["olga@acme.test"][1]
    for url, data in (
        (f"/settings/members/{own}/role", {"role": "viewer", "confirm": "yes"}),
        (f"/settings/members/{own}/remove", {"confirm": "yes"}),
    ):
        refused = client.post(url, data={**data, "csrf_token": auth.csrf()})
        assert refused.status_code == 422 and "at least one owner" in refused.text
    assert memberships(database, olga.org.id)["olga@acme.test"][0] == "owner"


def test_two_owners_demoting_each_other_at_once_leave_one_owner(database, owners):
    olga, _ = owners
    org = olga.org.id
    ids = {email: membership for email, (_, membership) in memberships(database, org).items()}
    outcome: dict[str, object] = {}
    with database.session(org) as first:
        change_role(first, ids["otto@acme.test"], "member")

        def other_owner() -> None:
            with database.session(org) as second:
                try:
                    change_role(second, ids["olga@acme.test"], "member")
                    second.commit()
                    outcome["second"] = "demoted"
                except AccountError as error:
                    outcome["second"] = str(error)

        thread = threading.Thread(target=other_owner)
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive()  # waits for the first one's lock on the owner rows
        first.commit()
    thread.join(timeout=30)
    assert "at least one owner" in str(outcome["second"])
    roles = {email: role for email, (role, _) in memberships(database, org).items()}
    assert roles == {"olga@acme.test": "owner", "otto@acme.test": "member"}
