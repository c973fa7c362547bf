"""Compare by task, through the real worker: two dataset runs of one dataset version are paired on every task they
both finished (the paired p is scipy's ttest_rel over task means computed here from the trials), a task one side has
not finished is listed as such, a dataset run against a plain run or a version shares no task and its verdict says
it is unpaired, over different draws, dataset runs of two datasets get no verdict, and the picker lists dataset runs.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from scipy import stats

from tests.conftest import ApiClient
from tests.helpers import one, parse, rows, work
from tests.integration.datasets.test_dataset_runs import EXPERT, NOVICE, evaluator, start
from tests.integration.datasets.test_datasets_api import builtin_version, new_dataset, post_version
from worker.loop import Worker, WorkerSettings

DIFFERENT_DRAWS = "Unpaired, over different draws"


def dataset_version(api: ApiClient, count: int = 6, name: str = "shop-50") -> tuple[dict, str]:
    """A dataset of one built-in version's seeds 1..count: (its version, the environment version id)."""
    environment_version = builtin_version(api)["id"]
    made = post_version(api, new_dataset(api, name), {"environmentVersionId": environment_version, "count": count})
    assert made.status_code == 201, made.json
    return made.json, environment_version


def compare(api: ApiClient, a: str, b: str) -> dict:
    answer = api.get(f"/api/v1/compare?a={a}&b={b}")
    assert answer.status_code == 200, answer.json
    return answer.json


def page(api: ApiClient, a: str, b: str):
    answer = api.get(f"/compare?a={a}&b={b}")
    assert answer.status_code == 200
    return parse(answer.get_data(as_text=True))


def task_means(database, org, dataset_run_id: str) -> dict[int, tuple[str, float, float]]:
    """Each task position's (task text, share of trials with reward 1, mean reward), from evaluation_trials."""
    found: dict[int, list[tuple[str, float]]] = {}
    for position, task, reward in rows(
        database,
        org,
        "SELECT r.dataset_position, t.task, t.reward FROM evaluation_trials t JOIN evaluation_runs r "
        "ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id WHERE r.dataset_run_id = :id",
        id=dataset_run_id,
    ):
        found.setdefault(position, []).append((task, reward))
    return {
        position: (trials[0][0], float(np.mean([r == 1 for _, r in trials])), float(np.mean([r for _, r in trials])))
        for position, trials in found.items()
    }


def work_some(database, runs: int) -> None:
    """The worker claims and runs `runs` runs (the oldest queued first), then stops."""
    worker = Worker(database, WorkerSettings(), threading.Event(), "test-worker:0")
    for _ in range(runs):
        claimed = worker.claim()
        assert claimed is not None
        worker.process(*claimed)


def test_two_dataset_runs_of_one_version_are_paired_on_every_task_with_ttest_rel(api, database):
    version, environment_version = dataset_version(api)
    novice, expert = evaluator(api, "novice", NOVICE), evaluator(api, "expert", EXPERT)
    first, second = start(api, version, novice), start(api, version, expert)
    work(database)

    body = compare(api, first["id"], second["id"])
    assert (body["a"]["kind"], body["b"]["kind"]) == ("dataset_run", "dataset_run")
    assert body["a"]["label"] == "novice on shop-50 v1" and body["a"]["datasetVersionId"] == version["id"]
    tests = body["tests"]
    assert (tests["paired"], tests["pairedTasks"], tests["sharedTasks"], tests["noVerdict"]) == (True, 6, 6, None)
    a, b = task_means(database, api.org.id, first["id"]), task_means(database, api.org.id, second["id"])
    assert sorted(a) == sorted(b) == [1, 2, 3, 4, 5, 6]
    assert [a[p][0] for p in a] == [b[p][0] for p in a]  # the same task texts on both sides
    for index, name in ((1, "passAt1"), (2, "meanReward")):
        xa = np.asarray([a[p][index] for p in sorted(a)])
        xb = np.asarray([b[p][index] for p in sorted(a)])
        assert tests[name]["difference"] == pytest.approx(float(np.mean(xb - xa)))
        if np.std(xb - xa) > 0 or name == "meanReward":  # partial rewards always spread
            expected = stats.ttest_rel(xb, xa).pvalue
            assert tests[name]["method"] == "paired t-test over task means"
        else:  # every task moved by the same amount: the exact sign test the domain falls back on
            expected = stats.binomtest(6, 6, 0.5).pvalue
        assert tests[name]["pValue"] == pytest.approx(float(expected), rel=1e-9), (name, xa, xb)
        assert "across 6 tasks both sides hold" in tests[name]["verdict"]
        assert DIFFERENT_DRAWS not in tests[name]["verdict"]
    # the per-task table in the version's order, each task's text, both sides finished
    assert [t["text"] for t in body["tasks"]] == [a[p][0][:120] for p in sorted(a)]
    assert [t["task"] for t in body["tasks"]] == [f"{environment_version}:{p}" for p in sorted(a)]
    assert {(t["a"]["finished"], t["b"]["finished"], t["a"]["trials"]) for t in body["tasks"]} == {(True, True, 3)}
    # stage rates and categories of a dataset-run side are its rollup's: the trials' own counts
    for side, dataset_run in (("a", first), ("b", second)):
        counted = dict(
            rows(
                database,
                api.org.id,
                "SELECT t.failure_category, count(*) FROM evaluation_trials t JOIN evaluation_runs r "
                "ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id "
                "WHERE r.dataset_run_id = :id AND t.failure_category IS NOT NULL GROUP BY 1",
                id=dataset_run["id"],
            )
        )
        assert {c: v["trials"] for c, v in body[side]["failureCategories"].items()} == counted
        stages = {
            key: (n, passed)
            for key, n, passed in rows(
                database,
                api.org.id,
                "SELECT m.key, count(*), count(*) FILTER (WHERE m.value::float8 = 1) FROM evaluation_trials t "
                "JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id "
                "CROSS JOIN jsonb_each_text(t.metrics) m WHERE r.dataset_run_id = :id AND m.key LIKE 'stage%' "
                "GROUP BY 1",
                id=dataset_run["id"],
            )
        }
        assert {k: (v["trials"], v["passed"]) for k, v in body[side]["stages"].items()} == stages and stages
        assert body[side]["trials"] == 18 and body[side]["tasks"] == 6
    assert "evaluator-mix" not in [w["code"] for w in body["warnings"]]

    html = page(api, first["id"], second["id"])
    assert "Both sides hold 6 of the same tasks (by environment version and world seed" in one(html, "#pairing").text
    assert one(html, "#verdict-pass-at-1").text.strip().endswith(tests["passAt1"]["verdict"])
    assert "Task mean reward histogram, A" in html.text


def test_a_task_one_side_has_not_finished_is_listed_as_such_and_left_unpaired(api, database):
    version, _ = dataset_version(api)
    novice, expert = evaluator(api, "novice", NOVICE), evaluator(api, "expert", EXPERT)
    first = start(api, version, novice)
    work(database)
    second = start(api, version, expert)
    work_some(database, 4)  # the first four tasks of the expert's dataset run

    body = compare(api, first["id"], second["id"])
    assert (body["tests"]["pairedTasks"], body["b"]["tasks"], body["b"]["unfinishedTasks"]) == (4, 4, 2)
    assert body["b"]["trials"] == 12
    late = [t for t in body["tasks"] if not t["b"]["finished"]]
    assert [t["task"].rsplit(":", 1)[1] for t in late] == ["5", "6"]
    assert {(t["b"]["status"], t["b"]["trials"], t["a"]["finished"]) for t in late} == {("queued", 0, True)}
    html = page(api, first["id"], second["id"])
    unfinished = html.select("table.compare-tasks tr.task-unfinished")
    assert len(unfinished) == 2 and all("not finished (queued)" in row.text for row in unfinished)
    assert "2 tasks not finished" in one(html, "dl.sides").text


def test_a_dataset_run_against_a_plain_run_or_a_version_is_unpaired_over_different_draws(api, database):
    version, environment_version = dataset_version(api, count=4)
    novice, expert = evaluator(api, "novice", NOVICE), evaluator(api, "expert", EXPERT)
    dataset_run = start(api, version, novice)
    plain = []
    for _ in range(2):
        queued = api.post(
            "/api/v1/evaluation-runs", {"environmentVersionId": environment_version, "evaluatorConfigId": expert["id"]}
        )
        assert queued.status_code == 202, queued.json
        plain.append(queued.json)
    work(database)

    for other in (plain[0]["id"], environment_version):
        body = compare(api, dataset_run["id"], other)
        assert (body["tests"]["sharedTasks"], body["tests"]["pairedTasks"], body["tests"]["paired"]) == (0, 0, False)
        for name in ("passAt1", "meanReward"):
            assert DIFFERENT_DRAWS in body["tests"][name]["verdict"], body["tests"][name]["verdict"]
        html = page(api, dataset_run["id"], other)
        assert DIFFERENT_DRAWS in one(html, "#verdict-pass-at-1").text
        assert "The sides share no task" in one(html, "#pairing").text
    # two plain runs of a built-in version draw their worlds at random: no task in common, and the verdict says so
    body = compare(api, plain[0]["id"], plain[1]["id"])
    assert body["tests"]["sharedTasks"] == 0 and DIFFERENT_DRAWS in body["tests"]["passAt1"]["verdict"]


def test_dataset_runs_of_two_datasets_get_no_verdict_and_the_page_says_why(api, database):
    version, environment_version = dataset_version(api, count=3)
    other = new_dataset(api, "shop-3")
    same_tasks = {"environmentVersionId": environment_version, "count": 3}  # the same tasks, another dataset
    made = post_version(api, other, same_tasks)
    assert made.status_code == 201, made.json
    novice, expert = evaluator(api, "novice", NOVICE), evaluator(api, "expert", EXPERT)
    first, second = start(api, version, novice), start(api, made.json, expert)
    work(database)

    body = compare(api, first["id"], second["id"])
    reason = body["tests"]["noVerdict"]
    assert reason.startswith("No verdict: A ran the dataset shop-50 and B the dataset shop-3.")
    for name in ("passAt1", "meanReward"):
        test = body["tests"][name]
        assert (test["verdict"], test["difference"], test["pValue"], test["ci95"]) == (reason, None, None, None)
    assert body["tests"]["byEvaluator"] == []
    html = page(api, first["id"], second["id"])
    verdict = one(html, "section.verdict").text
    assert "No verdict: A ran the dataset shop-50" in verdict
    assert "higher by" not in verdict and "No detectable difference" not in verdict


def test_the_picker_lists_dataset_runs_and_another_organizations_dataset_run_is_not_found(
    api, app, make_member, database
):
    version, _ = dataset_version(api, count=2)
    novice = evaluator(api, "novice", NOVICE)
    mine = start(api, version, novice)
    work(database)
    picker = parse(api.get("/compare").get_data(as_text=True))
    options = picker.select('#pick-a optgroup[label="Dataset runs (newest first)"] option')
    assert [o["value"] for o in options] == [mine["id"]]
    assert options[0].text.startswith("novice on shop-50 v1 · ")

    bob = ApiClient(app.test_client(), make_member("bob@b.test", "Org B"))
    theirs, _ = dataset_version(bob, count=2)
    bobs = start(bob, theirs, evaluator(bob, "theirs", NOVICE))
    answer = api.get(f"/api/v1/compare?a={mine['id']}&b={bobs['id']}")
    assert answer.status_code == 404
    assert (
        answer.json["detail"]
        == f"no run, environment version, dataset run or evaluator configuration {bobs['id']} for b"
    )
    assert api.get(f"/compare?a={mine['id']}&b={bobs['id']}").status_code == 404
    assert bob.get(f"/api/v1/compare?a={bobs['id']}&b={mine['id']}").status_code == 404
    narrowed = api.get(f"/api/v1/compare?a={mine['id']}&b={mine['id']}&aEvaluatorConfigId={novice['id']}")
    assert narrowed.status_code == 400 and "not a dataset run" in narrowed.json["detail"]
