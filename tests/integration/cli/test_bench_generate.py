"""The benchmark generator writes history the app accepts, with rollups equal to what the worker would write."""

from __future__ import annotations

from sqlalchemy import text

from bench.generate import ORGS, check_rollups, ensure_catalog, generate_runs
from domain.scoring import pass_at_k_table
from queries.search import search_conditions
from tests.helpers import marked, parse


def test_generated_history_is_consistent_and_the_check_catches_drift(database, auth, client, count_rows):
    org_id, catalog = ensure_catalog(database, *ORGS[0])
    assert len(catalog) == ORGS[0][2]
    for version_id, env_name, config_id in catalog[:2]:
        generate_runs(database, org_id, version_id, env_name, config_id, runs=3)
    assert check_rollups(database) == []

    trials, rollouts = count_rows("evaluation_trials", org_id), count_rows("rollouts", org_id)
    with database.session(org_id) as session:
        runs = session.execute(
            text("""SELECT r.pass_at_k, count(*) FILTER (WHERE t.reward = 1)
            FROM evaluation_runs r JOIN evaluation_trials t ON t.evaluation_run_id = r.id
            GROUP BY r.organization_id, r.id""")
        ).all()
    assert trials == rollouts == 48
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
    generate_runs(database, org_id, version_id, env_name, config_id, runs=25)
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
