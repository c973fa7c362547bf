"""Triage reaches the reads: the label, reviewState and humanCategory filters list exactly the trials SQL selects,
training exports leave out excluded trials unless includeExcluded=true (counted against SQL), and every export line,
ATIF document and single rollout carries the labels, review state, human category and notes."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import api_ids, sql_ids
from tests.worlds import shared_world

NOVICE = {"kind": "scripted", "skill": 0.3}


@shared_world
def shared_triaged(request):
    """Two runs of eight trials; two labelled flaky (one also wrong-customer), one excluded with a reason, one
    reviewed, one with a human category, one with a note on step 1."""
    database = request.getfixturevalue("database")
    member = request.getfixturevalue("make_member")("ann@acme.test", "Acme RL", "member")
    api = ApiClient(request.getfixturevalue("app").test_client(), member)
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=8), 2)
    with database.session(member.org.id) as session:
        ids = [str(i) for i in session.execute(text("SELECT id FROM evaluation_trials ORDER BY id")).scalars()]
    headers = {"X-CSRFToken": api.token}
    for name in ("flaky", "wrong-customer"):
        assert api.post("/api/v1/labels", {"name": name}).status_code == 201
    assert (
        api.client.put(f"/api/v1/trials/{ids[0]}/labels", json={"labels": ["flaky"]}, headers=headers).status_code
        == 200
    )
    both = {"labels": ["flaky", "wrong-customer"]}
    assert api.client.put(f"/api/v1/trials/{ids[1]}/labels", json=both, headers=headers).status_code == 200
    excluded = {"reviewState": "excluded", "reason": "the verifier crashed"}
    assert api.client.patch(f"/api/v1/trials/{ids[2]}", json=excluded, headers=headers).status_code == 200
    assert (
        api.client.patch(f"/api/v1/trials/{ids[3]}", json={"reviewState": "reviewed"}, headers=headers).status_code
        == 200
    )
    human = {"humanCategory": "wrong_customer"}
    assert api.client.patch(f"/api/v1/trials/{ids[4]}", json=human, headers=headers).status_code == 200
    assert api.post(f"/api/v1/trials/{ids[1]}/notes", {"body": "ordered for Bo", "step": 1}).status_code == 201
    return {"member": member, "api": api, "ids": ids}


@pytest.fixture
def world(shared_triaged):
    return shared_triaged


LABELLED = "EXISTS (SELECT 1 FROM trial_labels tl JOIN labels l ON l.organization_id = tl.organization_id "
LABELLED += "AND l.id = tl.label_id WHERE tl.evaluation_trial_id = t.id AND l.name = '{}')"
REVIEW = "EXISTS (SELECT 1 FROM trial_reviews r WHERE r.evaluation_trial_id = t.id AND {})"


@pytest.mark.parametrize(
    ("query", "where"),
    [
        ("label=flaky", LABELLED.format("flaky")),
        ("label=FLAKY", LABELLED.format("flaky")),
        ("label=flaky,wrong-customer", LABELLED.format("flaky") + " AND " + LABELLED.format("wrong-customer")),
        ("label=nobody-uses-this", "FALSE"),
        ("reviewState=excluded", REVIEW.format("r.review_state = 'excluded'")),
        ("reviewState=reviewed", REVIEW.format("r.review_state = 'reviewed'")),
        ("reviewState=unreviewed", "NOT " + REVIEW.format("r.review_state <> 'unreviewed'")),
        ("humanCategory=wrong_customer", REVIEW.format("r.human_category = 'wrong_customer'")),
        ("label=flaky&status=failed", LABELLED.format("flaky") + " AND t.status = 'failed'"),
    ],
)
def test_triage_filters_list_exactly_the_trials_sql_selects(world, database, query, where):
    expected = sql_ids(database, world["member"].org.id, where)
    assert sorted(api_ids(world["api"], query)) == sorted(expected)
    if "nobody" not in query:
        assert expected, f"the world holds no trial for {query}"


def export(api, query: str) -> list[dict]:
    response = api.get(f"/api/v1/rollouts?{query}")
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def rollout_trials(database, org_id, where: str) -> set[str]:
    with database.session(org_id) as session:
        sql = f"SELECT r.evaluation_trial_id FROM rollouts r WHERE {where}"
        return {str(i) for i in session.execute(text(sql)).scalars()}


NOT_EXCLUDED = "NOT EXISTS (SELECT 1 FROM trial_reviews x WHERE x.evaluation_trial_id = r.evaluation_trial_id "
NOT_EXCLUDED += "AND x.review_state = 'excluded')"
KINDS = {
    "all": "TRUE",
    "failed": "r.reward < 1",
    "successful": "r.reward = 1",
    "recovery": "r.reward > 0 AND r.reward < 1",
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_exports_leave_out_excluded_trials_unless_asked(world, database, kind):
    org, api = world["member"].org.id, world["api"]
    trial_of = {str(i): str(t) for i, t in _rollout_trial_pairs(database, org)}
    default = {trial_of[line["rolloutId"]] for line in export(api, f"kind={kind}")}
    everything = {trial_of[line["rolloutId"]] for line in export(api, f"kind={kind}&includeExcluded=true")}
    assert default == rollout_trials(database, org, f"{KINDS[kind]} AND {NOT_EXCLUDED}")
    assert everything == rollout_trials(database, org, KINDS[kind])
    excluded = world["ids"][2]
    assert excluded not in default and (excluded in everything) == (
        excluded in rollout_trials(database, org, KINDS[kind])
    )


def _rollout_trial_pairs(database, org_id):
    with database.session(org_id) as session:
        return session.execute(text("SELECT id, evaluation_trial_id FROM rollouts")).all()


def test_preference_pairs_leave_out_excluded_trials(world, database):
    org, api = world["member"].org.id, world["api"]
    trial_of = {str(i): str(t) for i, t in _rollout_trial_pairs(database, org)}
    sides = {
        trial_of[line[side]["rolloutId"]]
        for line in export(api, "kind=preference")
        for side in ("preferred", "rejected")
    }
    assert world["ids"][2] not in sides


def test_lines_documents_and_the_single_rollout_carry_the_triage(world, database):
    api, ids = world["api"], world["ids"]
    org = world["member"].org.id
    by_trial = {str(t): str(i) for i, t in _rollout_trial_pairs(database, org)}
    lines = {line["rolloutId"]: line for line in export(api, "kind=all&includeExcluded=true")}
    noted = lines[by_trial[ids[1]]]
    assert noted["labels"] == ["flaky", "wrong-customer"] and noted["notes"] == [{"step": 1, "body": "ordered for Bo"}]
    assert lines[by_trial[ids[2]]]["reviewState"] == "excluded" and lines[by_trial[ids[3]]]["reviewState"] == "reviewed"
    human = lines[by_trial[ids[4]]]
    assert human["failureCategory"] == "wrong_customer" and human["humanCategory"] == "wrong_customer"
    assert human["verifierCategory"] != "wrong_customer"
    plain = lines[by_trial[ids[5]]]
    assert plain["labels"] == [] and plain["notes"] == [] and plain["reviewState"] == "unreviewed"
    assert plain["humanCategory"] is None and plain["failureCategory"] == plain["verifierCategory"]
    documents = {d["extra"]["rolloutId"]: d for d in export(api, "kind=all&format=atif&includeExcluded=true")}
    extra = documents[by_trial[ids[1]]]["extra"]
    assert extra["labels"] == ["flaky", "wrong-customer"] and extra["notes"][0]["body"] == "ordered for Bo"
    single = api.get(f"/api/v1/rollouts/{by_trial[ids[4]]}").json
    assert single["failureCategory"] == "wrong_customer" and single["reviewState"] == "unreviewed"


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("includeExcluded=yes", "includeExcluded"),
        ("includeExcluded=1", "includeExcluded"),
        ("reviewState=ignored", "reviewState"),
        ("label=a%09b", "label"),
        ("label=" + "x" * 65, "label"),
        ("humanCategory=has%20space", "humanCategory"),
    ],
)
def test_bad_triage_parameters_answer_400_naming_them(world, query, field):
    response = world["api"].get(f"/api/v1/rollouts?kind=all&{query}")
    assert response.status_code == 400 and response.json["error"] == f"invalid {field}", response.json
    if field != "includeExcluded":
        listed = world["api"].get(f"/api/v1/trials?{query}")
        assert listed.status_code == 400 and listed.json["error"] == f"invalid {field}"
