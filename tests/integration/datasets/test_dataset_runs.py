"""Dataset runs through the real worker: one evaluation run per task with the task's world seed, so two evaluators
meet the same six tasks (and a second dataset run draws them again); the API's progress, passAtK and mean reward
equal the task-clustered figures computed here from the trials themselves; retrying the tasks that ended in
infrastructure errors queues only those, never a scored failure; refusals and another organization's ids."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import ApiClient
from tests.helpers import rows, table_counts, work
from tests.integration.datasets.test_datasets_api import builtin_version, new_dataset, post_version

NOVICE = {"kind": "scripted", "skill": 0.2}
EXPERT = {"kind": "scripted", "skill": 0.9}
CRASHES = {"kind": "command", "argv": ["python3", "-c", "import sys; sys.exit(3)"]}


def evaluator(api: ApiClient, name: str, agent: dict, attempts: int = 3) -> dict:
    made = api.post("/api/v1/evaluator-configs", {"name": name, "agent": agent, "attemptCount": attempts})
    assert made.status_code == 201, made.json
    return made.json


def dataset_version(api: ApiClient, count: int = 6) -> dict:
    version = builtin_version(api)
    dataset = new_dataset(api)
    made = post_version(api, dataset, {"environmentVersionId": version["id"], "count": count})
    assert made.status_code == 201, made.json
    return made.json


def start(api: ApiClient, version: dict, config: dict, **extra) -> dict:
    answer = api.post(
        "/api/v1/dataset-runs", {"datasetVersionId": version["id"], "evaluatorConfigId": config["id"], **extra}
    )
    assert answer.status_code == 202, answer.json
    assert answer.headers["Location"] == f"/api/v1/dataset-runs/{answer.json['id']}"
    return answer.json


def trials_by_task(database, org, dataset_run_id: str) -> dict[int, list[tuple[str, float | None]]]:
    """Each task position's trials (task text, reward), read from evaluation_trials itself."""
    found: dict[int, list[tuple[str, float | None]]] = {}
    for position, task, reward in rows(
        database,
        org,
        "SELECT r.dataset_position, t.task, t.reward FROM evaluation_trials t JOIN evaluation_runs r "
        "ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id WHERE r.dataset_run_id = :id",
        id=dataset_run_id,
    ):
        found.setdefault(position, []).append((task, reward))
    return found


def clustered_pass_at_1(per_task: dict[int, list[tuple[str, float | None]]]) -> tuple[float, float]:
    values = [np.asarray([float(r == 1) for _, r in trials]) for trials in per_task.values()]
    every = np.concatenate(values)
    mean = every.mean()
    return float(mean), float(np.sqrt(sum(np.sum(v - mean) ** 2 for v in values)) / every.size)


def test_two_evaluators_meet_the_same_six_tasks_and_the_figures_are_the_trials(api, database):
    version = dataset_version(api)
    novice, expert = evaluator(api, "novice", NOVICE), evaluator(api, "expert", EXPERT)
    first = start(api, version, novice)
    assert (first["status"], first["progress"]["tasksDone"], first["progress"]["trialsTotal"]) == ("queued", 0, 18)
    assert [t["worldSeed"] for t in first["tasks"]] == [1, 2, 3, 4, 5, 6]
    assert {t["status"] for t in first["tasks"]} == {"queued"} and first["passAtK"]["1"]["value"] is None
    second = start(api, version, expert)
    assert work(database) == 12  # every task of both dataset runs is a run the worker claimed

    done = {d["id"]: api.get(f"/api/v1/dataset-runs/{d['id']}").json for d in (first, second)}
    texts = {}
    for dataset_run_id, answer in done.items():
        assert answer["status"] == "completed", answer
        assert answer["progress"] == {
            "tasksDone": 6,
            "tasksTotal": 6,
            "trialsDone": 18,
            "trialsTotal": 18,
            "tasksWithErrors": 0,
            "etaSeconds": None,
        }
        per_task = trials_by_task(database, api.org.id, dataset_run_id)
        # every attempt of a task saw the same task text, the one the API names
        for task in answer["tasks"]:
            seen = {text for text, _ in per_task[task["position"]]}
            assert seen == {task["task"]} and task["trials"] == 3, (task, seen)
            rewards = [r for _, r in per_task[task["position"]] if r is not None]
            assert len(rewards) == 3 and task["successes"] == sum(r == 1 for r in rewards)
            assert task["meanReward"] == pytest.approx(np.mean(rewards))
        texts[dataset_run_id] = [t["task"] for t in answer["tasks"]]
        value, stderr = clustered_pass_at_1(per_task)
        assert answer["passAtK"]["1"]["value"] == pytest.approx(value)
        assert answer["passAtK"]["1"]["stderr"] == pytest.approx(stderr)
        assert answer["passAtK"]["1"]["tasks"] == 6 and answer["passAtK"]["1"]["trials"] == 18
        assert set(answer["passAtK"]) == {"1", "2", "3"}
        every = [r for trials in per_task.values() for _, r in trials if r is not None]
        assert answer["meanReward"]["value"] == pytest.approx(np.mean(every))
    assert texts[first["id"]] == texts[second["id"]] and len(set(texts[first["id"]])) == 6
    # the capability gap and partial rewards of a dataset run are its trials' categories and stages
    seen_categories: set[str] = set()
    for dataset_run_id, answer in done.items():
        categories = dict(
            rows(
                database,
                api.org.id,
                "SELECT t.failure_category, count(*) FROM evaluation_trials t JOIN evaluation_runs r "
                "ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id "
                "WHERE r.dataset_run_id = :id AND t.failure_category IS NOT NULL GROUP BY 1",
                id=dataset_run_id,
            )
        )
        assert answer["failureCategories"] == categories, answer["failureCategories"]
        seen_categories.update(categories)
        stages = {
            key: {"trials": n, "passed": passed}
            for key, n, passed in rows(
                database,
                api.org.id,
                "SELECT m.key, count(*), count(*) FILTER (WHERE m.value::float8 = 1) FROM evaluation_trials t "
                "JOIN evaluation_runs r ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id "
                "CROSS JOIN jsonb_each_text(t.metrics) m WHERE r.dataset_run_id = :id AND m.key LIKE 'stage%' "
                "GROUP BY 1",
                id=dataset_run_id,
            )
        }
        assert {k: {"trials": v["trials"], "passed": v["passed"]} for k, v in answer["stages"].items()} == stages
        assert len(stages) >= 2
    assert seen_categories  # the novice (skill 0.2) fails some of its 18 trials

    again = start(api, version, novice)  # a second dataset run of one evaluator draws the same tasks
    work(database)
    answer = api.get(f"/api/v1/dataset-runs/{again['id']}").json
    assert [t["task"] for t in answer["tasks"]] == texts[first["id"]]


def test_retry_queues_only_the_tasks_that_ended_in_infrastructure_errors(api, database, count_rows):
    version = dataset_version(api, count=3)
    crashed = start(api, version, evaluator(api, "crashes", CRASHES, attempts=2))
    scored = start(api, version, evaluator(api, "novice", NOVICE, attempts=2))
    work(database)
    answer = api.get(f"/api/v1/dataset-runs/{crashed['id']}").json
    assert answer["progress"]["tasksWithErrors"] == 3 and {t["errors"] for t in answer["tasks"]} == {2}

    nothing = api.post(f"/api/v1/dataset-runs/{scored['id']}/retry", {})
    assert nothing.status_code == 409 and "nothing to retry" in nothing.json["detail"], nothing.json
    before = count_rows("evaluation_runs", api.org)

    retried = api.post(f"/api/v1/dataset-runs/{crashed['id']}/retry", {})
    assert retried.status_code == 202, retried.json
    assert retried.json["retried"] == 3
    tasks = retried.json["datasetRun"]["tasks"]
    assert {(t["status"], t["trials"], t["errors"], t["retries"]) for t in tasks} == {("queued", 0, 0, 1)}
    assert count_rows("evaluation_runs", api.org) == before + 3
    old = {t["evaluationRunId"] for t in answer["tasks"]}
    assert old.isdisjoint({t["evaluationRunId"] for t in tasks})
    # the same worlds: each new run is a fresh workspace of the task's run
    seeds = rows(
        database,
        api.org.id,
        "SELECT world_seed, reset_mode, reset_of_run_id::text FROM evaluation_runs "
        "WHERE id = ANY(CAST(:ids AS uuid[]))",
        ids=[t["evaluationRunId"] for t in tasks],
    )
    assert sorted(s[0] for s in seeds) == [1, 2, 3] and {s[1] for s in seeds} == {"new_workspace"}
    assert {s[2] for s in seeds} == old
    again = api.post(f"/api/v1/dataset-runs/{crashed['id']}/retry", {})  # queued again: nothing finished to retry
    assert again.status_code == 409


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({}, 400, "missing datasetVersionId"),
        ({"datasetVersionId": "nope", "evaluatorConfigId": None}, 400, "invalid datasetVersionId"),
        ({"evaluatorConfigId": "x"}, 400, "missing datasetVersionId"),
        ({"attemptCount": 9}, 400, None),
    ],
)
def test_a_refused_dataset_run_names_its_field_and_writes_nothing(api, count_rows, body, status, error):
    version = dataset_version(api, count=2)
    config = evaluator(api, "novice", NOVICE)
    if "attemptCount" in body:
        body = {"datasetVersionId": version["id"], "evaluatorConfigId": config["id"], **body}
    before = table_counts(count_rows, api.org)
    answer = api.post("/api/v1/dataset-runs", body)
    assert answer.status_code == status, answer.json
    assert answer.json["error"] == (error or "invalid attemptCount"), answer.json
    assert table_counts(count_rows, api.org) == before


def test_an_imported_evaluator_is_refused_with_nothing_written(api, count_rows):
    version = dataset_version(api, count=2)
    imported = evaluator(api, "elsewhere", {"kind": "external", "name": "someone"})
    answer = api.post("/api/v1/dataset-runs", {"datasetVersionId": version["id"], "evaluatorConfigId": imported["id"]})
    assert answer.status_code == 422 and answer.json["error"] == "invalid evaluatorConfigId", answer.json
    assert count_rows("dataset_runs", api.org) == 0 and count_rows("evaluation_runs", api.org) == 0


@pytest.mark.leak
def test_another_organizations_dataset_runs_and_versions_answer_404_and_nothing_is_written(
    api, app, make_member, count_rows, database
):
    version = dataset_version(api, count=2)
    mine = start(api, version, evaluator(api, "novice", NOVICE))
    bob = ApiClient(app.test_client(), make_member("bob@b.test", "Org B"))
    theirs = evaluator(bob, "theirs", NOVICE)
    before = table_counts(count_rows, api.org)
    assert bob.get(f"/api/v1/dataset-runs/{mine['id']}").status_code == 404
    assert bob.post(f"/api/v1/dataset-runs/{mine['id']}/retry", {}).status_code == 404
    answer = bob.post("/api/v1/dataset-runs", {"datasetVersionId": version["id"], "evaluatorConfigId": theirs["id"]})
    assert answer.status_code == 404 and answer.json["detail"] == f"no dataset version {version['id']}"
    mixed = api.post("/api/v1/dataset-runs", {"datasetVersionId": version["id"], "evaluatorConfigId": theirs["id"]})
    assert mixed.status_code == 404 and mixed.json["detail"] == f"no evaluator configuration {theirs['id']}"
    assert table_counts(count_rows, api.org) == before
    assert count_rows("dataset_runs", bob.org) == 0 and count_rows("evaluation_runs", bob.org) == 0


def test_a_dataset_runs_tasks_take_turns_with_another_organizations_runs(database, make_org):
    """The tasks of a dataset run are runs in the fair queue: an organization queueing one run after another's
    ten-task dataset run is served second, not eleventh."""
    from sqlalchemy import select

    from domain.datasets import TaskInput
    from models import DatasetVersion
    from tests.factories import make_catalog
    from tests.helpers import queue
    from tests.integration.worker.test_fair_queue import claims
    from writes.dataset_runs import start_dataset_run
    from writes.datasets import add_dataset_version, create_dataset

    acme, globex = make_org("Acme RL"), make_org("Globex Research")
    mine = make_catalog(database, acme.id, {"kind": "scripted", "skill": 1.0}, 1)
    theirs = make_catalog(database, globex.id, {"kind": "scripted", "skill": 1.0}, 1)
    with database.session(acme.id) as session, session.begin():
        dataset = create_dataset(session, acme.id, "ten")
        tasks = [TaskInput(mine.version_id, seed, "environmentVersionId", "count") for seed in range(1, 11)]
        version, _ = add_dataset_version(session, dataset, tasks)
        start_dataset_run(session, version.id, mine.config_id)
        assert session.scalar(select(DatasetVersion.task_count)) == 10
    queue(database, theirs, count=1)
    assert claims(database, 4) == [acme.id, globex.id, acme.id, acme.id]
    positions = rows(
        database,
        acme.id,
        "SELECT dataset_position FROM evaluation_runs WHERE status = 'running' ORDER BY dataset_position",
    )
    assert [p for (p,) in positions] == [1, 2, 3]  # the tasks are claimed in their order


def test_the_dataset_runs_list_is_newest_first_and_narrows_to_one_version(api):
    version = dataset_version(api, count=2)
    other = post_version(
        api, {"id": version["datasetId"]}, {"environmentVersionId": version_of(api, version), "count": 3}
    )
    novice = evaluator(api, "novice", NOVICE)
    first, second = start(api, version, novice), start(api, other.json, novice)
    listed = api.get("/api/v1/dataset-runs")
    assert listed.status_code == 200 and [d["id"] for d in listed.json] == [second["id"], first["id"]]
    assert listed.json[0]["taskCount"] == 3 and listed.json[0]["evaluatorName"] == "novice"
    narrowed = api.get(f"/api/v1/dataset-runs?datasetVersionId={version['id']}")
    assert [d["id"] for d in narrowed.json] == [first["id"]]
    bad = api.get("/api/v1/dataset-runs?datasetVersionId=nope")
    assert bad.status_code == 400 and bad.json["error"] == "invalid datasetVersionId", bad.json


def version_of(api: ApiClient, dataset_version: dict) -> str:
    """The environment version of a dataset version's first task."""
    found = api.get(f"/api/v1/datasets/{dataset_version['datasetId']}/versions/{dataset_version['version']}")
    return found.json["tasks"][0]["environmentVersionId"]


def test_a_reviewers_human_category_moves_the_dataset_runs_capability_gap(api, database):
    """Every page reads a trial's human category over the verifier's (migration 0033): so does a dataset run's
    capability gap, shown at once though a process keeps the figures it computed for a state of the rollup."""
    from writes.triage import Reviewer, set_review

    version = dataset_version(api, count=3)
    dataset_run = start(api, version, evaluator(api, "novice", NOVICE, attempts=4))
    work(database)
    before = api.get(f"/api/v1/dataset-runs/{dataset_run['id']}").json["failureCategories"]
    assert api.get(f"/api/v1/dataset-runs/{dataset_run['id']}").json["failureCategories"] == before
    (trial_id, category), *_ = rows(
        database,
        api.org.id,
        "SELECT t.id, t.failure_category FROM evaluation_trials t JOIN evaluation_runs r "
        "ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id "
        "WHERE r.dataset_run_id = :id AND t.failure_category IS NOT NULL ORDER BY t.id",
        id=dataset_run["id"],
    )
    with database.session(api.org.id) as session, session.begin():
        set_review(
            session, Reviewer(api.org.id, api.member.user.id, "member"), trial_id, human_category="verifier_crash"
        )
    after = api.get(f"/api/v1/dataset-runs/{dataset_run['id']}").json["failureCategories"]
    expected = dict(before, verifier_crash=1)
    expected[category] -= 1
    assert after == {key: n for key, n in expected.items() if n}, (before, after)
    page = api.get(f"/dataset-runs/{dataset_run['id']}").text
    assert "verifier_crash" in page
