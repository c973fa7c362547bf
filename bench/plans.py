"""The plans behind pages that a larger history once broke: the statement a fix changed, captured from a real request
and run again under EXPLAIN ANALYZE as the runtime role in the measured organization, written to BENCHMARKS.md beside
the figures it explains. (tests.helpers counts a test's statements the same way; bench code does not import tests.)"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from bench import pages
from bench import search as search_bench
from bench.pages import login

# The pages whose plans BENCHMARKS.md shows (their labels in the pages or search tables): which of their statements
# (the slowest that holds the text), and why.
EXPLAINED = {
    "/trials?stagePassed=<last stage> (no failed trial passed it)": (
        "FROM trial_stages ts",
        "The stage filter's EXISTS is a join since trial_stages is keyed by trial and stage (migration 0038): in the "
        "succeeded rank PostgreSQL reads the stage's results newest first (ix_trial_stages_results) and probes each "
        "trial, where as a semi join it walked every newer succeeded trial of the other environment to find none.",
    ),
    "rare phrase": (
        "to_tsvector",
        "The snippets of the page's trials: a step text is parsed (`to_tsvector`) only when its lower case holds "
        "each of the phrase's words (queries.search: `LIKE ALL` of the query's lexeme patterns), so most of the "
        "50 trials' texts cost a LIKE and only those that can match a parse.",
    ),
}


ID_ARRAY = re.compile(r"'\{([0-9a-f-]{36}(?:,[0-9a-f-]{36})+)\}'")  # a page's ids, said as how many


def shortened(line: str) -> str:
    """A plan line with each array of ids said as its length."""
    return ID_ARRAY.sub(lambda match: f"'{{…{match.group(1).count(',') + 1} ids…}}'", line)


@dataclass(frozen=True)
class Statement:
    """One statement a request ran, with its parameters as the driver saw them, and how long it took."""

    sql: str
    params: Any
    seconds: float


@contextmanager
def recorded_statements() -> Iterator[list[Statement]]:
    """Every statement run while the block runs, in order."""
    seen: list[Statement] = []

    def before(conn, cursor, statement, parameters, context, executemany) -> None:
        conn.info["bench_statement_started"] = time.perf_counter()

    def after(conn, cursor, statement, parameters, context, executemany) -> None:
        started = conn.info.pop("bench_statement_started", time.perf_counter())
        seen.append(Statement(statement, parameters, time.perf_counter() - started))

    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "after_cursor_execute", after)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", before)
        event.remove(Engine, "after_cursor_execute", after)


def slowest_statement(client, url: str, holding: str, warm_ups: int = 3) -> Statement:
    """The slowest statement whose text holds `holding` of a request for `url`, after `warm_ups` requests (a read,
    never a write)."""
    for _ in range(warm_ups):
        client.get(url)
    with recorded_statements() as seen:
        response = client.get(url)
    held = [statement for statement in seen if holding in statement.sql]
    if response.status_code != 200 or not held:
        raise RuntimeError(
            f"{url} answered {response.status_code}, and none of its {len(seen)} statements holds {holding!r}"
        )
    return max(held, key=lambda statement: statement.seconds)


def explain(database, org_id: uuid.UUID, statement: Statement) -> list[str]:
    """EXPLAIN (ANALYZE, COSTS OFF, BUFFERS OFF) of `statement`, run as the runtime role in `org_id` with the
    settings the explorer's reads use; the plan's lines."""
    with database.session(org_id) as session:
        connection = session.connection()
        connection.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
        rows = connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, COSTS OFF, BUFFERS OFF) " + statement.sql, statement.params
        ).all()
    return [shortened(row[0]) for row in rows]


def urls(ids: dict[str, Any]) -> dict[str, str]:
    """The URL of each page EXPLAINED."""
    every = {label: url for label, url, _ in pages.explorer_pages(ids)}
    every.update({label: search_bench.url(q) for label, (q, _) in search_bench.SEARCHES.items()})
    return {label: every[label] for label in EXPLAINED}


def section(app, database, org_id: uuid.UUID, email: str, ids: dict[str, Any], trials: int) -> list[str]:
    """BENCHMARKS.md's section of the plans, measured now (at `trials`)."""
    client = app.test_client()
    login(client, email)
    lines = [
        f"## Plans at {trials:,} trials",
        "",
        "The statement each page below is about, from one request (after 3 warm-ups), run again under "
        "`EXPLAIN (ANALYZE, COSTS OFF, BUFFERS OFF)` as the runtime role in the measured organization.",
    ]
    for label, url in urls(ids).items():
        holding, why = EXPLAINED[label]
        statement = slowest_statement(client, url, holding)
        lines += [
            "",
            f"### `{label}`",
            "",
            f"{why} In the request: {statement.seconds * 1000:.2f} ms.",
            "",
            "```",
            *explain(database, org_id, statement),
            "```",
        ]
    return lines
