"""Schema rules PostgreSQL enforces: ranges, uniqueness, immutability, and models equal to the migrations."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from models import Base
from tests.factories import seed_org_rows


@pytest.fixture
def rows(database, make_org):
    return seed_org_rows(database, make_org("Acme RL").id)


def run_sql(database, org_id, statement, **params):
    with database.session(org_id) as session, session.begin():
        return session.execute(text(statement), params)


def test_updating_an_environment_version_raises(database, rows):
    """The runtime role has no UPDATE/DELETE grant on versions; the row stays as written."""
    for statement in ("UPDATE environment_versions SET version = 9", "DELETE FROM environment_versions"):
        with pytest.raises(DBAPIError, match="permission denied for table environment_versions"):
            run_sql(database, rows.org_id, statement)
    assert run_sql(database, rows.org_id, "SELECT version FROM environment_versions").scalar() == 1


def test_updating_or_deleting_an_artifact_raises(database, rows):
    for statement in ("UPDATE artifacts SET filename = 'x'", "DELETE FROM artifacts"):
        with pytest.raises(DBAPIError, match="permission denied for table artifacts"):
            run_sql(database, rows.org_id, statement)
    assert run_sql(database, rows.org_id, "SELECT filename FROM artifacts").scalar() == "trial-1-trajectory.json"


@pytest.mark.parametrize(
    ("table", "statement"),
    [
        ("environment_versions", "UPDATE environment_versions SET spec = '{}'"),
        ("environment_versions", "DELETE FROM environment_versions"),
        ("artifacts", "UPDATE artifacts SET body = ''"),
        ("artifacts", "DELETE FROM artifacts"),
    ],
)
def test_even_the_owner_role_cannot_edit_immutable_rows(owner_engine, rows, table, statement):
    """The trigger stops every role, including the table owner."""
    with pytest.raises(DBAPIError, match=f"{table} rows are immutable"), owner_engine.begin() as conn:
        conn.execute(text("SELECT set_config('app.current_org', :o, true)"), {"o": str(rows.org_id)})
        conn.execute(text(statement))


@pytest.mark.parametrize("attempts", [0, 9, -1])
@pytest.mark.bad_input
def test_attempt_count_outside_1_to_8_is_rejected(database, rows, attempts):
    with pytest.raises(IntegrityError, match="attempt_count_range"):
        run_sql(database, rows.org_id, "UPDATE evaluator_configs SET attempt_count = :n", n=attempts)
    with pytest.raises(IntegrityError, match="attempt_count_range"):
        run_sql(database, rows.org_id, "UPDATE evaluation_runs SET attempt_count = :n", n=attempts)


@pytest.mark.parametrize("attempts", [1, 8])
def test_attempt_count_at_the_bounds_is_accepted(database, rows, attempts):
    # Accepted means a row took the value: an UPDATE that matched nothing would pass without testing anything.
    for table in ("evaluator_configs", "evaluation_runs"):
        changed = run_sql(database, rows.org_id, f"UPDATE {table} SET attempt_count = :n", n=attempts).rowcount
        assert changed >= 1, table
    with database.session(rows.org_id) as session:
        assert session.execute(text("SELECT DISTINCT attempt_count FROM evaluator_configs")).scalars().all() == [
            attempts
        ]


def test_trial_numbers_start_at_one_and_are_unique_per_run(database, rows):
    with pytest.raises(IntegrityError, match="trial_number_positive"):
        run_sql(database, rows.org_id, "UPDATE evaluation_trials SET trial_number = 0")
    insert = (
        "INSERT INTO evaluation_trials (organization_id, id, evaluation_run_id, environment_version_id, trial_number,"
        " seed, status, metrics, log_excerpt)"
        " VALUES (:org, gen_random_uuid(), :run, :version, 1, 1, 'failed', '{}', '')"
    )
    with pytest.raises(IntegrityError, match="uq_evaluation_trials_trial_number_per_run"):
        run_sql(database, rows.org_id, insert, org=rows.org_id, run=rows.run_id, version=rows.version_id)


@pytest.mark.parametrize("reward", [-0.01, 1.01])
@pytest.mark.bad_input
def test_reward_outside_0_to_1_is_rejected(database, rows, reward):
    for table in ("evaluation_trials", "rollouts"):
        with pytest.raises(IntegrityError, match="reward_range"):
            run_sql(database, rows.org_id, f"UPDATE {table} SET reward = :r", r=reward)


@pytest.mark.parametrize("reward", [None, 0.0, 1.0])
def test_reward_null_or_in_range_is_accepted(database, rows, reward):
    for table in ("rollouts", "evaluation_trials"):
        assert run_sql(database, rows.org_id, f"UPDATE {table} SET reward = :r", r=reward).rowcount >= 1, table
    with database.session(rows.org_id) as session:
        assert session.execute(text("SELECT DISTINCT reward FROM rollouts")).scalars().all() == [reward]


@pytest.mark.bad_input
def test_a_trial_status_outside_the_vocabulary_is_rejected(database, rows):
    with pytest.raises(IntegrityError, match="status_known"):
        run_sql(database, rows.org_id, "UPDATE evaluation_trials SET status = 'completed'")
    with pytest.raises(IntegrityError, match="status_known"):
        run_sql(database, rows.org_id, "UPDATE evaluation_runs SET status = 'finished'")
    for status in ("succeeded", "failed", "error"):
        assert run_sql(database, rows.org_id, "UPDATE evaluation_trials SET status = :s", s=status).rowcount >= 1


def test_reset_mode_names_the_run_it_resets(database, rows):
    with pytest.raises(IntegrityError, match="reset_names_its_run"):
        run_sql(database, rows.org_id, "UPDATE evaluation_runs SET reset_mode = 'new_world'")
    with pytest.raises(IntegrityError, match="reset_mode_known"):
        run_sql(database, rows.org_id, "UPDATE evaluation_runs SET reset_mode = 'sideways', reset_of_run_id = id")


def test_runs_are_numbered_within_their_version_on_insert(database, rows):
    insert = (  # two runs in one statement: the trigger numbers each after the one before
        "INSERT INTO evaluation_runs (organization_id, id, environment_version_id, evaluator_config_id, "
        "attempt_count, reset_mode, status, attempts) SELECT organization_id, gen_random_uuid(), "
        "environment_version_id, evaluator_config_id, 1, 'initial', 'queued', 0 "
        "FROM evaluation_runs CROSS JOIN generate_series(1, 2) "
        "WHERE id = :id"
    )
    run_sql(database, rows.org_id, insert, id=rows.run_id)
    numbers = (
        run_sql(
            database,
            rows.org_id,
            "SELECT sequence_number FROM evaluation_runs WHERE dataset_run_id IS NULL ORDER BY sequence_number",
        )
        .scalars()
        .all()
    )
    assert numbers == [1, 4, 5]  # the seeded run, then the seeded dataset run's two (2, 3), then these two
    with pytest.raises(IntegrityError, match="ux_evaluation_runs_org_version_sequence"):
        run_sql(database, rows.org_id, "UPDATE evaluation_runs SET sequence_number = 1")


def test_migrations_match_the_models(owner_engine):
    """The ORM models and the migrated schema describe the same tables (no drift)."""
    with owner_engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []
