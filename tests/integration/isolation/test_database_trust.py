"""The database trusts nobody by location: attacks by a process that reaches the embedded cluster's socket.

Every test plays the attacker: a tenant's program that found the socket (and,
in the worst case, holds a runtime-role connection) tries to log in without
the password, to read other organizations' accounts, password hashes, login
sessions and API tokens, and to forge a login session.
"""

from __future__ import annotations

import hashlib
import os
import stat
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from db.cluster import EMBEDDED_ROLES, _replace_keeping_owner, passwords_dir, start_embedded_cluster
from db.urls import OWNER_ROLE, RUNTIME_ROLE, SUPERUSER, libpq_url, sqlalchemy_url
from tests.paths import ROOT
from writes.accounts import log_in, reserve_login_attempt
from writes.tokens import create_token

pytestmark = pytest.mark.leak


def conninfo(url: str, **override: str | None) -> str:
    """A libpq keyword string for `url`'s socket, user and database, with `override` applied (no password kept)."""
    parsed = make_url(url)
    params = {"host": parsed.query.get("host", parsed.host), "user": parsed.username, "dbname": parsed.database}
    params.update(override)
    return " ".join(f"{key}='{value}'" for key, value in params.items() if value is not None)


@pytest.fixture(scope="module")
def embedded(database_urls) -> Path:
    """The embedded cluster's data directory (these tests are about the embedded cluster only)."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("DATABASE_URL is set: the external server's authentication is its operator's to configure")
    with psycopg.connect(libpq_url(database_urls.admin)) as conn:
        row = conn.execute("SELECT current_user").fetchone()
    assert row is not None
    owner = row[0]
    assert owner == OWNER_ROLE
    return Path(os.environ.get("AGENTFORGE_TEST_DATA_DIR", ROOT / "instance" / "pgdata-test"))


@pytest.mark.parametrize("role", EMBEDDED_ROLES)
def test_no_role_logs_in_over_the_socket_without_its_password(embedded, database_urls, role):
    for password in (None, "", "wrong-password", "trust"):
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(conninfo(database_urls.runtime, user=role, password=password, passfile="/dev/null"))
        assert "password" in str(refused.value)


def test_pg_hba_conf_has_no_trust_line(embedded):
    rules = [
        line.split()
        for line in (embedded / "pg_hba.conf").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert rules, "pg_hba.conf has no rule at all"
    assert {rule[-1] for rule in rules} == {"scram-sha-256"}


def test_the_server_loaded_password_rules_only(embedded, database_urls):
    with psycopg.connect(libpq_url(database_urls.admin)) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    assert row is not None
    assert not row[0]
    password = (passwords_dir(embedded) / SUPERUSER).read_text().strip()
    with psycopg.connect(conninfo(database_urls.runtime, user=SUPERUSER, password=password)) as conn:
        methods = {row[0] for row in conn.execute("SELECT auth_method FROM pg_hba_file_rules")}
        unencrypted = conn.execute("SELECT count(*) FROM pg_authid WHERE rolpassword NOT LIKE 'SCRAM-SHA-256$%'")
        counted = unencrypted.fetchone()
        assert counted is not None
        assert counted[0] == 0
        missing = conn.execute(
            "SELECT rolname FROM pg_authid WHERE rolname = ANY(%s) AND rolpassword IS NULL", (list(EMBEDDED_ROLES),)
        ).fetchall()
    assert methods == {"scram-sha-256"}
    assert missing == []


def test_password_files_are_readable_by_the_service_user_only(embedded):
    directory = passwords_dir(embedded)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for role in EMBEDDED_ROLES:
        path = directory / role
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_uid == os.geteuid()
        assert len(path.read_text().strip()) >= 32


@pytest.mark.slow
def test_a_cluster_created_with_trust_is_upgraded_in_place(embedded, database_urls):
    """Earlier code left `trust` everywhere: the next start sets passwords, rewrites pg_hba.conf and reloads."""
    hba = embedded / "pg_hba.conf"
    password = (passwords_dir(embedded) / SUPERUSER).read_text().strip()
    with psycopg.connect(conninfo(database_urls.runtime, user=SUPERUSER, password=password)) as conn:
        conn.execute("ALTER ROLE agentforge_app PASSWORD NULL")
        _replace_keeping_owner(hba, "local all all trust\nhost all all 127.0.0.1/32 trust\n")
        conn.execute("SELECT pg_reload_conf()")
    start_embedded_cluster(embedded)
    assert "trust" not in hba.read_text()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(conninfo(database_urls.runtime, password="x", passfile="/dev/null"))
    with psycopg.connect(libpq_url(database_urls.runtime)) as conn:
        row = conn.execute("SELECT current_user").fetchone()
        assert row is not None
        assert row[0] == RUNTIME_ROLE


@pytest.fixture
def two_orgs(make_member, database):
    """Org A's owner with a login session and an API token, and org B's member."""
    alice = make_member("alice@acme.test", "Acme RL", "owner")
    bob = make_member("bob@globex.test", "Globex Research", "member")
    with database.session(alice.org.id) as session, session.begin():
        _, token = create_token(session, alice.org.id, alice.user.id, "ci")
        attempt = reserve_login_attempt(session, alice.email, "10.0.0.1")
        assert attempt.id is not None
        logged_in = log_in(session, attempt.id, alice.email, alice.password, "10.0.0.1", timedelta(hours=1))
    assert logged_in is not None
    return alice, bob, logged_in[1], token


@pytest.fixture
def attacker(database_urls):
    """A raw runtime-role connection, as a program holding the app's own credentials would have."""
    engine = create_engine(sqlalchemy_url(database_urls.runtime), pool_size=1, max_overflow=0)
    with engine.connect() as conn:
        yield conn
    engine.dispose()


def pose_as(conn, org_id, user_id=None) -> None:
    """Set the tenancy settings to someone else's ids for the rest of the transaction."""
    conn.execute(
        text("SELECT set_config('app.current_org', :o, true), set_config('app.current_user', :u, true)"),
        {"o": str(org_id), "u": str(user_id or "")},
    )


def test_runtime_role_sees_only_the_current_organizations_members(two_orgs, attacker):
    _, bob, _, _ = two_orgs
    with attacker.begin():
        pose_as(attacker, bob.org.id)
        emails = attacker.execute(text("SELECT email FROM users")).scalars().all()
    assert emails == [bob.email]
    with attacker.begin():
        assert attacker.execute(text("SELECT count(*) FROM users")).scalar() == 0  # no organization: nobody


def test_no_setting_reveals_a_password_hash(two_orgs, attacker):
    alice, _, _, _ = two_orgs
    for query in ("SELECT * FROM users", "SELECT password_hash FROM users"):
        with attacker.begin():
            pose_as(attacker, alice.org.id, alice.user.id)
            with pytest.raises(Exception, match="permission denied"):
                attacker.execute(text(query))


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM auth_sessions",
        "SELECT * FROM login_throttle",
        "SELECT * FROM login_attempts",
        "DELETE FROM login_attempts",
        "SELECT token_sha256 FROM api_tokens",
        "SELECT * FROM api_tokens",
        "INSERT INTO auth_sessions (token_sha256, user_id, expires_at) "
        "VALUES (sha256('forged'), (SELECT NULLIF(current_setting('app.current_user'), '')::uuid), now() + '1 day')",
        "DELETE FROM login_throttle",
        "UPDATE users SET password_hash = 'x'",
        "INSERT INTO users (id, email, password_hash, name) VALUES (gen_random_uuid(), 'x@y.z', 'h', 'x')",
    ],
)
def test_sessions_tokens_and_throttle_are_out_of_reach_whatever_the_settings(two_orgs, attacker, query):
    alice, _, _, _ = two_orgs
    with attacker.begin():
        pose_as(attacker, alice.org.id, alice.user.id)
        with pytest.raises(Exception, match="permission denied"):
            attacker.execute(text(query))


def test_definer_functions_answer_ids_never_hashes(two_orgs, attacker):
    alice, _, session_token, api_token = two_orgs
    with attacker.begin():
        salt = attacker.execute(text("SELECT auth_password_salt(:e)"), {"e": alice.email}).scalar()
        found = attacker.execute(text("SELECT account_id_by_email(:e)"), {"e": alice.email}).scalar()
        wrong = attacker.execute(
            text("SELECT auth_login(gen_random_uuid(), :e, :k, '10.0.0.2', sha256('forged'), '1 day')"),
            {"e": alice.email, "k": "00"},
        ).scalar()
        forged = attacker.execute(text("SELECT * FROM auth_session_user(sha256('forged'))")).all()
        real = attacker.execute(
            text("SELECT email FROM auth_session_user(:d)"), {"d": hashlib.sha256(session_token.encode()).digest()}
        ).scalar()
    with attacker.begin():
        # A hash is method$salt$key: the salt is no secret, the key never leaves the database.
        assert salt.count("$") == 1 and salt.startswith(("scrypt:", "pbkdf2:"))
        assert found == alice.user.id
        assert wrong is None and forged == []
        assert real == alice.email
        pose_as(attacker, alice.org.id, alice.user.id)
        prefixes = attacker.execute(text("SELECT prefix FROM api_tokens")).scalars().all()
    assert [api_token.startswith(prefix) for prefix in prefixes] == [True]
