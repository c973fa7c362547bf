"""A reviewer's human category overrides the verifier's everywhere a failure category is counted or filtered: the
capability-gap page (overall and one evaluator's), the failureCategory filter of the explorer and the API, the
run page and the exports; the verifier's stays stored and shown beside it. Clearing it puts every count back."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.factories import finish_runs, make_catalog
from tests.helpers import api_ids, attr, migrate, one, parse, rows, texts

NOVICE = {"kind": "scripted", "skill": 0.3}
NEW = "wrong_customer_seen_by_a_human"


@pytest.fixture
def world(database, member):
    catalog = make_catalog(database, member.org.id, NOVICE, attempt_count=8)
    finish_runs(database, catalog, 2)
    return catalog


def gap(api, query: str = "") -> dict[str, int]:
    """The capability-gap page's overall table: failure category → failed trials."""
    page = parse(api.client.get(f"/capability-gap{query}").text)
    return {
        one(row, "td").get_text(strip=True): int(one(row, "a").get_text(strip=True))
        for row in page.select("table.gap tbody tr")
    }


def patch(api, trial_id, body: dict) -> dict:
    answer = api.client.patch(f"/api/v1/trials/{trial_id}", json=body, headers={"X-CSRFToken": api.token})
    assert answer.status_code == 200, answer.text
    return answer.json


# The category rollups recomputed from the trials, compared both ways (a row left at zero is a difference too).
ROLLUPS = {
    "failure_category_counts": (
        """SELECT environment_version_id, failure_category, count(*) FROM evaluation_trials
           WHERE failure_category IS NOT NULL GROUP BY 1, 2""",
        "SELECT environment_version_id, failure_category, trials FROM failure_category_counts",
    ),
    "evaluator_category_counts": (
        """SELECT t.environment_version_id, er.evaluator_config_id, coalesce(t.failure_category, ''), count(*)
           FROM evaluation_trials t JOIN evaluation_runs er ON er.id = t.evaluation_run_id GROUP BY 1, 2, 3""",
        "SELECT environment_version_id, evaluator_config_id, failure_category, trials FROM evaluator_category_counts",
    ),
}


def rollups_match_the_trials(database, org_id) -> None:
    for table, (recomputed, stored) in ROLLUPS.items():
        assert set(rows(database, org_id, recomputed)) == set(rows(database, org_id, stored)), table


def failed_trial(database, org_id) -> tuple[uuid.UUID, str]:
    """A failed trial and its verifier's category, from the most common category (so it stays listed)."""
    return rows(
        database,
        org_id,
        """SELECT id, failure_category FROM evaluation_trials WHERE failure_category IS NOT NULL
           ORDER BY count(*) OVER (PARTITION BY failure_category) DESC, id LIMIT 1""",
    )[0]


def test_a_human_category_moves_the_capability_gap_and_the_filter_and_clearing_it_puts_them_back(
    world, api, database, member
):
    org = member.org.id
    trial_id, verifier = failed_trial(database, org)
    evaluator = f"?evaluatorConfigId={world.config_id}"
    before, before_of_evaluator = gap(api), gap(api, evaluator)
    assert before[verifier] >= 2 and NEW not in before
    listed_before = api_ids(api, f"failureCategory={verifier}")
    assert str(trial_id) in listed_before

    reply = patch(api, trial_id, {"humanCategory": NEW})
    assert (reply["failureCategory"], reply["verifierCategory"], reply["humanCategory"]) == (NEW, verifier, NEW)
    moved = {**before, verifier: before[verifier] - 1, NEW: 1}
    assert gap(api) == moved
    assert gap(api, evaluator) == {**before_of_evaluator, verifier: before_of_evaluator[verifier] - 1, NEW: 1}
    assert api_ids(api, f"failureCategory={NEW}") == [str(trial_id)]
    assert sorted(api_ids(api, f"failureCategory={verifier}")) == sorted(set(listed_before) - {str(trial_id)})
    rollups_match_the_trials(database, org)

    # The gap page's link for the new category opens the explorer on exactly that trial.
    page = parse(api.client.get("/capability-gap").text)
    link = next(attr(a, "href") for a in page.select("table.gap a") if f"failureCategory={NEW}" in attr(a, "href"))
    explorer = parse(api.client.get(link).text)
    opened = {attr(a, "href").split("?")[0] for a in explorer.select("tbody a[href^='/trials/']")}
    assert opened == {f"/trials/{trial_id}"}

    # The trial page shows the reviewer's, and the verifier's beside it.
    trial_page = api.client.get(f"/trials/{trial_id}").text
    shown = " ".join(texts(trial_page, "dd"))
    assert NEW in shown and f"the verifier said {verifier}" in shown

    cleared = patch(api, trial_id, {"humanCategory": None})
    assert (cleared["failureCategory"], cleared["verifierCategory"]) == (verifier, verifier)
    assert gap(api) == before and gap(api, evaluator) == before_of_evaluator
    assert sorted(api_ids(api, f"failureCategory={verifier}")) == sorted(listed_before)
    assert api_ids(api, f"failureCategory={NEW}") == []
    rollups_match_the_trials(database, org)


def test_a_human_category_on_a_succeeded_trial_counts_and_leaves_no_zero_row(world, api, database, member):
    org = member.org.id
    succeeded = rows(database, org, "SELECT id FROM evaluation_trials WHERE failure_category IS NULL LIMIT 1")
    assert succeeded, "the world holds no trial without a category"
    trial_id = succeeded[0].id
    before = gap(api)
    patch(api, trial_id, {"humanCategory": "reward_hacking"})
    assert gap(api) == {**before, "reward_hacking": 1}
    rollups_match_the_trials(database, org)
    assert patch(api, trial_id, {"humanCategory": None})["failureCategory"] is None
    assert gap(api) == before
    left = rows(database, org, "SELECT count(*) FROM failure_category_counts WHERE failure_category = 'reward_hacking'")
    assert left[0][0] == 0
    rollups_match_the_trials(database, org)


def test_exports_carry_the_reviewers_category_and_keep_the_verifiers(world, api, database, member):
    trial_id, verifier = failed_trial(database, member.org.id)
    patch(api, trial_id, {"humanCategory": NEW, "reviewState": "reviewed"})
    lines = [json.loads(line) for line in api.get("/api/v1/rollouts?kind=failed").text.splitlines()]
    rollout_of = {
        str(r.evaluation_trial_id): str(r.id) for r in rows(database, member.org.id, "SELECT * FROM rollouts")
    }
    mine = next(line for line in lines if line["rolloutId"] == rollout_of[str(trial_id)])
    assert (mine["failureCategory"], mine["verifierCategory"], mine["humanCategory"]) == (NEW, verifier, NEW)
    assert mine["reviewState"] == "reviewed"
    others = [line for line in lines if line["rolloutId"] != mine["rolloutId"]]
    assert others and all(line["failureCategory"] == line["verifierCategory"] for line in others)
    assert all(line["humanCategory"] is None and line["reviewState"] == "unreviewed" for line in others)
    documents = [json.loads(line) for line in api.get("/api/v1/rollouts?kind=failed&format=atif").text.splitlines()]
    extra = next(d["extra"] for d in documents if d["extra"]["rolloutId"] == mine["rolloutId"])
    assert (extra["failureCategory"], extra["verifierCategory"], extra["humanCategory"]) == (NEW, verifier, NEW)


@pytest.mark.slow
def test_migration_0033_carries_human_categories_already_set(world, api, database, database_urls, member):
    """A database from before 0033, with a human category set, comes up with the reviewer's category on the trial
    and the rollups moved; going down puts the verifier's back."""
    org = member.org.id
    trial_id, verifier = failed_trial(database, org)
    before = gap(api)
    patch(api, trial_id, {"humanCategory": NEW})
    migrate(database_urls, database, "0032", downgrade=True)
    assert rows(database, org, "SELECT failure_category FROM evaluation_trials WHERE id = :id", id=trial_id)[0][0] == (
        verifier
    )
    migrate(database_urls, database, "head")
    assert gap(api) == {**before, verifier: before[verifier] - 1, NEW: 1}
    assert api.get(f"/api/v1/trials/{trial_id}").json["verifierCategory"] == verifier
    rollups_match_the_trials(database, org)
