"""The live run page: what it says while a run is queued, running (with and without finished trials) and when it
completes, the block htmx swaps inside a section that stays, and numbers right-aligned."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from bs4 import Tag
from sqlalchemy import text

from domain.outcome import TrialOutcome
from models import EnvironmentVersion, EvaluationRun, EvaluatorConfig
from queries.runs import run_detail
from tests.factories import finish_run, make_catalog
from tests.helpers import attr, first_element, one, parse, texts
from writes.runs import enqueue_run, record_trial

SCRIPTED = {"kind": "scripted", "skill": 1.0}


@pytest.fixture
def catalog(database, member):
    return make_catalog(database, member.org.id, SCRIPTED, attempt_count=4)


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def words(node: str | Tag) -> str:
    """The text of a page (or of one of its elements) with tags dropped and whitespace collapsed."""
    return " ".join((parse(node) if isinstance(node, str) else node).get_text(" ").split())


def queue(database, catalog, attempts: int = 4) -> EvaluationRun:
    with database.session(catalog.org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (catalog.org_id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (catalog.org_id, catalog.config_id))
        return enqueue_run(session, version, config, attempts)


def trial_taking(seconds: float, reward: float, category: str | None) -> TrialOutcome:
    finished = datetime.now(UTC) - timedelta(minutes=1)
    return TrialOutcome(
        status="succeeded" if reward == 1 else "failed",
        reward=reward,
        failure_category=category,
        stages={"stage_a": 1.0 if reward == 1 else 0.0},
        steps=[],
        log="",
        started_at=finished - timedelta(seconds=seconds),
        finished_at=finished,
    )


def running(database, run: EvaluationRun, *, trial: int, step: int | None, trial_for_s: int, run_for_s: int) -> None:
    with database.session(run.organization_id) as session, session.begin():
        session.execute(
            text(
                """UPDATE evaluation_runs SET status = 'running', lease_owner = 'w', current_trial = :trial,
                   current_step = :step, started_at = now() - make_interval(secs => :run_for),
                   current_trial_started_at = now() - make_interval(secs => :trial_for),
                   lease_expires_at = now() + interval '1 minute' WHERE id = :id"""
            ),
            {"id": run.id, "trial": trial, "step": step, "run_for": run_for_s, "trial_for": trial_for_s},
        )


def test_a_queued_run_says_it_waits_for_a_worker(page, database, catalog):
    run = queue(database, catalog)
    body = words(page.get(f"/runs/{run.id}").text)
    assert "Queued: waiting for a worker to claim it." in body and "flask --app app worker" in body
    assert "0 of 4 trials" in body and "Trial 4 waiting" in body


def test_a_running_run_with_no_trial_done_says_what_it_is_doing(page, database, catalog):
    run = queue(database, catalog)
    running(database, run, trial=1, step=3, trial_for_s=40, run_for_s=45)
    html = page.get(f"/runs/{run.id}", headers={"HX-Request": "true"}).text
    body, now = words(html), words(one(html, "p.run-now"))
    assert "will pick this run up" not in body and "waiting for a worker" not in body
    assert re.search(r"Running trial 1 of 4, step 3 \(4\d s in\)\. Elapsed 4\d s\.", now), now
    assert "No trial has finished yet, so there is no estimate of the time left." in now
    assert "Trial 1 running: step 3" in body and "Trial 2 waiting" in body


def test_a_running_run_midway_estimates_the_time_left(page, database, catalog):
    run = queue(database, catalog)
    for number, (seconds, reward) in enumerate([(100, 1.0), (140, 0.0)], start=1):
        with database.session(catalog.org_id) as session, session.begin():
            record_trial(
                session,
                session.get_one(EvaluationRun, (catalog.org_id, run.id)),
                number,
                number,
                trial_taking(seconds, reward, None if reward == 1 else "gave_up"),
            )
    running(database, run, trial=3, step=None, trial_for_s=20, run_for_s=300)
    html = page.get(f"/runs/{run.id}", headers={"HX-Request": "true"}).text
    body, now = words(html), words(one(html, "p.run-now"))
    assert re.search(r"Running trial 3 of 4, starting \(2\d s in\)\. Elapsed 5 min 0\d s\.", now), now
    # two trials left at a mean of 120 s, less the 20-odd seconds the current one has run
    assert re.search(r"About 3 min [34]\d s left \(a finished trial took 2 min 00 s on average\)\.", now), now
    assert "Trial 3 running" in body and "Trial 4 waiting" in body


def test_the_estimate_is_the_mean_trial_time_for_each_trial_left(database, catalog):
    run = queue(database, catalog)
    for number, seconds in enumerate([100, 140], start=1):
        with database.session(catalog.org_id) as session, session.begin():
            record_trial(
                session,
                session.get_one(EvaluationRun, (catalog.org_id, run.id)),
                number,
                number,
                trial_taking(seconds, 1.0, None),
            )
    running(database, run, trial=3, step=7, trial_for_s=0, run_for_s=0)
    with database.session(catalog.org_id) as session:
        detail = run_detail(session, run.id)
    assert detail is not None
    started = detail.run.current_trial_started_at
    assert started is not None
    progress = detail.progress(started + timedelta(seconds=30))
    assert (progress.current_trial, progress.current_step, progress.pending) == (3, 7, [3, 4])
    assert progress.mean_trial_s == 120 and progress.trial_elapsed_s == 30
    assert progress.remaining_s == 120 * 2 - 30
    late = detail.progress(started + timedelta(seconds=500))
    assert late.remaining_s == 120  # an overdue trial counts as finished: the last one is still ahead


def test_a_completed_run_shows_its_summary_and_stops_polling(page, database, catalog):
    run_id = finish_run(database, catalog)
    with database.session(catalog.org_id) as session:
        detail = run_detail(session, run_id)
    assert detail is not None
    scored = [t.reward for t in detail.trials if t.reward is not None]
    assert len(scored) == len(detail.trials)  # every finished trial is scored
    categories: dict[str, int] = {}
    for t in detail.trials:
        if t.failure_category:
            categories[t.failure_category] = categories.get(t.failure_category, 0) + 1
    body_html = page.get(f"/runs/{run_id}").text
    summary = words(one(body_html, "p.run-now.run-summary"))
    assert parse(body_html).select('[hx-trigger="every 2s"]') == []  # polling stopped
    assert re.search(
        rf"Completed in \d+ s · mean reward {sum(scored) / len(scored):.3f} · {scored.count(1.0)} of 4 trials "
        "succeeded · failure categories: ",
        summary,
    ), summary
    for name, count in categories.items():
        assert f"{name} \u00d7 {count}" in summary  # "gave_up times 2"
    assert texts(body_html, "div.passk caption") == ["pass@k (unbiased, n = 4)"]


def test_the_polled_block_is_swapped_inside_a_section_that_stays(page, database, catalog):
    run = queue(database, catalog)
    full = page.get(f"/runs/{run.id}").text
    fragment = page.get(f"/runs/{run.id}", headers={"HX-Request": "true"}).text
    assert one(full, "section#run-status") and parse(fragment).select("#run-status") == []
    live = first_element(fragment)  # the block htmx swaps, whole
    assert live.name == "div" and attr(live, "id") == "run-live"
    assert attr(live, "hx-swap") == "outerHTML" and attr(live, "hx-trigger") == "every 2s"
    # the space the summary will take is there from the start
    assert "pass@k for k = 1..4 appears here when the run completes." in words(fragment)


def test_reward_stage_and_duration_cells_are_right_aligned(page, database, catalog):
    run_id = finish_run(database, catalog)
    body = page.get(f"/runs/{run_id}").text
    table = one(body, "table.run-trials")
    headers = [(th.get("class") == ["num"], th.get_text()) for th in table.select('th[scope="col"]')]
    assert {name for align, name in headers if align} >= {"Reward", "Duration", "stage_inventory", "stage_order"}
    rows = table.select("tbody > tr")
    assert len(rows) == 4
    for row in rows:
        cells = [td.get("class") == ["num"] for td in row.select(":scope > td")]
        assert cells == [False, False, True, False, True, True, True, True]


def test_the_worker_reports_its_trial_and_step_under_its_lease(database, catalog):
    from worker.loop import TrialProgress

    run = queue(database, catalog)
    running(database, run, trial=1, step=None, trial_for_s=0, run_for_s=0)  # lease_owner 'w'

    def where() -> tuple:
        with database.session(catalog.org_id) as session:
            return session.execute(
                text("SELECT current_trial, current_step, current_trial_started_at IS NOT NULL FROM evaluation_runs")
            ).one()

    progress = TrialProgress(database, run, "w", 2)
    assert where() == (2, None, True)
    progress.step(1)  # within the second since the last write: not written
    assert where() == (2, None, True)
    progress.written_at -= TrialProgress.INTERVAL_S
    progress.step(4)
    assert where() == (2, 4, True)
    TrialProgress(database, run, "another-worker", 3).step(9)  # not the lease holder: nothing changes
    assert where() == (2, 4, True)
