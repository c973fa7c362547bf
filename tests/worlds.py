"""Worlds of rows that the read-only tests of a module share: built once, and built again only when the database
changed since (a test emptied it, or wrote a row).

Every test starts from empty tables (conftest's clean_database), which is right for a test that writes, but a module
of read-only tests over one rich world (the explorer's filters, the pages) would rebuild it for every test: most of
the inner loop's time. A fixture made with `shared_world` is named `shared_…`; a test that uses one is not emptied
first. Before each such test the fixture compares the database's fingerprint (every table's row count and newest row
version) with the one it took after building: any insert, update or delete since, by any test, and it empties the
tables and builds again. What a login writes (its session, the throttle's counts) is left out of the fingerprint.

A rebuild empties the tables first, so a test asks for its shared world before any fixture that writes (a module's
`member` or `api` that come from the world resolve it first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from models import Base
from tests.conftest import empty_tables

NOT_WORLD = {"auth_sessions", "login_attempts", "login_throttle"}  # a login's bookkeeping, not the world's rows


def fingerprint(cleaner_engine) -> tuple[tuple[Any, ...], ...]:
    """Each table's row count and newest row version (xmin): an insert, update or delete changes it."""
    tables = [table.name for table in Base.metadata.sorted_tables if table.name not in NOT_WORLD]
    sql = " UNION ALL ".join(f"SELECT '{table}', count(*), max(xmin::text::bigint) FROM {table}" for table in tables)
    with cleaner_engine.connect() as conn:
        return tuple(tuple(row) for row in conn.execute(text(sql)))


def shared_world(build: Callable[[pytest.FixtureRequest], Any]) -> Any:
    """A fixture (named after `build`, which must start with `shared_`) whose value `build(request)` makes once and
    makes again whenever the database changed since."""
    if not build.__name__.startswith("shared_"):
        raise ValueError(f"{build.__name__}: a shared world's name starts with shared_ (clean_database skips those)")
    state: dict[str, Any] = {}

    @pytest.fixture(name=build.__name__)
    def world(request: pytest.FixtureRequest, cleaner_engine) -> Any:
        if "value" not in state or state["fingerprint"] != fingerprint(cleaner_engine):
            empty_tables(cleaner_engine)
            state["value"] = build(request)
            state["fingerprint"] = fingerprint(cleaner_engine)
        return state["value"]

    world.__doc__ = build.__doc__
    return world


def world_or(request: pytest.FixtureRequest, world: str, part: str, otherwise: Callable[[], Any]) -> Any:
    """`part` of the fixture `world` (a shared world's dict) in a test that uses it; else `otherwise()`, for a test
    that builds rows of its own (a module's `member`, `api` or `page`)."""
    if world in request.fixturenames:
        return request.getfixturevalue(world)[part]
    return otherwise()
