"""Triage in the browser's pages: the label set at /settings/labels, and on the trial page labels, review state,
human category, notes and history; refusals re-render with the reason (422) and write nothing; viewers read only;
two reviewers' concurrent label changes are both kept."""

from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import text

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import TABLES, attr, error_summary_links, one, parse, table_counts, texts
from web.forms import NEEDS_A_REASON

NOVICE = {"kind": "scripted", "skill": 0.3}


@pytest.fixture
def trial(database, member) -> uuid.UUID:
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=2), 1)
    with database.session(member.org.id) as session:
        return session.execute(text("SELECT id FROM evaluation_trials ORDER BY trial_number LIMIT 1")).scalar_one()


def form_post(api: ApiClient, url: str, **fields):
    return api.client.post(url, data={"csrf_token": api.token, **fields})


def label_id(database, org_id, name: str) -> str:
    with database.session(org_id) as session:
        return str(session.execute(text("SELECT id FROM labels WHERE name = :n"), {"n": name}).scalar_one())


def test_the_label_set_page_adds_lists_and_deletes_labels(api, database, member):
    empty = api.get("/settings/labels")
    assert empty.status_code == 200 and "No labels yet" in one(empty.text, ".empty-state").get_text()
    made = form_post(api, "/settings/labels", name="flaky-verifier", color="red", description="verifier noise")
    assert made.status_code == 303
    page = api.get("/settings/labels").text
    assert texts(page, "#labels tbody th .label-chip") == ["flaky-verifier"]
    assert "verifier noise" in texts(page, "#labels tbody td")
    deleted = form_post(api, f"/settings/labels/{label_id(database, member.org.id, 'flaky-verifier')}/delete")
    assert deleted.status_code == 303 and "No labels yet" in api.get("/settings/labels").text


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("fields", "status", "said"),
    [
        ({"name": ""}, 422, "Enter a name."),
        ({"name": "x" * 65}, 422, "Name must be a name of 1 to 64 characters"),
        ({"name": "tab\there"}, 422, "without control characters"),
        ({"name": "\ufe50x"}, 422, "also in its normal form"),  # NFKC makes the small comma a comma
        ({"name": "Flaky"}, 409, "A label named 'flaky' already exists"),
        ({"name": "fine", "color": "chartreuse"}, 422, "Choose a colour: one of gray"),
    ],
)
def test_bad_labels_re_render_with_the_reason_and_write_nothing(api, member, count_rows, fields, status, said):
    assert form_post(api, "/settings/labels", name="flaky").status_code == 303
    before = table_counts(count_rows, member.org.id)
    response = form_post(api, "/settings/labels", **{"color": "gray", **fields})
    assert response.status_code == status
    assert said in one(response.text, ".error-summary li").get_text()
    assert table_counts(count_rows, member.org.id) == before


def test_a_reviewer_labels_reviews_and_annotates_a_trial(api, database, member, trial):
    assert "create your organization's labels" in api.get(f"/trials/{trial}").text
    form_post(api, "/settings/labels", name="wrong-customer", color="orange")
    page = api.get(f"/trials/{trial}").text
    assert texts(page, "#trial-labels") == ["none"] and texts(one(page, "#add-label"), "option") == ["wrong-customer"]
    wrong = label_id(database, member.org.id, "wrong-customer")
    assert form_post(api, f"/trials/{trial}/labels", label_id=wrong).status_code == 303
    reviewed = {"review_state": "excluded", "reason": "ordered for Bo, not Al", "human_category": "wrong_customer"}
    assert form_post(api, f"/trials/{trial}/review", **reviewed).status_code == 303
    hostile = "<script>alert(1)</script> step 2 chose the wrong customer"
    assert form_post(api, f"/trials/{trial}/notes", body=hostile, step="1").status_code == 303
    page = api.get(f"/trials/{trial}").text
    assert texts(page, "#trial-labels .label-chip") == ["wrong-customer"]
    assert texts(page, ".review-state") == ["excluded"]
    category = one(page, "dl.facts dd:nth-of-type(3)").get_text(" ", strip=True)
    assert category.startswith("wrong_customer (a reviewer's; the verifier said ")
    assert texts(page, ".note-body") == [hostile] and "<script>alert(1)</script>" not in page
    assert attr(one(page, ".notes a"), "href") == "#step-1"
    history = [row.get_text(" ", strip=True) for row in parse(page).select("#history tbody tr td:nth-of-type(3)")]
    assert history == ["note added", "human category", "review", "labels"]


@pytest.mark.bad_input
def test_excluding_without_a_reason_and_an_overlong_note_answer_422_and_write_nothing(api, member, trial, count_rows):
    before = table_counts(count_rows, member.org.id)
    excluded = form_post(api, f"/trials/{trial}/review", review_state="excluded", reason="  ")
    assert excluded.status_code == 422
    assert error_summary_links(excluded.text) == [("reason", NEEDS_A_REASON)]
    long = form_post(api, f"/trials/{trial}/notes", body="x" * 10_001)
    assert long.status_code == 422
    assert error_summary_links(long.text) == [("note-body", "A note holds at most 10000 characters, not 10001.")]
    api_long = api.post(f"/api/v1/trials/{trial}/notes", {"body": "x" * 10_001})
    assert api_long.status_code == 422 and api_long.json["error"] == "invalid body"
    api_excluded = api.client.patch(
        f"/api/v1/trials/{trial}", json={"reviewState": "excluded"}, headers={"X-CSRFToken": api.token}
    )
    assert api_excluded.status_code == 422 and api_excluded.json["error"] == "invalid reason"
    assert table_counts(count_rows, member.org.id) == before


@pytest.mark.bad_input
def test_viewers_read_triage_and_write_none(api, viewer_api, member, trial, count_rows):
    form_post(api, "/settings/labels", name="flaky")
    form_post(api, f"/trials/{trial}/notes", body="look at step 2")
    page = viewer_api.get(f"/trials/{trial}").text
    assert texts(page, ".note-body") == ["look at step 2"]
    assert parse(page).select("#triage form") == [] and parse(page).select("#new-label") == []
    before = table_counts(count_rows, member.org.id)
    for url, fields in (
        ("/settings/labels", {"name": "mine"}),
        (f"/trials/{trial}/review", {"review_state": "reviewed"}),
        (f"/trials/{trial}/notes", {"body": "mine"}),
    ):
        assert form_post(viewer_api, url, **fields).status_code == 403
    assert table_counts(count_rows, member.org.id) == before


@pytest.mark.leak
def test_another_organizations_trial_note_and_label_answer_404_and_write_nothing(
    api, database, member, trial, make_member, count_rows
):
    form_post(api, "/settings/labels", name="flaky")
    form_post(api, f"/trials/{trial}/notes", body="ours")
    with database.session(member.org.id) as session:
        note = session.execute(text("SELECT id FROM trial_notes")).scalar_one()
    mine = label_id(database, member.org.id, "flaky")
    eve = ApiClient(api.client.application.test_client(), make_member("eve@evil.test", "Evil Corp", "owner"))
    before = {t: count_rows(t) for t in TABLES}
    headers = {"X-CSRFToken": eve.token}
    for response in (
        form_post(eve, f"/trials/{trial}/labels", label_id=mine),
        form_post(eve, f"/trials/{trial}/review", review_state="reviewed"),
        form_post(eve, f"/trials/{trial}/notes/{note}/delete"),
        form_post(eve, f"/settings/labels/{mine}/delete"),
        eve.get(f"/api/v1/trials/{trial}"),
        eve.client.put(f"/api/v1/trials/{trial}/labels", json={"labels": []}, headers=headers),
        eve.client.delete(f"/api/v1/trials/{trial}/notes/{note}", headers=headers),
    ):
        assert response.status_code == 404
    assert {t: count_rows(t) for t in TABLES} == before


def test_only_the_author_or_an_owner_changes_a_note(api, member, trial, make_member, owner_api):
    other = ApiClient(api.client.application.test_client(), make_member("bo@acme.test", member.org, "member"))
    note = api.post(f"/api/v1/trials/{trial}/notes", {"body": "mine"}).json["id"]
    headers = {"X-CSRFToken": other.token}
    refused = other.client.patch(f"/api/v1/trials/{trial}/notes/{note}", json={"body": "yours"}, headers=headers)
    assert refused.status_code == 403 and refused.json["error"] == "forbidden"
    assert form_post(other, f"/trials/{trial}/notes/{note}/delete").status_code == 403
    page = other.get(f"/trials/{trial}").text
    assert parse(page).select(".note-edit") == []
    assert (
        owner_api.client.delete(
            f"/api/v1/trials/{trial}/notes/{note}", headers={"X-CSRFToken": owner_api.token}
        ).status_code
        == 204
    )


def test_two_reviewers_adding_labels_at_once_keep_both(app, api, database, member, trial, make_member):
    for name in ("flaky", "wrong-customer"):
        form_post(api, "/settings/labels", name=name)
    other = ApiClient(app.test_client(), make_member("bo@acme.test", member.org, "member"))
    ids = [label_id(database, member.org.id, n) for n in ("flaky", "wrong-customer")]
    start = threading.Barrier(2)
    answers: list[int] = []

    def add(reviewer: ApiClient, label: str) -> None:
        start.wait()
        answers.append(form_post(reviewer, f"/trials/{trial}/labels", label_id=label).status_code)

    threads = [threading.Thread(target=add, args=pair) for pair in ((api, ids[0]), (other, ids[1]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [303, 303]
    assert api.get(f"/api/v1/trials/{trial}").json["labels"] == ["flaky", "wrong-customer"]
