"""PostgreSQL's bulk-load recipe ("Populating a Database" in its manual) for the generator's large growth steps.

For the duration of the load the tables being filled lose their non-unique indexes and autovacuum; after it, each
index is built again from its own definition (a large maintenance_work_mem, two builds at a time, one per core,
largest first) and autovacuum is back. Unique indexes, foreign keys and triggers stay, so every row is still checked
as it is added and the derived tables (stages, evaluator rollups) are filled the way production fills them.
(Dropping the foreign keys would not pay: under forced row-level security PostgreSQL's check of a re-added key
sees only the rows of the organization in `app.current_org`, so it would have to be checked once per organization.)
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection

from db.session import Database
from db.urls import sqlalchemy_url

BUILDERS = 2  # index builds at a time
BUILD_MEMORY = "1GB"  # maintenance_work_mem of each build


@contextmanager
def owner_connection(database: Database) -> Iterator[Connection]:
    """An autocommit connection as the owner role (DDL on the app's tables)."""
    engine = create_engine(sqlalchemy_url(database.urls.admin), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def secondary_indexes(conn: Connection, tables: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, definition) of the non-unique indexes of `tables`, largest first."""
    rows = conn.execute(
        text("""SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
                WHERE i.indrelid = ANY(CAST(:tables AS regclass[])) AND NOT i.indisunique
                ORDER BY pg_relation_size(i.indexrelid) DESC"""),
        {"tables": list(tables)},
    ).all()
    return [(name, definition) for name, definition in rows]


def _run_all(database: Database, statements: list[str]) -> None:
    """Run `statements` on BUILDERS connections, each taking the next statement as soon as it is free: the search
    vector's GIN index (the largest, built first) takes as long as all the B-trees together, so a builder that
    drew it in a fixed share would leave the other idle for most of the build."""
    queue = deque(statements)
    claim = threading.Lock()

    def builder() -> None:
        with owner_connection(database) as conn:
            conn.execute(text(f"SET maintenance_work_mem = '{BUILD_MEMORY}'"))
            while True:
                with claim:
                    if not queue:
                        return
                    statement = queue.popleft()
                conn.execute(text(statement))

    with ThreadPoolExecutor(BUILDERS) as builders:
        for done in [builders.submit(builder) for _ in range(BUILDERS)]:
            done.result()


@contextmanager
def bulk_load(database: Database, tables: tuple[str, ...]) -> Iterator[None]:
    """Take the non-unique indexes and autovacuum of `tables` away for the duration, then put them back, even when
    the load failed, so the database keeps every index it had."""
    with owner_connection(database) as conn:
        indexes = secondary_indexes(conn, tables)
        for table in tables:
            conn.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
        for name, _ in indexes:
            conn.execute(text(f"DROP INDEX {name}"))
    try:
        yield
    finally:
        _run_all(database, [definition for _, definition in indexes])
        _run_all(database, [f"ALTER TABLE {table} RESET (autovacuum_enabled)" for table in tables])
