"""The worker end to end: trials, artifacts, rollouts, rollups, pass@k, crashes, concurrency, tenancy."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from bench.generate import check_rollups
from domain.scoring import pass_at_k, pass_at_k_table
from models import EvaluationRun
from queries.trials import TRAJECTORY_BODY
from tests.conftest import ROOT
from tests.factories import command_agent, make_catalog
from tests.helpers import parse, queue, rows, sqlstate, work
from worker.trial import run_trial
from writes.runs import RUNS_CHANNEL, record_trial

PERFECT = {"kind": "scripted", "skill": 1.0}

# The trajectory files with their bytes, stored or rendered from their trials (migration 0037).
TRAJECTORY_FILES = (
    "FROM artifacts a JOIN evaluation_trials t ON t.organization_id = a.organization_id "
    "AND t.trajectory_artifact_id = a.id"
)


@pytest.fixture
def org(make_org):
    return make_org("Acme RL")


@pytest.mark.slow  # starts agent processes
def test_attempt_count_4_writes_4_trials_artifacts_and_rollouts(database, org):
    catalog = make_catalog(database, org.id, command_agent("misbehave.py", "quit"), attempt_count=4)
    (run_id,) = queue(database, catalog)
    assert work(database) == 1

    trials = rows(
        database,
        org.id,
        "SELECT trial_number, status, reward, failure_category, metrics, "
        "trajectory_artifact_id, seed FROM evaluation_trials ORDER BY trial_number",
    )
    assert [t.trial_number for t in trials] == [1, 2, 3, 4]
    assert {(t.status, t.reward, t.failure_category) for t in trials} == {("failed", 0.0, "gave_up")}
    stage_keys = {"stage_inventory", "stage_order", "stage_checkout"}
    assert all(set(t.metrics) == {*stage_keys, "explanations"} for t in trials)  # the verifier's words beside
    assert all(set(t.metrics["explanations"]) == stage_keys for t in trials)
    assert len({t.seed for t in trials}) == 4  # independent trials

    artifacts = rows(
        database,
        org.id,
        f"SELECT a.id, a.filename, a.content_type, {TRAJECTORY_BODY} AS body {TRAJECTORY_FILES} ORDER BY a.filename",
    )
    assert [a.filename for a in artifacts] == [f"trial-{n}-trajectory.json" for n in range(1, 5)]
    assert {a.id for a in artifacts} == {t.trajectory_artifact_id for t in trials}
    for artifact in artifacts:
        document = json.loads(artifact.body)
        assert document["schemaVersion"] == 1 and document["log"].startswith("opened admin-console")
        steps = json.loads(document["trajectory"])["steps"]  # no tool call: only the agent's closing words
        assert [(s["source"], s["tool"], s["message"]) for s in steps] == [("agent", None, "nothing to do")]

    rollouts = rows(database, org.id, "SELECT reward, seed, environment_version_id, evaluation_run_id FROM rollouts")
    assert len(rollouts) == 4 and {r.reward for r in rollouts} == {0.0}
    assert {(r.environment_version_id, r.evaluation_run_id) for r in rollouts} == {(catalog.version_id, run_id)}

    run = rows(database, org.id, "SELECT status, pass_at_k, stage_pass_at_k FROM evaluation_runs")[0]
    assert run.status == "completed"
    assert run.pass_at_k == {"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0}
    assert rows(database, org.id, "SELECT failure_category, trials FROM failure_category_counts") == [("gave_up", 4)]


def test_successful_trials_store_pass_at_k_and_steps(database, org, client, auth, make_member):
    catalog = make_catalog(database, org.id, PERFECT, attempt_count=3)
    (run_id,) = queue(database, catalog)
    work(database)
    run = rows(database, org.id, "SELECT pass_at_k, stage_pass_at_k FROM evaluation_runs")[0]
    assert run.pass_at_k == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert run.stage_pass_at_k["stage_checkout"] == {"1": 1.0, "2": 1.0, "3": 1.0}
    body = json.loads(rows(database, org.id, f"SELECT {TRAJECTORY_BODY} AS body {TRAJECTORY_FILES} LIMIT 1")[0].body)
    steps = json.loads(body["trajectory"])["steps"]
    assert [s["tool"] for s in steps] == [
        "list_inventory",
        "restock",
        "list_customers",
        "create_order",
        "checkout",
        None,
    ]
    assert steps[-1]["message"] == "done"  # the agent's closing words

    member = make_member("ann@acme.test", org, "viewer")
    auth.login(member.email)
    api = client.get(f"/api/v1/evaluation-runs/{run_id}").json
    assert api["status"] == "completed" and api["passAtK"]["3"] == 1.0
    assert [t["trialNumber"] for t in api["trials"]] == [1, 2, 3]
    assert api["trials"][0]["stages"] == {"stage_checkout": 1.0, "stage_inventory": 1.0, "stage_order": 1.0}
    page = client.get(f"/runs/{run_id}").text
    assert "3 of 3 trials" in page and parse(page).select('[hx-trigger="every 2s"]') == []  # polling stopped


def test_mixed_rewards_give_the_unbiased_pass_at_k(database, org):
    catalog = make_catalog(database, org.id, {"kind": "scripted", "skill": 0.4}, attempt_count=8)
    queue(database, catalog)
    work(database)
    rewards = [r.reward for r in rows(database, org.id, "SELECT reward FROM evaluation_trials")]
    successes = sum(1 for r in rewards if r == 1)
    stored = rows(database, org.id, "SELECT pass_at_k FROM evaluation_runs")[0].pass_at_k
    assert stored == pass_at_k_table(8, successes)
    counts = dict(rows(database, org.id, "SELECT failure_category, trials FROM failure_category_counts"))
    direct = dict(
        rows(
            database,
            org.id,
            "SELECT failure_category, count(*) FROM evaluation_trials WHERE failure_category IS NOT NULL GROUP BY 1",
        )
    )
    assert counts == direct
    sums = rows(database, org.id, "SELECT stage_key, trials, passed, value_sum FROM stage_metric_rollups ORDER BY 1")
    direct_sums = rows(
        database,
        org.id,
        """SELECT key, count(*), count(*) FILTER (WHERE value::float = 1),
        sum(value::float) FROM evaluation_trials, jsonb_each_text(metrics) AS m(key, value)
        WHERE key LIKE 'stage\\_%' GROUP BY 1 ORDER BY 1""",
    )
    assert [tuple(r) for r in sums] == [tuple(r) for r in direct_sums]
    assert check_rollups(database) == []  # stats, failure_category and stage_* rollups equal the raw trials


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(1, 0, 1), (1, 1, 1), (4, 1, 1), (4, 1, 2), (4, 2, 3), (8, 3, 5), (8, 0, 8), (8, 8, 1), (8, 7, 2), (5, 1, 5)],
)
def test_pass_at_k_matches_the_combinatorial_definition(n, c, k):
    reference = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(reference, abs=1e-12)


def test_pass_at_k_rejects_impossible_arguments():
    for n, c, k in ((4, 5, 1), (4, 1, 0), (4, 1, 5)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


@pytest.mark.leak
def test_worker_writes_are_rejected_for_another_org_and_invisible_to_it(database, org, make_org, count_rows):
    other = make_org("Globex Research")
    catalog = make_catalog(database, org.id, PERFECT, attempt_count=1)
    (run_id,) = queue(database, catalog)
    with database.session(org.id) as session:
        run = session.get_one(EvaluationRun, (org.id, run_id))
    outcome = run_trial(
        {"kind": "builtin", "environment": "admin-console", "params": {}},
        PERFECT,
        world_seed=1,
        seed=1,
        max_steps=10,
        timeout_s=5,
    )
    with database.session(other.id) as session, pytest.raises(ProgrammingError) as raised:
        record_trial(session, run, 1, 1, outcome)
    assert sqlstate(raised.value) == "42501"
    assert count_rows("evaluation_trials", org) == 0

    work(database)
    for table in (
        "evaluation_runs",
        "evaluation_trials",
        "rollouts",
        "artifacts",
        "failure_category_counts",
        "stage_metric_rollups",
    ):
        assert count_rows(table, other) == 0
    assert count_rows("evaluation_trials", org) == 1


@pytest.mark.fault
def test_a_run_that_keeps_crashing_fails_after_bounded_attempts(database, org, monkeypatch):
    catalog = make_catalog(database, org.id, PERFECT, attempt_count=2)
    queue(database, catalog)

    def exploding(*args, **kwargs):
        raise RuntimeError("trial runner blew up")

    monkeypatch.setattr("worker.loop.run_trial", exploding)
    work(database)
    run = rows(database, org.id, "SELECT status, attempts, error FROM evaluation_runs")[0]
    assert run.status == "failed" and run.attempts == 3
    assert "trial runner blew up" in run.error and "gave up after 3 attempts" in run.error


@pytest.mark.fault
def test_a_run_whose_agent_cannot_be_built_fails_with_the_reason(database, org, owner_engine):
    catalog = make_catalog(database, org.id, PERFECT, attempt_count=1)
    queue(database, catalog)
    with owner_engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :o, true)"), {"o": str(org.id)})
        # The agent column cannot change (a trigger, for every role); as the owner, plant a row no code could write.
        conn.execute(text("ALTER TABLE evaluator_configs DISABLE TRIGGER evaluator_configs_agent_immutable"))
        conn.execute(text("""UPDATE evaluator_configs SET agent = '{"kind": "telepathy"}'"""))
        conn.execute(text("ALTER TABLE evaluator_configs ENABLE TRIGGER evaluator_configs_agent_immutable"))
    work(database)
    run = rows(database, org.id, "SELECT status, error FROM evaluation_runs")[0]
    kinds = "'scripted', 'command', 'openai-chat', 'oracle', 'external'"
    assert run.status == "failed" and f"agent.kind must be one of {kinds}, not 'telepathy'" in run.error


def worker_process(database_urls, *args: str) -> subprocess.Popen:
    """Start `flask --app app worker …` as a separate process against the test database."""
    env = {
        **os.environ,
        "DATABASE_URL": database_urls.runtime,
        "ADMIN_DATABASE_URL": database_urls.admin,
        "SECRET_KEY": "test",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "app", "worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.mark.slow
@pytest.mark.fault
def test_a_sigkilled_worker_loses_nothing(database, database_urls, org, count_rows):
    slow = {"kind": "scripted", "skill": 1.0, "stepDelayS": 0.08}
    catalog = make_catalog(database, org.id, slow, attempt_count=8)
    queue(database, catalog)
    victim = worker_process(database_urls, "--lease-seconds", "2", "--poll-seconds", "0.2")
    wait_for(lambda: count_rows("evaluation_trials", org) >= 2)
    victim.send_signal(signal.SIGKILL)
    victim.communicate()  # waits and closes its stdout
    written = count_rows("evaluation_trials", org)
    assert 2 <= written < 8
    wait_for(lambda: rows(database, org.id, "SELECT lease_expires_at < now() FROM evaluation_runs")[0][0], timeout=10)

    assert work(database, lease_seconds=2) == 1
    trials = rows(database, org.id, "SELECT trial_number FROM evaluation_trials ORDER BY 1")
    assert [t.trial_number for t in trials] == list(range(1, 9))
    run = rows(database, org.id, "SELECT status, attempts FROM evaluation_runs")[0]
    assert (run.status, run.attempts) == ("completed", 2)
    assert count_rows("artifacts", org) == 8


@pytest.mark.slow
@pytest.mark.fault
def test_sigterm_finishes_the_trial_in_hand_and_hands_the_run_back(database, database_urls, org, count_rows):
    slow = {"kind": "scripted", "skill": 1.0, "stepDelayS": 0.1}
    catalog = make_catalog(database, org.id, slow, attempt_count=8)
    queue(database, catalog)
    worker = worker_process(database_urls, "--poll-seconds", "0.2")
    wait_for(lambda: count_rows("evaluation_trials", org) >= 1)
    worker.send_signal(signal.SIGTERM)
    output, _ = worker.communicate(timeout=20)
    assert worker.returncode == 0, output
    assert "Worker stopped" in output
    run = rows(database, org.id, "SELECT status, lease_owner, attempts FROM evaluation_runs")[0]
    assert (run.status, run.lease_owner, run.attempts) == ("queued", None, 0)
    done = count_rows("evaluation_trials", org)
    assert 1 <= done < 8
    work(database)
    assert count_rows("evaluation_trials", org) == 8


@pytest.mark.slow
@pytest.mark.fault
def test_two_workers_on_20_queued_runs_claim_each_once(database, database_urls, org):
    catalog = make_catalog(database, org.id, {"kind": "scripted", "skill": 0.7, "stepDelayS": 0.01}, attempt_count=2)
    queue(database, catalog, count=20)
    workers = [worker_process(database_urls, "--until-idle", "--concurrency", "2") for _ in range(2)]
    outputs = [w.communicate(timeout=120)[0] for w in workers]
    assert all(w.returncode == 0 for w in workers), outputs
    processed = [int(o.rsplit("after ", 1)[1].split()[0]) for o in outputs]
    assert sum(processed) == 20 and all(p > 0 for p in processed)
    runs = rows(
        database,
        org.id,
        "SELECT status, attempts, (SELECT count(*) FROM evaluation_trials t "
        "WHERE t.evaluation_run_id = r.id) AS trials FROM evaluation_runs r",
    )
    assert len(runs) == 20
    assert {(r.status, r.attempts, r.trials) for r in runs} == {("completed", 1, 2)}


@pytest.mark.slow
def test_an_enqueued_run_wakes_an_idle_worker(database, database_urls, org):
    catalog = make_catalog(database, org.id, PERFECT, attempt_count=1)
    worker = worker_process(database_urls, "--poll-seconds", "60")

    def listening() -> bool:  # the worker's listener (same role as this session) has gone idle on LISTEN
        found = rows(
            database,
            org.id,
            "SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'idle' AND query = :listen",
            listen=f"LISTEN {RUNS_CHANNEL}",
        )
        return found[0].n == 1

    try:
        wait_for(listening, timeout=20)
        queue(database, catalog)
        wait_for(lambda: rows(database, org.id, "SELECT status FROM evaluation_runs")[0][0] == "completed", timeout=10)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=20)


@pytest.mark.slow  # starts agent processes
@pytest.mark.fault
def test_an_agent_printing_nan_and_infinity_is_recorded_and_its_artifact_is_json(database, org):
    # Python's json.dumps prints NaN and Infinity for float("nan") and float("inf"); neither is JSON, and PostgreSQL's
    # jsonb refuses them. The trial is recorded with them as text; its artifact and the export stay valid JSON.
    catalog = make_catalog(database, org.id, command_agent("misbehave.py", "not-a-number"), attempt_count=2)
    queue(database, catalog)
    assert work(database) == 1
    (run,) = rows(database, org.id, "SELECT status, error FROM evaluation_runs")
    assert (run.status, run.error) == ("completed", None)
    trials = rows(database, org.id, "SELECT steps, trajectory_artifact_id FROM evaluation_trials ORDER BY 1")
    assert len(trials) == 2
    for trial in trials:
        call = next(step for step in trial.steps if step.get("tool") == "list_inventory")
        assert call["toolCalls"][0]["arguments"] == {"limit": "NaN", "offset": "-Infinity"}
        sql = f"SELECT {TRAJECTORY_BODY} AS body {TRAJECTORY_FILES} WHERE a.id = :id"
        (body,) = rows(database, org.id, sql, id=trial.trajectory_artifact_id)
        document = json.loads(body.body, parse_constant=lambda name: pytest.fail(f"{name} in the artifact"))
        steps = json.loads(document["trajectory"], parse_constant=lambda name: pytest.fail(f"{name} in the steps"))
        assert any(s.get("command", "").startswith("list_inventory") for s in steps["steps"])


def test_a_trial_refused_for_another_reason_than_its_number_being_taken_is_never_skipped(
    database, make_org, monkeypatch
):
    """A worker skips a trial another worker recorded first (the run's unique trial number); any other refusal of the
    trial's write (here a NOT NULL column, as a dataset run's rollup once refused a trial never scored) hands the run
    back with the error, never completes it without the trial."""
    import worker.loop

    org = make_org("Acme RL")
    catalog = make_catalog(database, org.id, PERFECT, 2)
    (run_id,) = queue(database, catalog)
    real = worker.loop.record_trial

    def refused(session, run, number, seed, outcome, **kwargs):
        real(session, run, number, seed, outcome, **kwargs)
        session.execute(text("CREATE TEMPORARY TABLE refusal (x int NOT NULL) ON COMMIT DROP"))
        session.execute(text("INSERT INTO refusal VALUES (NULL)"))

    monkeypatch.setattr(worker.loop, "record_trial", refused)
    work(database, max_run_attempts=1)
    status, error, trials = rows(
        database,
        org.id,
        "SELECT r.status, r.error, (SELECT count(*) FROM evaluation_trials t WHERE t.evaluation_run_id = r.id) "
        "FROM evaluation_runs r WHERE r.id = :id",
        id=run_id,
    )[0]
    assert (status, trials) == ("failed", 0), (status, error)
    assert "IntegrityError" in error and "refusal" in error, error
