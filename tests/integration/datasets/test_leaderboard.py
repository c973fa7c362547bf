"""A dataset version's leaderboard: every evaluator's newest dataset run ranked by pass@1, its figures equal to the
task-clustered ones computed here from the trials, each row tested against the best row by the paired test over task
means (scipy's ttest_rel, computed here) and Holm's correction across the table (computed here by hand); the
checkpoints' points by step and their chart; bad `version` values and another organization's dataset answer 4xx."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np
import pytest
from scipy import stats
from sqlalchemy import text

from domain.outcome import TrialOutcome
from models import EvaluationRun
from tests.conftest import ApiClient
from tests.factories import typed_steps
from tests.helpers import one, parse, rows, work
from tests.integration.datasets.test_dataset_compare import dataset_version
from tests.integration.datasets.test_dataset_runs import EXPERT, NOVICE, start
from writes.runs import complete_run, record_trial, trial_seed


def evaluator(api: ApiClient, name: str, agent: dict, attempts: int = 3, **extra) -> dict:
    made = api.post("/api/v1/evaluator-configs", {"name": name, "agent": agent, "attemptCount": attempts, **extra})
    assert made.status_code == 201, made.json
    return made.json


def board(api: ApiClient, dataset_id: str, query: str = "") -> dict:
    answer = api.get(f"/api/v1/datasets/{dataset_id}/leaderboard{query}")
    assert answer.status_code == 200, answer.json
    return answer.json


def holm_by_hand(p_values: list[float]) -> list[float]:
    """Holm's adjusted p-values: the i-th smallest times (m - i), made non-decreasing, at most 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def per_task(database, org, dataset_run_id: str) -> dict[int, list[float | None]]:
    """Each task position's rewards, read from evaluation_trials."""
    found: dict[int, list[float | None]] = {}
    for position, reward in rows(
        database,
        org,
        "SELECT r.dataset_position, t.reward FROM evaluation_trials t JOIN evaluation_runs r "
        "ON r.organization_id = t.organization_id AND r.id = t.evaluation_run_id WHERE r.dataset_run_id = :id",
        id=dataset_run_id,
    ):
        found.setdefault(position, []).append(reward)
    return found


def clustered(tasks: dict[int, list[float | None]], success: bool) -> tuple[float, float]:
    """The mean over trials and its CR0 standard error over tasks, from the trials themselves."""
    values = [
        np.asarray([float(r == 1) if success else r for r in rs if success or r is not None]) for rs in tasks.values()
    ]
    every = np.concatenate(values)
    mean = every.mean()
    return float(mean), float(np.sqrt(sum(np.sum(v - mean) ** 2 for v in values)) / every.size)


def test_the_leaderboard_ranks_real_dataset_runs_and_tests_them_against_the_best_row(api, database):
    version, _ = dataset_version(api)
    configs = [
        evaluator(api, "ckpt-100", NOVICE, checkpoint="runs/7/ckpt-100", step=100),
        evaluator(api, "ckpt-200", EXPERT, checkpoint="runs/7/ckpt-200", step=200),
        evaluator(api, "baseline", {"kind": "scripted", "skill": 0.5}),
    ]
    older = start(api, version, configs[0])
    work(database)
    newest = {c["name"]: start(api, version, c)["id"] for c in configs}
    work(database)

    answer = board(api, version["datasetId"])
    assert (answer["version"], answer["taskCount"], answer["datasetVersionId"]) == (1, 6, version["id"])
    assert {r["evaluatorName"]: r["datasetRunId"] for r in answer["rows"]} == newest  # each evaluator's newest run
    assert older["id"] not in {r["datasetRunId"] for r in answer["rows"]}
    values = [r["passAt1"]["value"] for r in answer["rows"]]
    assert values == sorted(values, reverse=True) and [r["rank"] for r in answer["rows"]] == [1, 2, 3]

    trials = {r["evaluatorName"]: per_task(database, api.org.id, r["datasetRunId"]) for r in answer["rows"]}
    for row in answer["rows"]:
        tasks = trials[row["evaluatorName"]]
        value, stderr = clustered(tasks, success=True)
        assert (row["passAt1"]["value"], row["passAt1"]["stderr"]) == (pytest.approx(value), pytest.approx(stderr))
        reward, reward_se = clustered(tasks, success=False)
        assert row["meanReward"]["value"] == pytest.approx(reward)
        assert row["meanReward"]["stderr"] == pytest.approx(reward_se)
        assert (row["trials"], row["tasksDone"], row["tasksTotal"], set(row["passAtK"])) == (18, 6, 6, {"1", "2", "3"})
        pass_at_3 = np.mean([any(r == 1 for r in rs) for rs in tasks.values()])
        assert row["passAtK"]["3"]["value"] == pytest.approx(pass_at_3)

    best, others = answer["rows"][0], answer["rows"][1:]
    assert best["versusBest"] is None and best["behind"] is False
    means = {
        name: np.asarray([np.mean([r == 1 for r in tasks[p]]) for p in sorted(tasks)]) for name, tasks in trials.items()
    }
    expected = []
    for row in others:
        difference = means[row["evaluatorName"]] - means[best["evaluatorName"]]
        if np.std(difference, ddof=1) / np.sqrt(len(difference)) > 1e-12:  # rounding in the means is no spread
            p_value = stats.ttest_rel(means[row["evaluatorName"]], means[best["evaluatorName"]]).pvalue
        else:
            p_value = stats.binomtest(6, 6, 0.5).pvalue
        assert row["versusBest"]["pValue"] == pytest.approx(float(p_value), rel=1e-9)
        assert row["versusBest"]["difference"] == pytest.approx(float(np.mean(difference)))
        assert row["versusBest"]["pairedTasks"] == 6
        expected.append(float(p_value))
    for row, adjusted in zip(others, holm_by_hand(expected), strict=True):
        assert row["versusBest"]["adjustedPValue"] == pytest.approx(adjusted, rel=1e-9)
        assert row["behind"] is (adjusted <= 0.05 and row["versusBest"]["difference"] < 0)

    # the checkpoints by step, each the pass@1 of its row
    by_name = {r["evaluatorName"]: r for r in answer["rows"]}
    assert [(c["step"], c["checkpoint"]) for c in answer["checkpoints"]] == [
        (100, "runs/7/ckpt-100"),
        (200, "runs/7/ckpt-200"),
    ]
    for point in answer["checkpoints"]:
        figure = by_name[point["evaluatorName"]]["passAt1"]
        assert (point["passAt1"], point["low"], point["high"]) == (figure["value"], figure["low"], figure["high"])

    page = api.get(f"/datasets/{version['datasetId']}/leaderboard")
    assert page.status_code == 200
    html = parse(page.get_data(as_text=True))
    shown = html.select("table.leaderboard-table tbody tr")
    assert [one(r, "th").get_text(" ", strip=True).split()[0] for r in shown] == [
        r["evaluatorName"] for r in answer["rows"]
    ]
    assert [("behind" in r["class"]) for r in shown] == [r["behind"] for r in answer["rows"]]
    dots = [c.get_text() for c in html.select("#leaderboard svg circle.dot title")]
    assert len(dots) == 2 and dots[0].startswith("ckpt-100, step 100: pass@1 = ")
    fragment = api.get(f"/datasets/{version['datasetId']}/leaderboard", headers={"HX-Request": "true"})
    assert fragment.get_data(as_text=True).lstrip().startswith('<section class="leaderboard"')

    # the dataset page is the leaderboard: the same rows above its versions, each version linking to a run of it
    dataset_page = parse(api.get(f"/datasets/{version['datasetId']}").get_data(as_text=True))
    listed = dataset_page.select("#leaderboard table.leaderboard-table tbody tr")
    assert [one(r, "th").get_text(" ", strip=True).split()[0] for r in listed] == [
        r["evaluatorName"] for r in answer["rows"]
    ]
    run_it = dataset_page.find("a", string="Run an evaluator on v1")
    assert run_it is not None and run_it["href"] == f"/dataset-runs?datasetVersionId={version['id']}#start-dataset-run"
    form = parse(api.get(run_it["href"]).get_data(as_text=True))
    assert one(form, f"select[name=dataset_version_id] option[value='{version['id']}']").has_attr("selected")
    assert api.get(f"/datasets/{version['datasetId']}?version=2").status_code == 404


def outcome(reward: float) -> TrialOutcome:
    """A scored trial with 15 tokens (a success when the reward is 1)."""
    steps = typed_steps([{"step": 1, "tool": "answer", "observation": "ok", "tokens": {"prompt": 10, "completion": 5}}])
    return TrialOutcome(
        status="succeeded" if reward == 1 else "failed",
        reward=reward,
        failure_category=None if reward == 1 else "wrong_answer",
        stages={},
        steps=steps,
        log="done",
        started_at=datetime.now(UTC),
        task="the task",
    )


def finish_dataset_run(database, org_id, dataset_run_id: str, successes: list[int]) -> None:
    """Record each task's trials through the worker's writes: task i succeeds on its first successes[i] attempts."""
    with database.session(org_id) as session, session.begin():
        runs = session.query(EvaluationRun).filter(EvaluationRun.dataset_run_id == uuid.UUID(dataset_run_id))
        for run in runs.order_by(EvaluationRun.dataset_position):
            wins = successes[run.dataset_position - 1]
            for number in range(1, run.attempt_count + 1):
                record_trial(session, run, number, trial_seed(run, number), outcome(1.0 if number <= wins else 0.0))
            complete_run(session, run)


# Twelve tasks of four attempts: successes per task. `mid` is below the best with p = 0.026 uncorrected, which
# Holm's correction (x2, behind `bad`) lifts to 0.052: not behind.
TABLE = {
    "best": [4] * 12,
    "close": [4] * 10 + [3, 3],
    "mid": [4] * 7 + [3] * 4 + [2],
    "bad": [0] * 12,
}


@pytest.mark.bad_input
def test_holm_marks_behind_only_the_rows_whose_difference_survives_the_correction(api, database):
    version, _ = dataset_version(api, count=12)
    started = {}
    for name, successes in TABLE.items():
        config = evaluator(api, name, NOVICE, attempts=4)
        started[name] = start(api, version, config)["id"]
        finish_dataset_run(database, api.org.id, started[name], successes)

    answer = board(api, version["datasetId"], "?version=1")
    assert [r["evaluatorName"] for r in answer["rows"]] == ["best", "close", "mid", "bad"]
    for row in answer["rows"]:
        wins = TABLE[row["evaluatorName"]]
        assert row["passAt1"]["value"] == pytest.approx(sum(wins) / 48)
        assert (row["trials"], row["tokens"]) == (48, 48 * 15)
    best = np.ones(12)
    p_values = {
        "close": stats.ttest_rel(np.asarray(TABLE["close"]) / 4, best).pvalue,
        "mid": stats.ttest_rel(np.asarray(TABLE["mid"]) / 4, best).pvalue,
        "bad": stats.binomtest(12, 12, 0.5).pvalue,  # every task moved by -1: the exact sign test
    }
    adjusted = dict(zip(p_values, holm_by_hand(list(p_values.values())), strict=True))
    assert adjusted == pytest.approx({"close": 0.16608681, "mid": 0.05218936, "bad": 3 * 2 / 2**12}, rel=1e-6)
    shown = {r["evaluatorName"]: r for r in answer["rows"][1:]}
    for name, row in shown.items():
        assert row["versusBest"]["pValue"] == pytest.approx(float(p_values[name]), rel=1e-9)
        assert row["versusBest"]["adjustedPValue"] == pytest.approx(float(adjusted[name]), rel=1e-9)
    assert shown["mid"]["versusBest"]["pValue"] < 0.05  # uncorrected, mid would be behind
    assert {name: row["behind"] for name, row in shown.items()} == {"close": False, "mid": False, "bad": True}
    assert answer["checkpoints"] == []
    html = parse(api.get(f"/datasets/{version['datasetId']}/leaderboard").get_data(as_text=True))
    assert [r["data-evaluator"] for r in html.select("tr.behind")] == [shown["bad"]["evaluatorConfigId"]]
    assert (
        "no difference after correction" in one(html, f'tr[data-evaluator="{shown["mid"]["evaluatorConfigId"]}"]').text
    )


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("query", "status", "error", "detail"),
    [
        ("?version=0", 400, "invalid version", "version must be an integer from 1 to 2147483647, not '0'"),
        ("?version=latest", 400, "invalid version", "not 'latest'"),
        ("?version=1.5", 400, "invalid version", "not '1.5'"),
        ("?version=2147483648", 400, "invalid version", "not '2147483648'"),
        ("?version=2", 404, "not found", "no version 2 of dataset"),
    ],
)
def test_a_bad_version_is_refused_naming_it(api, query, status, error, detail):
    version, _ = dataset_version(api, count=2)
    answer = api.get(f"/api/v1/datasets/{version['datasetId']}/leaderboard{query}")
    assert answer.status_code == status, answer.json
    assert (answer.json["error"], answer.json["field"]) == (error, "version") and detail in answer.json["detail"]
    page = api.get(f"/datasets/{version['datasetId']}/leaderboard{query}")
    assert page.status_code == status and "version" in page.get_data(as_text=True)


def test_a_dataset_without_runs_or_versions_says_so(api):
    empty = api.post("/api/v1/datasets", {"name": "empty"}).json
    answer = api.get(f"/api/v1/datasets/{empty['id']}/leaderboard")
    assert answer.status_code == 404 and answer.json["detail"] == f"no version yet of dataset {empty['id']}"
    assert "No version of empty yet" in api.get(f"/datasets/{empty['id']}/leaderboard").get_data(as_text=True)
    version, _ = dataset_version(api, count=2)
    assert board(api, version["datasetId"])["rows"] == []
    page = api.get(f"/datasets/{version['datasetId']}/leaderboard").get_data(as_text=True)
    assert "No evaluator has run shop-50 v1 yet" in page


@pytest.mark.leak
def test_another_organizations_dataset_leaderboard_is_not_found(api, app, make_member, database):
    version, _ = dataset_version(api, count=2)
    start(api, version, evaluator(api, "novice", NOVICE))
    work(database)
    bob = ApiClient(app.test_client(), make_member("bob@b.test", "Org B"))
    answer = bob.get(f"/api/v1/datasets/{version['datasetId']}/leaderboard")
    assert answer.status_code == 404 and answer.json["detail"] == f"no dataset {version['datasetId']}"
    assert bob.get(f"/api/v1/datasets/{version['datasetId']}/leaderboard?version=1").status_code == 404
    assert bob.get(f"/datasets/{version['datasetId']}/leaderboard").status_code == 404
    # Bob's own dataset of the same name shows none of Acme's rows
    theirs, _ = dataset_version(bob, count=2)
    assert board(bob, theirs["datasetId"])["rows"] == []


def test_the_board_follows_every_trial_and_retry_though_a_process_keeps_computed_boards(api, database):
    """The leaderboard is kept per state of its rollup: each trial recorded and each task retried changes what it
    shows at once, and a board kept for one state is never shown for another."""
    from writes.dataset_runs import retry_errored_tasks

    version, _ = dataset_version(api, count=3)
    first = start(api, version, evaluator(api, "first", NOVICE, attempts=2))["id"]
    shown = board(api, version["datasetId"])
    assert [(r["tasksDone"], r["trials"]) for r in shown["rows"]] == [(0, 0)]
    assert board(api, version["datasetId"]) == shown  # the same state, the same board

    with database.session(api.org.id) as session, session.begin():
        runs = session.query(EvaluationRun).filter(EvaluationRun.dataset_run_id == uuid.UUID(first))
        task_1 = runs.order_by(EvaluationRun.dataset_position).first()
        record_trial(session, task_1, 1, trial_seed(task_1, 1), outcome(1.0))
    assert [(r["tasksDone"], r["trials"]) for r in board(api, version["datasetId"])["rows"]] == [(0, 0)]
    with database.session(api.org.id) as session, session.begin():
        task_1 = session.get_one(EvaluationRun, (api.org.id, task_1.id))
        record_trial(session, task_1, 2, trial_seed(task_1, 2), outcome(0.0))
    after = board(api, version["datasetId"])["rows"][0]
    assert (after["tasksDone"], after["trials"], after["passAt1"]["value"]) == (1, 2, 0.5)

    with database.session(api.org.id) as session, session.begin():  # tasks 2 and 3: two successes each
        runs = session.query(EvaluationRun).filter(EvaluationRun.dataset_run_id == uuid.UUID(first))
        for run in runs.order_by(EvaluationRun.dataset_position):
            for number in (1, 2) if run.dataset_position > 1 else ():
                record_trial(session, run, number, trial_seed(run, number), outcome(1.0))
            complete_run(session, run)
    done = board(api, version["datasetId"])["rows"][0]
    assert (done["tasksDone"], done["trials"]) == (3, 6)

    from models import DatasetRun

    with database.session(api.org.id) as session, session.begin():  # task 1 ends in an error: retried
        session.execute(
            text("UPDATE dataset_run_tasks SET errors = 1 WHERE dataset_run_id = :id AND position = 1"), {"id": first}
        )
        retry_errored_tasks(session, session.get_one(DatasetRun, (api.org.id, uuid.UUID(first))))
    retried = board(api, version["datasetId"])["rows"][0]
    assert (retried["tasksDone"], retried["trials"]) == (2, 4)


def test_a_trial_of_one_dataset_run_gives_the_board_a_process_would_compute_afresh(api, database):
    """A process keeps each dataset run's figures under its own state: after a trial of one run (here the best
    one's rival overtaking it), the board shown equals the board computed with nothing kept, ranks and tests
    included."""
    from queries.kept import forget_all

    version, _ = dataset_version(api, count=3)
    leader = start(api, version, evaluator(api, "leader", NOVICE, attempts=2))["id"]
    rival = start(api, version, evaluator(api, "rival", EXPERT, attempts=2))["id"]
    finish_dataset_run(database, api.org.id, leader, [2, 1, 1])
    with database.session(api.org.id) as session, session.begin():  # the rival's first two tasks: all successes
        runs = session.query(EvaluationRun).filter(EvaluationRun.dataset_run_id == uuid.UUID(rival))
        for run in runs.order_by(EvaluationRun.dataset_position).limit(2):
            for number in (1, 2):
                record_trial(session, run, number, trial_seed(run, number), outcome(1.0))
    before = board(api, version["datasetId"])
    assert [(r["evaluatorName"], r["tasksDone"]) for r in before["rows"]] == [("rival", 2), ("leader", 3)]

    with database.session(api.org.id) as session, session.begin():  # the rival's third task: one success of two
        run = (
            session.query(EvaluationRun)
            .filter(EvaluationRun.dataset_run_id == uuid.UUID(rival), EvaluationRun.dataset_position == 3)
            .one()
        )
        for number, reward in ((1, 1.0), (2, 0.0)):
            record_trial(session, run, number, trial_seed(run, number), outcome(reward))
    shown = board(api, version["datasetId"])
    forget_all()
    assert shown == board(api, version["datasetId"])
    assert [(r["evaluatorName"], r["tasksDone"], r["trials"]) for r in shown["rows"]] == [
        ("rival", 3, 6),
        ("leader", 3, 6),
    ]
    assert shown["rows"][0]["passAt1"]["value"] == pytest.approx(5 / 6)
    assert shown["rows"][1]["versusBest"]["pairedTasks"] == 3
