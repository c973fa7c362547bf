"""The trial filters datasetRunId and datasetVersionId through real dataset runs (the worker ran them): the explorer
page, its count, GET /api/v1/trials and every export kind and format list exactly the trials of the dataset run's
evaluation runs (a retried task's earlier runs too) or of every dataset run of the version, compared with SQL as the
runtime role and with the same export narrowed by a filter it equals; a malformed id answers 400 naming the
parameter, another organization's ids match nothing, as every other id filter does."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from bs4 import NavigableString, Tag

from tests.conftest import ApiClient
from tests.helpers import api_ids, attr, one, parse, rows, sql_ids, table_counts, work
from tests.integration.datasets.test_dataset_runs import CRASHES, EXPERT, NOVICE, evaluator, start
from tests.integration.datasets.test_datasets_api import builtin_version, new_dataset, post_version
from tests.integration.trials.test_explorer import page_ids
from tests.worlds import shared_world

KINDS = ("all", "successful", "failed", "recovery", "preference")
FORMATS = ("atif-shaped", "atif", "trl")
KIND_CONDITIONS = {  # the rollouts each kind holds, said independently of queries.exports
    "all": "TRUE",
    "successful": "r.reward = 1",
    "failed": "r.reward < 1",
    "recovery": "r.reward > 0 AND r.reward < 1",
}


def dataset_version(api: ApiClient, name: str, body: dict) -> dict:
    made = post_version(api, new_dataset(api, name), body)
    assert made.status_code == 201, made.json
    return made.json


def runs_of(api: ApiClient, dataset_run: dict) -> set[str]:
    """The evaluation runs the dataset run's page names now (one per task: a retried task's newest)."""
    answer = api.get(f"/api/v1/dataset-runs/{dataset_run['id']}")
    assert answer.status_code == 200, answer.json
    return {task["evaluationRunId"] for task in answer.json["tasks"]}


@shared_world
def shared_datasets(request):
    """Ann's organization: dataset shop-3 (three admin-console tasks) run by a novice, an expert and an evaluator
    whose agent crashes (its three tasks retried, so each has a replaced run), dataset desk-2 (two support-desk tasks)
    run by the novice, and a run of the novice on admin-console outside any dataset; Bob's organization: a dataset
    run of its own. Every run worked by the real worker."""
    database, app = request.getfixturevalue("database"), request.getfixturevalue("app")
    make_member = request.getfixturevalue("make_member")
    api = ApiClient(app.test_client(), make_member("ann@acme.test", "Acme RL"))
    shop = builtin_version(api)
    desk = builtin_version(api, "support-desk", {"environment": "support-desk"})
    shop_3 = dataset_version(api, "shop-3", {"environmentVersionId": shop["id"], "count": 3})
    desk_2 = dataset_version(api, "desk-2", {"environmentVersionId": desk["id"], "worldSeeds": [4, 5]})
    novice, expert = evaluator(api, "novice", NOVICE, 2), evaluator(api, "expert", EXPERT, 2)
    crashes = evaluator(api, "crashes", CRASHES, 2)
    dataset_runs = {
        "novice": start(api, shop_3, novice),
        "expert": start(api, shop_3, expert),
        "crashes": start(api, shop_3, crashes),
        "desk": start(api, desk_2, novice),
    }
    plain = api.post("/api/v1/evaluation-runs", {"environmentVersionId": shop["id"], "evaluatorConfigId": novice["id"]})
    assert plain.status_code == 202, plain.json
    bob = ApiClient(app.test_client(), make_member("bob@globex.test", "Globex"))
    theirs_version = dataset_version(bob, "shop-3", {"environmentVersionId": builtin_version(bob)["id"], "count": 2})
    theirs = start(bob, theirs_version, evaluator(bob, "novice", NOVICE, 2))
    assert work(database) == 3 + 3 + 3 + 2 + 1 + 2
    replaced = runs_of(api, dataset_runs["crashes"])
    retried = api.post(f"/api/v1/dataset-runs/{dataset_runs['crashes']['id']}/retry", {})
    assert retried.status_code == 202 and retried.json["retried"] == 3, retried.json
    assert work(database) == 3
    runs = {name: runs_of(api, made) for name, made in dataset_runs.items()}
    assert runs["crashes"].isdisjoint(replaced)
    runs["crashes"] |= replaced
    runs["shop"] = runs["novice"] | runs["expert"] | runs["crashes"]
    queries = {
        "novice": f"datasetRunId={dataset_runs['novice']['id']}",
        "expert": f"datasetRunId={dataset_runs['expert']['id']}",
        "crashes": f"datasetRunId={dataset_runs['crashes']['id']}",
        "desk": f"datasetRunId={dataset_runs['desk']['id']}",
        "shop": f"datasetVersionId={shop_3['id']}",
        "desk version": f"datasetVersionId={desk_2['id']}",
    }
    runs["desk version"] = runs["desk"]
    return {
        "api": api,
        "bob": bob,
        "runs": runs,
        "replaced": replaced,
        "queries": queries,
        "plain": plain.json["id"],
        "shop": shop,
        "desk": desk,
        "evaluators": {"novice": novice, "expert": expert, "crashes": crashes},
        "dataset_runs": dataset_runs,
        "versions": {"shop": shop_3, "desk": desk_2},
        "theirs": {"datasetRunId": theirs["id"], "datasetVersionId": theirs_version["id"]},
    }


@pytest.fixture
def world(shared_datasets):
    return shared_datasets


@pytest.fixture
def api(shared_datasets):
    return shared_datasets["api"]


def trials_of(database, api: ApiClient, runs: set[str]) -> set[str]:
    return sql_ids(database, api.org.id, "t.evaluation_run_id = ANY(CAST(:runs AS uuid[]))", runs=sorted(runs))


# (the world's dataset filter, the trials it holds: tasks times attempts)
FILTERS = [("novice", 6), ("expert", 6), ("crashes", 12), ("desk", 4), ("shop", 24), ("desk version", 4)]


@pytest.mark.parametrize(("name", "size"), FILTERS)
def test_the_explorer_and_the_api_list_exactly_the_trials_of_the_dataset_runs_runs(api, world, database, name, size):
    query = world["queries"][name]
    expected = trials_of(database, api, world["runs"][name])
    assert len(expected) == size
    listed = api_ids(api, query)
    assert len(listed) == len(set(listed)) and set(listed) == expected
    page = api.get(f"/trials?{query}")
    assert page.status_code == 200 and set(page_ids(page.text)) == expected
    count = api.get(f"/trials/count?{query}", headers={"HX-Request": "true"})
    assert one(count.text, "#trial-count").get_text() == f"{size} trials match"


def test_a_retried_dataset_run_keeps_the_trials_of_the_runs_its_retry_replaced(api, world, database):
    replaced, runs = world["replaced"], world["runs"]["crashes"]
    assert len(trials_of(database, api, replaced)) == 6 and replaced < runs
    for name in ("crashes", "shop"):
        listed = api.get(f"/api/v1/trials?{world['queries'][name]}").json
        assert listed["next"] is None
        assert {t["evaluationRunId"] for t in listed["trials"]} == world["runs"][name]
        assert replaced <= {t["evaluationRunId"] for t in listed["trials"]}


def test_the_dataset_filters_combine_with_the_other_filters(api, world, database):
    queries, runs, evaluators = world["queries"], world["runs"], world["evaluators"]
    novice = evaluators["novice"]["id"]
    # the novice's trials of shop-3, not those of its run outside the dataset nor of desk-2
    assert set(api_ids(api, f"{queries['shop']}&evaluatorConfigId={novice}")) == trials_of(
        database, api, runs["novice"]
    )
    assert trials_of(database, api, {world["plain"]}) and not trials_of(database, api, {world["plain"]}) & set(
        api_ids(api, queries["shop"])
    )
    failed = sql_ids(
        database,
        api.org.id,
        "t.evaluation_run_id = ANY(CAST(:runs AS uuid[])) AND t.reward < 1",
        runs=sorted(runs["shop"]),
    )
    assert set(api_ids(api, f"{queries['shop']}&rewardBand=failed")) == failed
    assert api_ids(api, f"{queries['novice']}&{queries['desk version']}") == []
    assert set(api_ids(api, f"{queries['desk']}&environmentVersionId={world['desk']['id']}")) == trials_of(
        database, api, runs["desk"]
    )


def export(api: ApiClient, query: str, kind: str, export_format: str) -> Any:
    answer = api.get(f"/api/v1/rollouts?kind={kind}&format={export_format}&{query}")
    assert answer.status_code == 200, answer.data[:300]
    return answer


@pytest.mark.parametrize("export_format", FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_export_kind_and_format_holds_exactly_the_dataset_filters_rollouts(
    api, world, database, kind, export_format
):
    queries, evaluators = world["queries"], world["evaluators"]
    # Where a dataset filter selects what an existing filter does (the expert and the crashing evaluator ran nothing
    # else, desk-2 is the only use of its version), the two exports are the same bytes, pairs included.
    same = [
        ("expert", f"evaluatorConfigId={evaluators['expert']['id']}"),
        ("crashes", f"evaluatorConfigId={evaluators['crashes']['id']}"),
        ("desk", f"environmentVersionId={world['desk']['id']}"),
        ("desk version", f"environmentVersionId={world['desk']['id']}"),
    ]
    for name, query in same:
        filtered, equal = export(api, queries[name], kind, export_format), export(api, query, kind, export_format)
        assert filtered.data == equal.data, (name, kind, export_format)
        assert filtered.headers.get("X-Next-Cursor") == equal.headers.get("X-Next-Cursor")
    # shop-3 and the novice's dataset run share their version and evaluator with the run outside any dataset: their
    # lines are the rollouts of their runs, read here in SQL.
    everything = export(api, "", kind, export_format).text
    for name in ("novice", "shop"):
        answer = export(api, queries[name], kind, export_format)
        body = answer.text
        if kind == "preference":
            expected_pairs = preference_pairs(database, api, world["runs"][name], within_task=export_format == "trl")
            if export_format == "trl":  # a TRL pair names no rollout: one line per pair
                assert len(body.splitlines()) == len(expected_pairs), name
            else:
                assert pairs_of(body) == expected_pairs, name
            continue
        expected = rollouts(database, api, world["runs"][name], kind)
        if export_format == "trl":  # a row needs a turn of the agent's own; the others are counted in a header
            acted = rollouts(database, api, world["runs"][name], kind, acted=True)
            assert len(body.splitlines()) == len(acted)
            assert answer.headers["X-Rows-Without-Agent-Turn"] == str(len(expected) - len(acted))
            assert set(body.splitlines()) <= set(everything.splitlines())
            continue
        assert sorted(line_ids(body, export_format)) == sorted(expected), name
    shop = export(api, queries["shop"], kind, export_format).text.splitlines()
    if kind in ("all", "failed", "preference"):  # shop-3's 24 trials hold failures and rewards that differ
        assert shop, (kind, export_format)
    if kind == "all":  # the rollouts of the run outside the datasets are in no dataset's export
        assert len(shop) < len(everything.splitlines())


def line_ids(body: str, export_format: str) -> list[str]:
    """The rollout id of each line (atif-shaped: `rolloutId`; an ATIF document: under `extra`)."""
    lines = [json.loads(line) for line in body.splitlines()]
    return [line["rolloutId"] if export_format == "atif-shaped" else line["extra"]["rolloutId"] for line in lines]


def rollouts(database, api: ApiClient, runs: set[str], kind: str, *, acted: bool = False) -> list[str]:
    """The rollouts of `kind` of these runs (`acted`: those whose trial holds a step of the agent's own)."""
    found = rows(
        database,
        api.org.id,
        f"SELECT r.id::text FROM rollouts r JOIN evaluation_trials t ON t.organization_id = r.organization_id "
        f"AND t.id = r.evaluation_trial_id WHERE r.evaluation_run_id = ANY(CAST(:runs AS uuid[])) "
        f"AND {KIND_CONDITIONS[kind]}{' AND trial_agent_steps(t.steps) > 0' if acted else ''}",
        runs=sorted(runs),
    )
    return [row[0] for row in found]


def preference_pairs(database, api: ApiClient, runs: set[str], *, within_task: bool) -> list[tuple[str, str, str]]:
    """(version, preferred, rejected) of these runs' scored rollouts as docs/exports.md says: per environment version
    (per version and task text for TRL, among trials where the agent acted), the latest of the highest-scored
    against the earliest of the lowest-scored, where the rewards differ; by version (then preferred) order."""
    scored = rows(
        database,
        api.org.id,
        "SELECT r.id::text, r.environment_version_id::text, t.task, r.reward, r.seq, trial_agent_steps(t.steps) "
        "FROM rollouts r JOIN evaluation_trials t ON t.organization_id = r.organization_id "
        "AND t.id = r.evaluation_trial_id WHERE r.evaluation_run_id = ANY(CAST(:runs AS uuid[])) "
        "AND r.reward IS NOT NULL",
        runs=sorted(runs),
    )
    groups: dict[tuple[str, str | None], list[Any]] = {}
    for row in scored:
        if not within_task:
            groups.setdefault((row[1], None), []).append(row)
        elif row[5] > 0:
            groups.setdefault((row[1], row[2]), []).append(row)
    pairs = []
    for (version, _), group in groups.items():
        best, worst = max(group, key=lambda r: (r[3], r[4])), min(group, key=lambda r: (r[3], r[4]))
        if best[3] > worst[3]:
            pairs.append((version, best[4], best[0], worst[0]))
    return [(version, preferred, rejected) for version, _, preferred, rejected in sorted(pairs)]


def pairs_of(body: str) -> list[tuple[str, str, str]]:
    """(version, preferred, rejected) of each preference line, in order."""
    lines = [json.loads(line) for line in body.splitlines()]
    return [(p["environmentVersionId"], p["preferred"]["rolloutId"], p["rejected"]["rolloutId"]) for p in lines]


def chips(body: str) -> dict[str, str]:
    """Each active filter's chip: its label and the link that drops it."""
    found = {}
    for chip in parse(body).select("li.chip"):
        name, link = chip.contents[0], chip.contents[0].next_sibling
        if isinstance(name, NavigableString) and isinstance(link, Tag) and link.name == "a":
            found[name.strip()] = attr(link, "href")
    return found


def test_the_explorer_offers_both_filters_under_more_filters_and_names_them_in_chips(api, world):
    form = one(api.get("/trials").text, "form#trial-filters")
    more = one(form, "details.more-filters")
    assert "open" not in more.attrs
    assert attr(one(more, 'input[name="datasetRunId"]'), "placeholder") == "dataset run UUID"
    versions = one(more, 'select[name="datasetVersionId"]')
    offered = {
        attr(group, "label"): [(attr(o, "value"), o.get_text()) for o in group.select("option")]
        for group in versions.select("optgroup")
    }
    shop, desk = world["versions"]["shop"], world["versions"]["desk"]
    assert offered == {"desk-2": [(desk["id"], "desk-2 v1")], "shop-3": [(shop["id"], "shop-3 v1")]}  # not Bob's

    dataset_run = world["dataset_runs"]["novice"]["id"]
    body = api.get(f"/trials?datasetVersionId={shop['id']}&datasetRunId={dataset_run}&sort=newest").text
    form = one(body, "form#trial-filters")
    assert attr(one(form, 'input[name="datasetRunId"]'), "value") == dataset_run
    assert [attr(o, "value") for o in form.select('select[name="datasetVersionId"] option[selected]')] == [shop["id"]]
    more = one(form, "details.more-filters")
    assert attr(more, "open") == "" and "(2 set)" in one(more, "summary").get_text()
    assert chips(body) == {
        f"dataset run {dataset_run[-6:]}": f"/trials?datasetVersionId={shop['id']}&sort=newest",
        "dataset version: shop-3 v1": f"/trials?datasetRunId={dataset_run}&sort=newest",
    }


def test_the_explorers_export_links_carry_the_dataset_filters(api, world):
    query = world["queries"]["shop"]
    links = [attr(a, "href") for a in parse(api.get(f"/trials?{query}").text).select("details.export a[href]")]
    exports = [link for link in links if "/api/v1/rollouts?" in link]
    assert exports and all(query in link for link in exports)
    for link in exports:
        path = link[link.index("/api/v1/") :]
        kind = path.split("kind=")[1].split("&")[0]
        export_format = path.split("format=")[1].split("&")[0] if "format=" in path else "atif-shaped"
        assert api.get(path).data == export(api, query, kind, export_format).data


BAD_IDS = ["nope", "12", "x" * 40, f"urn:uuid:{uuid.UUID(int=1)}", f"{{{uuid.UUID(int=1)}}}"]


@pytest.mark.bad_input
@pytest.mark.parametrize("value", BAD_IDS)
@pytest.mark.parametrize("name", ["datasetRunId", "datasetVersionId"])
def test_a_malformed_dataset_id_answers_400_naming_the_parameter(api, world, count_rows, name, value):
    before = table_counts(count_rows, api.org)
    for path in ("/trials", "/trials/count"):
        page = api.get(path, query_string={name: value})
        assert page.status_code == 400 and name in page.text, path
    for path in ("/api/v1/trials", "/api/v1/rollouts"):
        answer = api.get(path, query_string={name: value, "kind": "failed"} if "rollouts" in path else {name: value})
        assert answer.status_code == 400, path
        assert answer.json["error"] == f"invalid {name}" and name in answer.json["detail"], answer.json
    assert table_counts(count_rows, api.org) == before


@pytest.mark.leak
def test_another_organizations_dataset_ids_match_nothing_either_way(api, world, database):
    bob, theirs = world["bob"], world["theirs"]
    assert set(api_ids(bob, f"datasetRunId={theirs['datasetRunId']}")) == sql_ids(database, bob.org.id, "TRUE")
    mine = {
        "datasetRunId": world["dataset_runs"]["novice"]["id"],
        "datasetVersionId": world["versions"]["shop"]["id"],
    }
    for client, ids in ((api, theirs), (bob, mine)):
        for name, value in ids.items():
            query = f"{name}={value}"
            assert api_ids(client, query) == []
            assert "No trials match these filters" in client.get(f"/trials?{query}").text
            count = client.get(f"/trials/count?{query}", headers={"HX-Request": "true"})
            assert one(count.text, "#trial-count").get_text() == "0 trials match"
            for kind in KINDS:
                for export_format in FORMATS:
                    assert export(client, query, kind, export_format).data == b"", (query, kind, export_format)
