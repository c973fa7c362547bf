"""The benchmark generator writes history the app accepts, with rollups equal to what the worker would write."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from sqlalchemy import select, text

from bench.generate import (
    ATTEMPTS,
    CONTENTS_TABLE,
    ORGS,
    check_rollups,
    ensure_catalog,
    generate,
)
from domain.outcome import TrialOutcome
from domain.scoring import pass_at_k_table
from domain.trajectory import structured
from models import EvaluationRun
from queries.search import search_conditions
from queries.trials import TRAJECTORY_BODY
from tests.helpers import marked, parse
from writes.runs import record_trial


def test_generated_history_is_consistent_and_the_check_catches_drift(database, auth, client, count_rows):
    org_id, catalog = ensure_catalog(database, *ORGS[0])
    assert len(catalog) == ORGS[0][2]
    assert generate(database, [(org_id, *entry) for entry in catalog[:2]], runs_per_version=3) == 48
    assert check_rollups(database) == []

    trials, rollouts = count_rows("evaluation_trials", org_id), count_rows("rollouts", org_id)
    with database.session(org_id) as session:
        runs = session.execute(
            text("""SELECT r.pass_at_k, count(*) FILTER (WHERE t.reward = 1)
            FROM evaluation_runs r JOIN evaluation_trials t ON t.evaluation_run_id = r.id
            GROUP BY r.organization_id, r.id""")
        ).all()
    assert trials == rollouts == 48
    with database.session(org_id) as session:
        versions = (
            session.execute(
                text("""SELECT DISTINCT uuid_extract_version(id) FROM (SELECT id FROM evaluation_runs UNION ALL
                    SELECT id FROM evaluation_trials UNION ALL SELECT id FROM artifacts UNION ALL
                    SELECT id FROM rollouts) ids""")
            )
            .scalars()
            .all()
        )
    assert versions == [7], "ids are time-ordered like the app's own (models.base.new_id)"
    assert all(stored == pass_at_k_table(8, successes) for stored, successes in runs)

    auth.login(ORGS[0][1], "bench-password")
    lines = client.get("/api/v1/rollouts?kind=all").get_data(as_text=True).splitlines()
    assert len(lines) == 48

    with database.admin_session(org_id) as session, session.begin():
        session.execute(text("UPDATE stage_metric_rollups SET passed = passed + 1 WHERE stage_key = 'stage_order'"))
    problems = check_rollups(database)
    assert problems and "stage_metric_rollups rows differ" in problems[0]
    with database.admin_session(org_id) as session, session.begin():
        session.execute(text("UPDATE stage_metric_rollups SET passed = passed - 1 WHERE stage_key = 'stage_order'"))
        session.execute(text("UPDATE evaluator_category_counts SET trials = trials + 1 WHERE failure_category = ''"))
    drift = [problem.split(": ", 1)[1] for problem in check_rollups(database)]
    assert drift == ["2 evaluator_category_counts rows differ from the trials"]  # the two versions' '' rows


def test_generated_trials_carry_realistic_searchable_steps(database, auth, client):
    org_id, catalog = ensure_catalog(database, *ORGS[0])
    version_id, env_name, config_id = catalog[0]
    assert generate(database, [(org_id, version_id, env_name, config_id)], runs_per_version=25) == 200
    counts = {}
    with database.session(org_id) as session:
        for q in ("restock_item", "denied", '"nightly reconciliation"', "SKU-*", "/srv/warehouse/ledger.log"):
            where = search_conditions(q, "t")
            counts[q] = session.execute(
                text(f"SELECT count(*) FROM evaluation_trials t WHERE {where.sql}"), where.params
            ).scalar()
        # A trial whose shell step did not time out (a timeout's observation is one short line by design).
        steps = session.execute(text("SELECT steps FROM evaluation_trials WHERE seed % 10 <> 3 LIMIT 1")).scalar()
    assert counts["restock_item"] == counts["SKU-*"] == counts["/srv/warehouse/ledger.log"] == 200
    assert 0 < counts["denied"] < 100 and 50 < counts['"nightly reconciliation"'] < 200
    assert [step["tool"] for step in steps] == ["list_inventory", "read_file", "run_shell", "restock_item", None]
    assert all(len(step["observation"]) > 100 for step in steps[:3]) and "\n" in steps[0]["observation"]
    auth.login(ORGS[0][1], "bench-password")
    listing = client.get("/trials?q=restock_item").get_data(as_text=True)
    assert any("[restock]_[item]" in marked(snippet) for snippet in parse(listing).select("span.snippet"))


SAMPLE = 8
# What a trial row carries that the worker computes from the trial (beside the trial's own values).
DERIVED = "search_vector, steps_too_deep, no_steps, trial_agent_steps(steps)"


def _trial_row(session, trial_id):
    return (
        session.execute(
            text(f"""SELECT t.status, t.reward, t.failure_category, t.metrics, t.steps, t.tools, t.task, t.log_excerpt,
                        {DERIVED}, ro.reward AS rollout_reward, a.filename, a.size, a.sha256,
                        a.body IS NULL AS rendered, a.id = t.id AS own_id, {TRAJECTORY_BODY} AS body,
                        (SELECT array_agg(ARRAY[s.stage_key, s.passed::text, s.failed_rank::text] ORDER BY s.stage_key)
                         FROM trial_stages s WHERE s.evaluation_trial_id = t.id) AS stages
                 FROM evaluation_trials t JOIN artifacts a ON a.id = t.trajectory_artifact_id
                 LEFT JOIN rollouts ro ON ro.evaluation_trial_id = t.id WHERE t.id = :id"""),
            {"id": trial_id},
        )
        .one()
        ._asdict()
    )


def _outcome(row) -> TrialOutcome:
    """The generated trial as the worker's TrialOutcome (what its agent, environment and verifier produced)."""
    return TrialOutcome(
        status=row["status"],
        reward=row["reward"],
        failure_category=row["failure_category"],
        stages=row["metrics"],
        steps=[structured(step) for step in row["steps"]],
        log=row["log_excerpt"],
        task=row["task"],
        tools=row["tools"],
        started_at=datetime.now(UTC),
    )


def test_generated_trials_equal_what_the_worker_records_for_the_same_trials(database, owner_engine):
    """A sample of generated trials recorded again through the worker's own statement (record_trial, which the
    importers use too): the same search vector, derived flags, stage results, rollout and trajectory document, and
    the rollups still equal the raw trials after both. The bulk path rebuilds every index it dropped."""
    org_id, catalog = ensure_catalog(database, *ORGS[0])
    versions = [(org_id, *entry) for entry in catalog[:2]]
    indexes = "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname"
    with owner_engine.connect() as conn:
        before = conn.execute(text(indexes)).scalars().all()
    assert generate(database, versions, runs_per_version=5, bulk=True) == 80
    with owner_engine.connect() as conn:
        assert conn.execute(text(indexes)).scalars().all() == before
        assert conn.execute(text(f"SELECT to_regclass('{CONTENTS_TABLE}')")).scalar() is None
    assert check_rollups(database) == []

    with database.session(org_id) as session, session.begin():
        sample = session.execute(
            text("SELECT id, evaluation_run_id FROM evaluation_trials ORDER BY md5(id::text) LIMIT :n"),
            {"n": SAMPLE},
        ).all()
        pairs = []
        for number, (trial_id, run_id) in enumerate(sample, start=ATTEMPTS + 1):
            generated = _trial_row(session, trial_id)
            run = session.execute(select(EvaluationRun).where(EvaluationRun.id == run_id)).scalar_one()
            recorded = record_trial(session, run, number, 1, _outcome(generated))
            pairs.append((generated, _trial_row(session, recorded.id)))
    assert check_rollups(database) == []

    statuses = {generated["status"] for generated, _ in pairs}
    assert statuses == {"succeeded", "failed"}, "the sample should hold both kinds of trial"
    for generated, worker in pairs:
        for field in ("search_vector", "steps_too_deep", "no_steps", "trial_agent_steps", "stages", "metrics"):
            assert generated[field] == worker[field], field
        assert generated["rollout_reward"] == worker["rollout_reward"] == generated["reward"]
        for row in (generated, worker):  # a trajectory file rendered from its trial, under the trial's id
            assert row["rendered"] and row["own_id"]
            assert hashlib.sha256(row["body"]).hexdigest() == row["sha256"] and row["size"] == len(row["body"])
        assert generated["filename"].endswith("-trajectory.json") and worker["filename"].endswith("-trajectory.json")
        assert bytes(generated["body"]) == bytes(worker["body"])
        document = json.loads(generated["body"])
        assert document["schemaVersion"] == 1 and document["log"] == generated["log_excerpt"]
        assert json.loads(document["trajectory"]) == {"steps": generated["steps"]}
