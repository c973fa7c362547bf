"""The triage flow: explorer links carry their filter to the trial page, whose previous and next match walk exactly
the explorer's list, in its order, both ways; a triage change keeps the list it was opened from."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import api_ids, attr, one, parse
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
    visited, url = [], first_url
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


def test_a_triage_change_returns_to_the_trial_with_its_list(shared_flow):
    api = shared_flow["api"]
    trial = api_ids(api, "status=failed")[1]
    response = api.client.post(
        f"/trials/{trial}/review?status=failed",
        data={"csrf_token": api.token, "review_state": "reviewed"},
    )
    assert response.status_code == 303
    assert response.headers["Location"] == f"/trials/{trial}?status=failed#triage"
