"""What several test modules share beyond the factories: NDJSON import lines, counting statements and rows, reading
trial ids from the API and from SQL, queueing and working runs in this process, and migrating the test database."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from bs4 import BeautifulSoup, Doctype, NavigableString, Tag
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import DBAPIError

from db.urls import runtime_role_of, sqlalchemy_url
from tests.paths import ROOT
from worker.loop import WorkerSettings, run_workers
from writes.runs import enqueue_run

# Every table a request could write (test_bad_input.py and test_json_depth.py check none of them changed).
TABLES = (
    "environments",
    "environment_versions",
    "evaluator_configs",
    "evaluation_runs",
    "evaluation_trials",
    "rollouts",
    "artifacts",
    "memberships",
    "labels",
    "trial_labels",
    "trial_reviews",
    "trial_notes",
    "trial_audit",
    "datasets",
    "dataset_versions",
    "dataset_tasks",
    "dataset_runs",
    "dataset_run_tasks",
    "review_queues",
    "review_claims",
)


def table_counts(count_rows: Callable[..., int], org_id: Any) -> dict[str, tuple[int, int]]:
    """Rows of every table a request could write: as the organization sees them, and as the owner role sees them
    (every organization's runs and memberships)."""
    return {t: (count_rows(t, org_id), count_rows(t)) for t in TABLES}


def line(external_id: str, attempt: int, reward: float | None, **extra: Any) -> dict[str, Any]:
    """One line of an NDJSON import (POST /api/v1/evaluation-runs/import) of the count-lines environment."""
    return {
        "externalId": external_id,
        "environment": {"name": "count-lines", "spec": {"kind": "external", "source": "harness-x", "task": "count"}},
        "attempt": attempt,
        "reward": reward,
        "stages": {"stage_counted": 1.0 if reward else 0.0, "stage_written": reward or 0.0},
        "failureCategory": None if reward == 1 else "wrong_answer",
        "log": "ran",
        **extra,
    }


def ndjson(*lines: dict[str, Any]) -> str:
    return "\n".join(json.dumps(item) for item in lines) + "\n"


def import_ndjson(api: Any, body: str) -> Any:
    """POST an NDJSON body to the import endpoint as the logged-in member."""
    return api.post("/api/v1/evaluation-runs/import", data=body, content_type="application/x-ndjson")


def create_token(runner: Any, email: str, org: str) -> str:
    """A personal API token made with `flask create-token`."""
    result = runner.invoke(args=["create-token", email, "--org", org, "--name", "nightly"])
    assert result.exit_code == 0, result.output
    return str(result.output).strip().splitlines()[-1]


@contextmanager
def counting_queries(database: Any) -> Iterator[list[str]]:
    """Count the statements the app sends on its runtime engine."""
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(database.engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(database.engine, "before_cursor_execute", count)


def api_ids(api: Any, query: str = "") -> list[str]:
    """Every trial id GET /api/v1/trials lists for `query`, following `next`."""
    ids: list[str] = []
    after = None
    while True:
        url = f"/api/v1/trials?{query}" + (f"&after={after}" if after else "")
        response = api.get(url)
        assert response.status_code == 200, response.json
        ids += [t["id"] for t in response.json["trials"]]
        after = response.json["next"]
        if after is None:
            return ids


def sql_ids(database: Any, org_id: Any, where: str, **params: Any) -> set[str]:
    """The trial ids `where` selects, as the runtime role of the organization sees them."""
    with database.session(org_id) as session:
        rows = session.execute(text(f"SELECT t.id FROM evaluation_trials t WHERE {where}"), params).scalars()
        return {str(i) for i in rows}


def queue(database: Any, catalog: Any, attempt_count: int | None = None, count: int = 1) -> list[Any]:
    """Enqueue `count` runs of the catalog's configuration; return their ids."""
    from models import EnvironmentVersion, EvaluatorConfig

    with database.session(catalog.org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (catalog.org_id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (catalog.org_id, catalog.config_id))
        return [enqueue_run(session, version, config, attempt_count).id for _ in range(count)]


def work(database: Any, **settings: Any) -> int:
    """Run the worker in this process until no run is claimable."""
    return run_workers(database, WorkerSettings(**settings), threading.Event(), concurrency=1, until_idle=True)


def rows(database: Any, org_id: Any, sql: str, **params: Any) -> Sequence[Any]:
    """Run `sql` as the runtime role scoped to `org_id` and return every row."""
    with database.session(org_id) as session:
        return session.execute(text(sql), params).all()


def migrate(database_urls: Any, database: Any, target: str, downgrade: bool = False) -> None:
    """Upgrade (or downgrade) the test database to the migration `target`."""
    config = Config()
    config.set_main_option("script_location", str(ROOT / "migrations"))
    engine = create_engine(sqlalchemy_url(database_urls.admin))
    try:
        with engine.begin() as conn:
            config.attributes.update(connection=conn, runtime_role=runtime_role_of(database_urls))
            config.attributes["secrets_key"] = database.secrets_key
            (command.downgrade if downgrade else command.upgrade)(config, target)
    finally:
        engine.dispose()


def found(pattern: str | re.Pattern[str], text: str, flags: int = 0) -> re.Match[str]:
    """`re.search` that fails the test, showing the pattern, when nothing matches."""
    match = re.search(pattern, text, flags)
    assert match is not None, f"no match for {pattern!r}"
    return match


def parse(html: str) -> BeautifulSoup:
    """An HTML page or fragment, parsed by the standard library's parser (read it with CSS selectors)."""
    return BeautifulSoup(html, "html.parser")


def one(node: BeautifulSoup | Tag | str, selector: str) -> Tag:
    """The first element `selector` matches in `node` (HTML text is parsed first); the test fails when none does."""
    root = parse(node) if isinstance(node, str) else node
    element = root.select_one(selector)
    assert element is not None, f"nothing matches {selector!r}"
    return element


def attr(element: Tag, name: str) -> str:
    """An attribute's value as text (a class list joined by spaces); the test fails when the element lacks it."""
    value = element.get(name)
    assert value is not None, f"<{element.name}> has no {name}"
    return value if isinstance(value, str) else " ".join(value)


def texts(node: BeautifulSoup | Tag | str, selector: str) -> list[str]:
    """The text of every element `selector` matches in `node` (HTML text is parsed first), in document order."""
    root = parse(node) if isinstance(node, str) else node
    return [element.get_text() for element in root.select(selector)]


def marked(element: Tag) -> str:
    """An element's text with each run a search <mark>s in brackets: "restock of [SKU-7062] refused"."""
    return "".join(
        f"[{string}]" if string.parent is not None and string.parent.name == "mark" else str(string)
        for string in element.find_all(string=True)
    )


def is_whole_page(html: str) -> bool:
    """Whether `html` is a whole document: an HTML doctype first (after whitespace), and an <html> element."""
    root = parse(html)
    first = next((node for node in root.contents if not (type(node) is NavigableString and not node.strip())), None)
    return isinstance(first, Doctype) and first.lower() == "html" and root.find("html") is not None


def is_fragment(html: str) -> bool:
    """Whether `html` is a fragment htmx swaps into a page: neither a doctype nor an <html> element."""
    root = parse(html)
    return not any(isinstance(node, Doctype) for node in root.contents) and root.find("html") is None


def first_element(html: str) -> Tag:
    """The first top-level element of an HTML fragment; the test fails when anything but whitespace comes before it."""
    for node in parse(html).contents:
        if isinstance(node, Tag):
            return node
        assert type(node) is NavigableString and not node.strip(), f"{str(node)[:60]!r} comes before the first element"
    raise AssertionError("the fragment holds no element")


def trial_links(node: BeautifulSoup | Tag | str) -> list[str]:
    """The texts of the links to trials a page lists ("Trial 3 of 8"), in order."""
    root = parse(node) if isinstance(node, str) else node
    return [t for t in texts(root, 'a[href^="/trials/"]') if t.startswith("Trial ") and " of " in t]


def copied(node: BeautifulSoup | Tag | str, selector: str = "") -> list[str]:
    """The texts a page offers to copy (macros.html copy_text: read-only fields) under `selector`, in order."""
    root = parse(node) if isinstance(node, str) else node
    return [attr(field, "value") for field in root.select(f"{selector} input.copy-source".strip())]


def invitation_link(html: str) -> str:
    """The path of the invitation link the members page shows once after an invite (/invitations/<token>)."""
    shown = copied(one(html, 'div.card[role="status"]'))[0]
    match = re.fullmatch(r"http://localhost(/invitations/[A-Za-z0-9_-]+)", shown)
    assert match is not None, f"the invitation card shows {shown!r}, not a link"
    return match.group(1)


def sqlstate(error: DBAPIError) -> str | None:
    """The SQLSTATE PostgreSQL answered with, under SQLAlchemy's wrapper of psycopg's error."""
    assert isinstance(error.orig, psycopg.Error), error
    return error.orig.sqlstate


def _error_summary(html: str, summary_id: str) -> Tag:
    """A refused form's error summary (the GOV.UK pattern: focusable and focused, an alert with its heading)."""
    box = one(parse(html), f"div.error-summary#{summary_id}[tabindex='-1'][autofocus]")
    assert one(box, "[role=alert] h2").get_text() == "There is a problem"
    assert attr(box, "aria-labelledby") == attr(one(box, "h2"), "id")
    return box


def error_summary_links(html: str, summary_id: str = "error-summary") -> list[tuple[str, str]]:
    """A refused form's error summary (the GOV.UK pattern: focusable and focused, an alert with its heading): its
    links as (target id, text)."""
    box = _error_summary(html, summary_id)
    return [(attr(a, "href").removeprefix("#"), a.get_text()) for a in box.select("li a")]


def error_summary_lines(html: str, summary_id: str = "error-summary") -> list[tuple[str | None, str]]:
    """Every line of a refused form's error summary as (the id its link leads to, or None for a refusal no input
    holds, its text)."""
    box = _error_summary(html, summary_id)
    lines: list[tuple[str | None, str]] = []
    for item in box.select("li"):
        link = item.select_one("a")
        lines.append((attr(link, "href").removeprefix("#") if link else None, " ".join(item.get_text().split())))
    return lines
