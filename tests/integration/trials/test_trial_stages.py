"""Stage filters read trial_stages (migration 0024): every writer's trials are found by their stage results, a trial
whose reward or metrics change is found by its new ones, and the runtime role can read the table but never write it
(tried as the runtime role of one organization, against its own rows and another's)."""

from __future__ import annotations

import json

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, ProgrammingError

from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog, seed_org_rows, writable_copy
from tests.helpers import api_ids, import_ndjson, line, ndjson, sql_ids
from tests.integration.importers.test_harbor_import import FIXTURE, JOB, import_harbor
from tests.worlds import shared_world, world_or

NOVICE = {"kind": "scripted", "skill": 0.3}
PASSED = "(t.metrics ->> :key)::float8 = 1"
FAILED = "(t.metrics ->> :key)::float8 < 1"


@shared_world
def shared_stages(request):
    """Trials written by the worker's record_trial, by the NDJSON import and by the Harbor import, and their member
    logged in (the module's `api`); built once for the tests that only read them."""
    database = request.getfixturevalue("database")
    member = request.getfixturevalue("make_member")("ann@acme.test", "Acme RL", "member")
    api = ApiClient(request.getfixturevalue("app").test_client(), member)
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=8, config_name="novice"), 2)
    lines = [line("x-1", 1, 1.0), line("x-2", 2, 0.5), line("x-3", 3, 0.0), line("x-4", 4, None)]
    assert import_ndjson(api, ndjson(*lines)).status_code == 201
    harbor = writable_copy(FIXTURE, request.getfixturevalue("tmp_path_factory").mktemp("harbor") / "harbor")
    assert import_harbor(request.getfixturevalue("runner"), harbor / JOB).exit_code == 0
    return {"member": member, "api": api}


@pytest.fixture
def written_every_way(shared_stages):
    return shared_stages


@pytest.fixture
def member(request, make_member):
    """The member who reads `written_every_way` in a test on it; else a member of a new, empty Acme RL."""
    return world_or(
        request,
        "written_every_way",
        "member",
        lambda: make_member("ann@acme.test", request.getfixturevalue("acme"), "member"),
    )


@pytest.fixture
def api(request, client, member):
    """`member` logged in."""
    return world_or(request, "written_every_way", "api", lambda: ApiClient(client, member))


@pytest.mark.parametrize(
    "key",
    ["stage_inventory", "stage_order", "stage_checkout", "stage_counted", "stage_written", "stage_content_ok"],
)
def test_stage_filters_list_exactly_the_trials_whose_metrics_say_so(api, database, member, written_every_way, key):
    for parameter, where in (("stagePassed", PASSED), ("stageFailed", FAILED)):
        expected = sql_ids(database, member.org.id, f"t.metrics ? :key AND {where}", key=key)
        assert set(api_ids(api, f"{parameter}={key}")) == expected, (parameter, key)
        assert set(api_ids(api, f"{parameter}={key}&sort=newest")) == expected, (parameter, key)
    passed = sql_ids(database, member.org.id, f"t.metrics ? :key AND {PASSED}", key=key)
    failed = sql_ids(database, member.org.id, f"t.metrics ? :key AND {FAILED}", key=key)
    assert passed or failed, key  # every writer reported this stage somewhere


def test_the_harbor_job_and_the_import_are_each_found_by_their_own_stages(api, written_every_way):
    # The fixture's four Harbor trials: file_exists 1, 0, 1, 1 and content_ok 1, 0, 1, 0 (verifier/reward.json).
    assert len(api_ids(api, "stagePassed=stage_file_exists")) == 3
    assert len(api_ids(api, "stageFailed=stage_content_ok")) == 2
    assert len(api_ids(api, "stagePassed=stage_file_exists&stageFailed=stage_content_ok")) == 1
    # x-2 (0.5 written, counted) and x-3 (both 0) failed stage_written; x-4 was unscored but reported 0 too.
    assert len(api_ids(api, "stageFailed=stage_written&stagePassed=stage_counted")) == 1
    assert len(api_ids(api, "stageFailed=stage_written,stage_counted")) == 2


KINDS = {
    "all": "t.reward IS NOT NULL",
    "failed": "t.reward < 1",
    "successful": "t.reward = 1",
    "recovery": "t.reward > 0 AND t.reward < 1",
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "query",
    ["stagePassed=stage_inventory", "stageFailed=stage_order", "stagePassed=stage_file_exists&rewardBand=failed"],
)
def test_each_exports_kind_holds_exactly_its_rollouts_with_those_stage_results(
    api, database, member, written_every_way, kind, query
):
    response = api.get(f"/api/v1/rollouts?kind={kind}&{query}")
    assert response.status_code == 200
    exported = {json.loads(raw)["rolloutId"] for raw in response.text.splitlines()}
    stages = " AND ".join(
        (PASSED if name == "stagePassed" else FAILED).replace(":key", f"'{key}'")
        for name, key in (part.split("=") for part in query.split("&"))
        if name.startswith("stage")
    )
    band = " AND t.reward < 1" if "rewardBand=failed" in query else ""
    with database.session(member.org.id) as session:
        expected = set(
            session.execute(
                text(f"""SELECT r.id::text FROM rollouts r JOIN evaluation_trials t ON t.id = r.evaluation_trial_id
                         WHERE {KINDS[kind]} AND {stages}{band}""")
            ).scalars()
        )
    assert exported == expected, (kind, query)
    assert expected or kind != "all", query


def test_a_trial_whose_reward_and_metrics_change_is_found_by_its_new_results(api, database, member, owner_engine):
    finish_runs(database, make_catalog(database, member.org.id, NOVICE, attempt_count=4, config_name="novice"), 1)
    failed = api_ids(api, "stageFailed=stage_checkout")
    assert failed
    changed = failed[0]
    with owner_engine.begin() as conn:  # no product path rewrites a trial: the migration's trigger keeps up anyway
        conn.execute(text("SELECT set_config('app.current_org', :org, true)"), {"org": str(member.org.id)})
        conn.execute(
            text("""UPDATE evaluation_trials SET reward = 1, status = 'succeeded',
                    metrics = '{"stage_inventory": 1, "stage_order": 1, "stage_checkout": 1}' WHERE id = :id"""),
            {"id": changed},
        )
    assert changed not in api_ids(api, "stageFailed=stage_checkout")
    assert changed in api_ids(api, "stagePassed=stage_checkout")
    assert api_ids(api, "stagePassed=stage_checkout&rewardBand=successful")[0] == changed
    expected = sql_ids(database, member.org.id, f"{PASSED}", key="stage_checkout")
    assert set(api_ids(api, "stagePassed=stage_checkout")) == expected


@pytest.fixture
def two_orgs(database, make_member):
    """Organizations A and B, each with one row in every org-scoped table (a trial with two stage results)."""
    a, b = make_member("ann@a.test", "Org A").org, make_member("bob@b.test", "Org B").org
    return seed_org_rows(database, a.id), seed_org_rows(database, b.id)


def stage_rows(database, org_id) -> list[tuple]:
    with database.session(org_id) as session:
        return session.execute(text("SELECT stage_key, passed, failed_rank FROM trial_stages ORDER BY stage_key")).all()


@pytest.mark.leak
def test_the_runtime_role_reads_its_own_stage_results_only(database, two_orgs):
    a, b = two_orgs
    # seed_org_rows' trial: reward 0.5, stage_inventory 1 and stage_checkout 0
    assert stage_rows(database, a.org_id) == [("stage_checkout", False, 2), ("stage_inventory", True, 2)]
    with database.session(a.org_id) as session:
        assert (
            session.execute(
                text("SELECT count(*) FROM trial_stages WHERE evaluation_trial_id = :b"), {"b": b.trial_id}
            ).scalar()
            == 0
        )


@pytest.mark.parametrize(
    "statement",
    [
        # forge a result for one's own trial, or plant one in another organization
        "INSERT INTO trial_stages VALUES (:a, 'stage_checkout', true, 0, :a_trial)",
        "INSERT INTO trial_stages VALUES (:b, 'stage_checkout', true, 0, :b_trial)",
        "UPDATE trial_stages SET passed = true",
        "DELETE FROM trial_stages",
        "TRUNCATE trial_stages",
        "ALTER TABLE evaluation_trials DISABLE TRIGGER trial_stages_on_insert",
    ],
)
@pytest.mark.leak
def test_the_runtime_role_cannot_write_stage_results(database, two_orgs, statement):
    a, b = two_orgs
    params = {"a": a.org_id, "a_trial": a.trial_id, "b": b.org_id, "b_trial": b.trial_id}
    with database.session(a.org_id) as session, pytest.raises(ProgrammingError) as raised:
        session.execute(text(statement), params)
    assert isinstance(raised.value.orig, psycopg.errors.InsufficientPrivilege)
    assert stage_rows(database, a.org_id) == [("stage_checkout", False, 2), ("stage_inventory", True, 2)]
    assert stage_rows(database, b.org_id) == [("stage_checkout", False, 2), ("stage_inventory", True, 2)]


@pytest.mark.leak
def test_a_trial_inserted_for_another_organization_writes_no_stage_result_there(database, two_orgs):
    a, b = two_orgs
    with database.session(a.org_id) as session, pytest.raises((ProgrammingError, IntegrityError)):
        session.execute(
            text("""INSERT INTO evaluation_trials (organization_id, id, evaluation_run_id, environment_version_id,
                        trial_number, seed, status, reward, metrics)
                    VALUES (:b, gen_random_uuid(), :run, :version, 9, 0, 'succeeded', 1, '{"stage_smuggled": 1}')"""),
            {"b": b.org_id, "run": b.run_id, "version": b.version_id},
        )
    assert stage_rows(database, b.org_id) == [("stage_checkout", False, 2), ("stage_inventory", True, 2)]


def test_a_trial_holds_one_result_per_stage(database, two_orgs, owner_engine):
    """The key (migration 0038) refuses a second result of a stage for one trial, even from the owner."""
    a, _ = two_orgs
    with owner_engine.begin() as conn, pytest.raises(IntegrityError) as raised:
        conn.execute(text("SELECT set_config('app.current_org', :org, true)"), {"org": str(a.org_id)})
        conn.execute(
            text("INSERT INTO trial_stages VALUES (:org, 'stage_checkout', true, 2, :trial)"),
            {"org": a.org_id, "trial": a.trial_id},
        )
    assert isinstance(raised.value.orig, psycopg.errors.UniqueViolation)
    assert stage_rows(database, a.org_id) == [("stage_checkout", False, 2), ("stage_inventory", True, 2)]
