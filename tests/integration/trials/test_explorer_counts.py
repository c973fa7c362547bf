"""The explorer says how many trials match (exactly, or "about" past 10,000), and offers only the export kinds the
reward filters leave something to hold: every kind it leaves out is empty through the API too."""

from __future__ import annotations

import pytest

import blueprints.trials
from queries.exports import EXPORT_KINDS
from queries.filters import TrialFilters
from queries.trials import TrialCount, count_trials
from tests.factories import finish_runs, make_catalog
from tests.helpers import attr, one, parse, sql_ids
from web.urls import possible_kinds


@pytest.fixture
def world(database, member):
    finish_runs(database, make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.5}, attempt_count=8), 3)


@pytest.mark.parametrize(
    ("query", "where"),
    [
        ("", "TRUE"),
        ("status=failed", "t.status = 'failed'"),
        ("rewardBand=recovery", "t.reward > 0 AND t.reward < 1"),
        ("minReward=0.5", "t.reward >= 0.5"),
        ("rewardBand=unscored", "t.reward IS NULL"),
    ],
)
def test_the_count_equals_the_trials_sql_selects(api, database, member, world, query, where):
    expected = len(sql_ids(database, member.org.id, where))
    fragment = api.get(f"/trials/count?{query}", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    shown = one(fragment.text, "#trial-count").get_text()
    assert shown.startswith(f"{expected} trial") and "about" not in shown
    page = api.get(f"/trials/count?{query}")  # without JavaScript: a page with the way back
    assert one(page.text, "#trial-count").get_text() == shown
    assert attr(one(page.text, "main p a"), "href").startswith("/trials")


def test_the_explorer_loads_its_count_with_its_filters(api, world):
    listing = parse(api.get("/trials?status=failed&rewardBand=failed").text)
    count = one(listing, "#trial-count")
    assert attr(count, "hx-get") == "/trials/count?status=failed&rewardBand=failed"
    assert attr(count, "hx-trigger") == "load"


def test_past_the_cap_the_count_is_the_planners_estimate(database, member, world):
    with database.session(member.org.id) as session:
        small = count_trials(session, TrialFilters(), cap=5)
        exact = count_trials(session, TrialFilters())
    assert exact == TrialCount(24, True)
    assert not small.exact and small.trials >= 6


def test_an_estimate_reads_about(api, world, monkeypatch):
    monkeypatch.setattr(blueprints.trials, "count_trials", lambda session, filters: TrialCount(123_456, False))
    shown = one(api.get("/trials/count", headers={"HX-Request": "true"}).text, "#trial-count").get_text()
    assert shown.startswith("about 123,456 trials match")


@pytest.mark.parametrize(
    ("filters", "kinds"),
    [
        (TrialFilters(), EXPORT_KINDS),
        (TrialFilters(reward_band="successful"), ("all", "successful")),
        (TrialFilters(reward_band="failed"), ("all", "failed", "recovery", "preference")),
        (TrialFilters(reward_band="recovery"), ("all", "failed", "recovery", "preference")),
        (TrialFilters(reward_band="unscored"), ()),
        (TrialFilters(max_reward=0.0), ("all", "failed")),
        (TrialFilters(min_reward=1.0), ("all", "successful")),
        (TrialFilters(min_reward=0.2, max_reward=0.2), ("all", "failed", "recovery")),
        (TrialFilters(min_reward=0.7, max_reward=0.3), ()),
        (TrialFilters(reward_band="successful", max_reward=0.5), ()),
        (TrialFilters(reward_band="recovery", min_reward=1.0), ()),
    ],
)
def test_the_kinds_a_reward_filter_leaves_something_to_hold(filters, kinds):
    assert possible_kinds(filters) == tuple(kinds)


@pytest.mark.parametrize("query", ["rewardBand=successful", "maxReward=0", "rewardBand=unscored", "minReward=1"])
def test_kinds_left_out_of_the_explorer_are_empty_through_the_api(api, world, query):
    page = parse(api.get(f"/trials?{query}").text)
    offered = [one(row, "th").get_text() for row in page.select("table.export-kinds tbody tr")]
    left_out = [kind for kind in EXPORT_KINDS if kind not in offered]
    assert left_out, f"{query} rules out no kind"
    note = one(page, "#kinds-ruled-out").get_text()
    for kind in left_out:
        assert kind in note
        lines = api.get(f"/api/v1/rollouts?kind={kind}&{query}").text.splitlines()
        assert lines == [], f"{kind} under {query} holds {len(lines)} lines"
