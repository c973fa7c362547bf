"""The triage flow: explorer links carry their filter to the trial page, whose previous and next match walk exactly
the explorer's list, in its order, both ways; a triage change keeps the list it was opened from."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import api_ids, attr, one, parse, rows, table_counts
from tests.worlds import shared_world

NOVICE = {"kind": "scripted", "skill": 0.3}


@shared_world
def shared_flow(request):
    """Three runs of six trials, read by a member."""
    database = request.getfixturevalue("database")
    member = request.getfixturevalue("make_member")("ann@acme.test", "Acme RL", "member")
    api = ApiClient(request.getfixturevalue("app").test_client(), member)
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=6), 3)
    return {"member": member, "api": api}


def walk(api, first_url: str, rel: str) -> list[str]:
    """The trial ids visited from `first_url` following the page's `rel` match link to its end."""
    visited: list[str] = []
    url: str | None = first_url
    while url:
        page = parse(api.get(url).text)
        visited.append(urlsplit(url).path.rsplit("/", 1)[1])
        link = page.select_one(f'nav.matches a[rel="{rel}"]')
        url = attr(link, "href") if link else None
        assert len(visited) <= 40, "the walk does not end"
    return visited


@pytest.mark.parametrize(
    "query", ["sort=failed", "status=failed&sort=failed", "sort=reward", "status=failed&sort=-duration", "sort=newest"]
)
def test_next_and_previous_match_walk_the_explorer_list_both_ways(shared_flow, query):
    api = shared_flow["api"]
    listed = api_ids(api, query)
    assert len(listed) >= 3
    link = one(api.get(f"/trials?{query}").text, "#explorer tbody tr td a[href^='/trials/']")
    carried = parse_qs(urlsplit(attr(link, "href")).query)
    assert {k: v[0] for k, v in carried.items()} == dict(pair.split("=") for pair in query.split("&"))
    forwards = walk(api, attr(link, "href"), "next")
    assert forwards == listed
    last = f"/trials/{listed[-1]}?{query}"
    assert walk(api, last, "prev") == list(reversed(listed))
    back = one(api.get(last).text, 'nav.matches a[data-key="u"]')
    assert attr(back, "href") == f"/trials?{query}"


def test_a_trial_opened_without_a_list_has_no_match_links(shared_flow):
    api = shared_flow["api"]
    trial = api_ids(api)[0]
    assert parse(api.get(f"/trials/{trial}").text).select("nav.matches") == []


def test_a_trial_opened_without_a_list_walks_its_run_by_key(shared_flow, database):
    api, org = shared_flow["api"], shared_flow["member"].org.id
    run_id = rows(database, org, "SELECT evaluation_run_id FROM evaluation_trials LIMIT 1")[0][0]
    in_order = [
        str(row[0])
        for row in rows(
            database,
            org,
            "SELECT id FROM evaluation_trials WHERE evaluation_run_id = :r ORDER BY trial_number",
            r=run_id,
        )
    ]

    def walk_keys(first: str, key: str) -> list[str]:
        visited: list[str] = []
        url: str | None = f"/trials/{first}"
        while url:
            page = parse(api.get(url).text)
            visited.append(url.rsplit("/", 1)[1])
            keyed = page.select(f'#main a[data-key="{key}"]')
            assert len(keyed) <= 1, f"{key} names {len(keyed)} links"
            url = attr(keyed[0], "href") if keyed else None
            assert len(visited) <= 10, "the walk does not end"
        return visited

    assert walk_keys(in_order[0], "n") == in_order
    assert walk_keys(in_order[-1], "p") == list(reversed(in_order))
    page = parse(api.get(f"/trials/{in_order[2]}").text)
    assert [attr(a, "href") for a in page.select('#main a[data-key="u"]')] == [f"/runs/{run_id}"]
    listed = parse(api.get(f"/trials/{in_order[2]}?sort=failed").text)  # from a list: its keys alone
    assert all(a.find_parent("nav", class_="matches") for a in listed.select("#main a[data-key]"))


def test_a_triage_change_returns_to_the_trial_with_its_list(shared_flow):
    api = shared_flow["api"]
    trial = api_ids(api, "status=failed")[1]
    response = api.client.post(
        f"/trials/{trial}/review?status=failed",
        data={"csrf_token": api.token, "review_state": "reviewed"},
    )
    assert response.status_code == 303
    assert response.headers["Location"] == f"/trials/{trial}?status=failed#triage"


def test_bulk_actions_change_exactly_the_selected_trials_and_return_to_the_list(shared_flow):
    api = shared_flow["api"]
    assert api.post("/api/v1/labels", {"name": "flaky"}).status_code == 201
    failed = api_ids(api, "status=failed")
    chosen = failed[:3]
    page = api.get("/trials?status=failed").text
    assert attr(one(page, "form#bulk"), "action") == "/trials/bulk?status=failed&sort=failed"
    assert len(parse(page).select('input[type=checkbox][name=trial_id][form="bulk"]')) == len(failed)
    fields = {"csrf_token": api.token, "trial_id": chosen}
    labelled = api.client.post("/trials/bulk?status=failed", data={**fields, "action": "label", "label": "flaky"})
    assert labelled.status_code == 303 and labelled.headers["Location"] == "/trials?status=failed"
    assert sorted(api_ids(api, "label=flaky")) == sorted(chosen)
    excluded = api.client.post("/trials/bulk", data={**fields, "action": "excluded", "reason": "verifier noise"})
    assert excluded.status_code == 303
    assert sorted(api_ids(api, "reviewState=excluded")) == sorted(chosen)
    rows = parse(api.get("/trials?status=failed").text).select("table.trials tbody tr")
    reviews = {
        attr(one(r, "input[name=trial_id]"), "value"): one(r, "td.review").get_text(" ", strip=True) for r in rows
    }
    assert {i: reviews[i] for i in chosen} == {i: "excluded flaky" for i in chosen}
    assert all(reviews[i] == "" for i in failed[3:])


@pytest.mark.bad_input
def test_a_bulk_action_without_a_reason_or_with_a_foreign_trial_changes_nothing(shared_flow, make_member, count_rows):
    api, org = shared_flow["api"], shared_flow["member"].org.id
    chosen = api_ids(api, "status=failed")[:2]
    before = table_counts(count_rows, org)
    fields = {"csrf_token": api.token, "trial_id": chosen}
    refused = api.client.post("/trials/bulk", data={**fields, "action": "excluded", "reason": ""})
    assert refused.status_code == 303 and table_counts(count_rows, org) == before
    assert "Nothing changed" in one(api.get("/trials").text, ".flashes").get_text()
    foreign = api.client.post(
        "/trials/bulk", data={**fields, "trial_id": [*chosen, str(uuid.uuid4())], "action": "reviewed"}
    )
    assert foreign.status_code == 404 and table_counts(count_rows, org) == before
    bad_fields: list[dict[str, Any]] = [{"trial_id": ["x"]}, {"trial_id": []}, {"action": "delete"}]
    for bad in bad_fields:
        assert api.client.post("/trials/bulk", data={**fields, "action": "reviewed", **bad}).status_code == 400
    assert table_counts(count_rows, org) == before


def test_unreviewed_failures_are_one_click_from_environments_and_each_version(shared_flow, database):
    api = shared_flow["api"]
    link = one(api.get("/environments").text, "p.page-actions a")
    assert link.get_text() == "Unreviewed failures"
    assert sorted(api_ids(api, urlsplit(attr(link, "href")).query)) == sorted(api_ids(api, "status=failed"))
    environment = api_ids(api)  # any trial's environment page lists its version with the same link
    detail = api.get(f"/api/v1/trials/{environment[0]}").json
    version_page = api.get(f"/environments/{detail['environmentId']}").text
    version_link = one(version_page, "a[href*='reviewState=unreviewed']")
    assert "environmentVersionId=" in attr(version_link, "href") and "rewardBand=failed" in attr(version_link, "href")
