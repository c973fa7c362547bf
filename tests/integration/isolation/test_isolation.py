"""Row-level security, proven as the runtime role: each organization sees and writes only its own rows."""

from __future__ import annotations

import psycopg.errors
import pytest
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.orm import sessionmaker

from db.session import Database, _scope_transaction_to_org
from db.urls import RUNTIME_ROLE, sqlalchemy_url
from models import Base, Environment, EnvironmentVersion
from models.base import new_id
from tests.factories import seed_org_rows
from tests.helpers import sqlstate

pytestmark = pytest.mark.leak

ORG_TABLES = [t.name for t in Base.metadata.sorted_tables if "organization_id" in t.c]


@pytest.fixture
def two_orgs(database, make_member):
    """Organizations A and B, each with a member and one row in every org-scoped table."""
    a, b = make_member("ann@a.test", "Org A").org, make_member("bob@b.test", "Org B").org
    return seed_org_rows(database, a.id), seed_org_rows(database, b.id)


def test_tests_connect_as_the_runtime_role(database):
    with database.engine.connect() as conn:
        role = conn.execute(text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")).one()
        assert conn.execute(text("SELECT current_user")).scalar() == RUNTIME_ROLE
    assert tuple(role) == (False, False)


@pytest.mark.parametrize("table", ORG_TABLES)
def test_select_without_where_returns_only_the_current_orgs_rows(database, two_orgs, table):
    a, _ = two_orgs
    with database.session(a.org_id) as session:
        orgs = session.execute(text(f"SELECT DISTINCT organization_id FROM {table}")).scalars().all()
    assert orgs == [a.org_id]


@pytest.mark.parametrize("table", ORG_TABLES)
def test_no_org_set_returns_zero_rows(database, two_orgs, table):
    with database.session(None) as session:
        assert session.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0
    with database.engine.connect() as conn:  # a bare connection that never set app.current_org
        assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0


def test_only_the_current_organization_is_visible(database, two_orgs):
    a, _ = two_orgs
    with database.session(a.org_id) as session:
        assert session.execute(text("SELECT id FROM organizations")).scalars().all() == [a.org_id]


def test_insert_with_another_orgs_id_fails_with_42501(database, two_orgs, count_rows):
    a, b = two_orgs
    with database.session(a.org_id) as session, pytest.raises(ProgrammingError) as raised:
        session.add(Environment(organization_id=b.org_id, id=new_id(), name="smuggled", description=""))
        session.flush()
    assert isinstance(raised.value.orig, psycopg.errors.InsufficientPrivilege)
    assert sqlstate(raised.value) == "42501"
    assert count_rows("environments", b.org_id, "name = 'smuggled'") == 0


def test_update_and_delete_of_another_orgs_rows_touch_nothing(database, two_orgs, count_rows):
    a, b = two_orgs
    with database.session(a.org_id) as session, session.begin():
        updated = session.execute(
            text("UPDATE environments SET name = 'hijacked' WHERE id = :id"), {"id": b.environment_id}
        )
        deleted = session.execute(
            text("DELETE FROM failure_category_counts WHERE organization_id = :org"), {"org": b.org_id}
        )
        moved = session.execute(
            text("UPDATE environments SET organization_id = :b WHERE id = :id"), {"b": b.org_id, "id": b.environment_id}
        )
    assert (updated.rowcount, deleted.rowcount, moved.rowcount) == (0, 0, 0)
    with database.session(b.org_id) as session:
        assert session.get(Environment, (b.org_id, b.environment_id)).name == "admin-console"
    assert count_rows("failure_category_counts", b.org_id) == 1


def test_moving_an_own_row_into_another_org_is_refused(database, two_orgs):
    a, b = two_orgs
    with database.session(a.org_id) as session, pytest.raises(ProgrammingError) as raised:
        session.execute(text("UPDATE environments SET description = 'x', organization_id = :b"), {"b": b.org_id})
    assert sqlstate(raised.value) == "42501"


def test_a_row_cannot_reference_another_orgs_row(database, two_orgs):
    """Composite foreign keys include organization_id: org A's version cannot hang off org B's environment."""
    a, b = two_orgs
    with database.session(a.org_id) as session, pytest.raises(IntegrityError) as raised:
        session.add(
            EnvironmentVersion(
                organization_id=a.org_id,
                id=new_id(),
                environment_id=b.environment_id,
                version=2,
                spec={},
                spec_sha256="0" * 64,
            )
        )
        session.flush()
    assert sqlstate(raised.value) == "23503"


def test_org_setting_does_not_survive_commit_on_a_pooled_connection(database_urls, two_orgs):
    a, _ = two_orgs
    engine = create_engine(sqlalchemy_url(database_urls.runtime), pool_size=1, max_overflow=0)
    database = Database.__new__(Database)
    database.urls, database.engine = database_urls, engine
    database._sessions = sessionmaker(engine)
    event.listen(database._sessions, "after_begin", _scope_transaction_to_org)
    try:
        with database.session(a.org_id) as session:
            pid_in_session = session.execute(text("SELECT pg_backend_pid()")).scalar()
            assert session.execute(text("SELECT count(*) FROM environments")).scalar() == 1
            session.commit()
        with engine.connect() as conn:  # the same pooled connection, no listener
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() == pid_in_session
            assert conn.execute(text("SELECT current_setting('app.current_org', true)")).scalar() in ("", None)
            assert conn.execute(text("SELECT count(*) FROM environments")).scalar() == 0
    finally:
        engine.dispose()


def test_runtime_role_cannot_switch_rls_off_or_change_the_schema(database, two_orgs):
    with database.engine.connect() as conn:
        with pytest.raises(DBAPIError):
            conn.execute(text("ALTER TABLE environments DISABLE ROW LEVEL SECURITY"))
        conn.rollback()
        conn.execute(text("SET row_security = off"))
        with pytest.raises(DBAPIError) as raised:  # off + a policy that would filter = error, never all rows
            conn.execute(text("SELECT count(*) FROM environments"))
        assert sqlstate(raised.value) == "42501"


def test_every_org_table_has_forced_rls_and_a_tenant_policy(owner_engine):
    """Guardrail: a new table with organization_id cannot ship without RLS."""
    with owner_engine.connect() as conn:
        tables = conn.execute(
            text(
                """
                SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
                       EXISTS (SELECT 1 FROM pg_policies p
                               WHERE p.tablename = c.relname AND p.policyname = 'tenant_isolation'
                                 AND p.cmd = 'ALL' AND p.roles = '{public}'
                                 AND p.qual LIKE '%app.current_org%' AND p.with_check LIKE '%app.current_org%')
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
                  AND EXISTS (SELECT 1 FROM pg_attribute a
                              WHERE a.attrelid = c.oid AND a.attname = 'organization_id' AND NOT a.attisdropped)
                ORDER BY c.relname
                """
            )
        ).all()
        runtime = conn.execute(
            text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :r"), {"r": RUNTIME_ROLE}
        ).one()
    assert sorted(row[0] for row in tables) == sorted(ORG_TABLES)
    assert [row for row in tables if not all(row[1:])] == []
    assert tuple(runtime) == (False, False)


def test_every_org_index_leads_with_organization_id(owner_engine):
    """Indexes on org tables lead with organization_id (the lookups before any organization is known excepted)."""
    inspector = inspect(owner_engine)
    # The login lookup of a user's memberships and the token and invitation lookups by hash (all before any
    # organization is known) are the documented exceptions; so is the full-text GIN index (a GIN
    # index cannot hold a uuid without btree_gin, which the embedded PostgreSQL lacks; RLS still filters its rows),
    # and the task key's hash index (a hash index holds one column; RLS filters the rows it finds).
    allowed = {
        "ix_evaluation_trials_search_vector",
        "ix_evaluation_trials_task_key",
        "ix_memberships_user_id",
        "ix_api_tokens_sha256",
        "ix_invitations_sha256",
    }
    offenders = [
        (table, index["name"])
        for table in ORG_TABLES
        for index in inspector.get_indexes(table)
        if index["column_names"][0] != "organization_id" and index["name"] not in allowed
    ]
    for table in ORG_TABLES:
        assert inspector.get_pk_constraint(table)["constrained_columns"][0] == "organization_id"
        for unique in inspector.get_unique_constraints(table):
            assert unique["column_names"][0] == "organization_id", (table, unique)
    assert offenders == []
