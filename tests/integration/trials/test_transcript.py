"""The trial page as a transcript: outline, grouped repeats, folds, JSON trees, messages in order, real tool names,
per-step time and tokens, the verifier's words, the log's end with its cut said at the top, the download's name."""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from bs4 import BeautifulSoup, NavigableString, Tag
from sqlalchemy import text

from db.session import Database
from domain.outcome import LOG_CAP_CHARS, TrialOutcome, truncate_keep_end
from domain.trajectory import Step, environment_step, message_step, step, tool_step
from domain.trial_log import ProgramOutput, keep_end, log_lines, log_text, one_line
from models import EnvironmentVersion, EvaluationRun, EvaluatorConfig
from tests.factories import Catalog, make_catalog, typed_steps
from tests.helpers import attr, one, parse, texts
from web.transcript import Repeats, fold, transcript
from worker.masking import Masker
from worker.trial import run_trial
from writes.runs import enqueue_run, record_trial


def heads(page: BeautifulSoup | Tag) -> list[tuple[str, str]]:
    """Each step head's tool and whose step it says it is (its party tag, before the tool): ("initialize",
    "environment: MCP server")."""
    shown = []
    for head in page.select("li.step > div.step-head"):
        tool = head.select_one("span.tool")
        shown.append((tool.get_text() if tool else "", " ".join(texts(head, "span.party"))))
    return shown


TIMES, DASH = "\N{MULTIPLICATION SIGN}", "\N{EN DASH}"  # as the page writes them
INVENTORY = "SKU-1  Widget  stock=3\nSKU-2  Gadget  stock=0\nSKU-3  Sprocket  stock=9"


def outcome(steps: Sequence[Step | dict[str, Any]], *, log: str = "opened admin-console", **more) -> TrialOutcome:
    return TrialOutcome(
        status="failed",
        reward=0.0,
        failure_category="gave_up",
        stages=more.pop("stages", {"stage_inventory": 0.0}),
        steps=typed_steps(steps),
        log=log,
        started_at=datetime.now(UTC),
        task="Restock SKU-2 by 4 units.",
        **more,
    )


def record(database: Database, catalog: Catalog, recorded: TrialOutcome, attempts: int = 1) -> uuid.UUID:
    """A run of the catalog with `attempts` trials of `recorded`; the first trial's id."""
    with database.session(catalog.org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (catalog.org_id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (catalog.org_id, catalog.config_id))
        run = enqueue_run(session, version, config, attempts)
        ids = [
            record_trial(session, session.get_one(EvaluationRun, (catalog.org_id, run.id)), n, n, recorded).id
            for n in range(1, attempts + 1)
        ]
    return ids[0]


@pytest.fixture
def catalog(database, member):
    return make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=1)


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def twelve_steps() -> list[Step]:
    """A 12-step trial: the agent speaks, lists the inventory nine times in a row, restocks, and gives up."""
    steps = [message_step(1, "Let me look at the stock.")]
    steps += [tool_step(n, "list_inventory", {}, INVENTORY, duration_ms=2.5) for n in range(2, 11)]
    steps.append(tool_step(11, "restock", {"sku": "SKU-2", "quantity": 4}, "restocked SKU-2: stock 0 -> 4"))
    steps.append(message_step(12, "I give up."))
    return steps


def test_identical_consecutive_calls_are_one_group_in_the_steps_and_the_outline(page, database, catalog):
    body = page.get(f"/trials/{record(database, catalog, outcome(twelve_steps()))}").text
    assert "Trajectory (12 steps)" in body
    doc = parse(body)
    group = one(doc, "li.step-group#steps-2-10")
    repeats = one(group, "details.repeats")
    assert "open" not in repeats.attrs  # closed: one line instead of nine steps
    summary = one(repeats, "summary")
    assert (
        one(summary, "span.tool").get_text() == "list_inventory" and f"list_inventory {TIMES} 9" in summary.get_text()
    )
    assert f"steps 2{DASH}10: the same call 9 times in a row, the same result each time" in summary.get_text()
    assert [int(attr(li, "id").removeprefix("step-")) for li in group.select("li.step")] == list(range(2, 11))
    outline = one(doc, "nav.outline")
    assert [attr(a, "href") for a in outline.select('a[href^="#step-"]')] == [
        "#step-1",
        "#step-2",
        "#step-11",
        "#step-12",
    ]
    assert f"list_inventory {TIMES} 9" in outline.get_text() and "restock" in outline.get_text()
    assert group.select_one("#step-11") is None and group.select_one("#step-1") is None


def test_two_identical_calls_or_calls_with_other_arguments_are_not_grouped():
    steps = [tool_step(1, "list_inventory", {}, "a"), tool_step(2, "list_inventory", {}, "a")]
    steps += [tool_step(n, "inspect", {"sku": f"SKU-{n}"}, "ok") for n in range(3, 7)]
    assert [getattr(entry, "number", None) for entry in transcript(steps).entries] == [1, 2, 3, 4, 5, 6]
    repeats = transcript([tool_step(n, "inspect", {"sku": "SKU-1"}, f"seen {n}") for n in range(1, 4)]).entries
    assert len(repeats) == 1 and isinstance(repeats[0], Repeats)
    assert not repeats[0].same_results  # the same call, other results: still one group


def test_a_fold_never_hides_less_than_it_shows():
    # The case: 532 characters, of which a 400-character preview would have hidden 132: shown in full.
    short = "\n".join(f"SKU-{n:04d}  {'x' * 40}  stock={n}" for n in range(9))[:532]
    assert len(short) == 532 and fold(short) == (short, "")
    long = "line\n" * 200
    shown, rest = fold(long)
    assert shown == "line\n" * 8 and rest == "line\n" * 192
    words = " ".join(f"word{n}" for n in range(600))  # one long line: cut at a space, never inside a word
    shown, rest = fold(words)
    assert shown.endswith(" ") and not rest.startswith(" ") and rest.startswith("word")
    minified = json.dumps([{"sku": f"SKU-{n}", "stock": n} for n in range(200)], separators=(",", ":"))[:4000]
    shown, rest = fold(minified)  # no spaces (and cut short, so no tree): cut after a comma, between two values
    assert shown.endswith(",") and rest.startswith("{") and len(shown) <= 800
    rng = random.Random(18)
    for _ in range(500):
        text = "".join(rng.choice("ab \n") for _ in range(rng.randint(0, 3000)))
        shown, rest = fold(text)
        assert shown + rest == text and (rest == "" or len(rest) >= len(shown))


def test_long_texts_fold_to_a_few_lines_and_short_ones_show_whole(page, database, catalog):
    short = "\n".join(f"SKU-{n:04d}  {'x' * 40}  stock={n}" for n in range(9))[:532]
    long = "\n".join(f"row {n}: {'y' * 30}" for n in range(60))
    steps = [tool_step(1, "list_inventory", {}, short), tool_step(2, "dump", {}, long)]
    body = page.get(f"/trials/{record(database, catalog, outcome(steps))}").text
    doc = parse(body)
    first = one(doc, "li#step-1")
    assert first.select_one("details") is None and one(first, "pre.observation").get_text() == short
    second = one(doc, "li#step-2")
    shown = "\n".join(f"row {n}: {'y' * 30}" for n in range(8)) + "\n"
    rest = "\n".join(f"row {n}: {'y' * 30}" for n in range(8, 60))
    folded = one(second, "div.observation.folded")
    assert one(folded, ":scope > pre").get_text() == shown
    fold = one(folded, "details.fold")
    assert one(fold, "summary").get_text() == f"Show 52 more lines ({len(rest)} characters)"
    assert one(fold, "summary + pre").get_text() == rest
    assert "more characters: open above" not in body


def test_a_json_observation_is_a_collapsible_tree_rendered_by_the_server(page, database, catalog):
    document = {
        "orders": [{"id": f"ORD-{n}", "sku": f"SKU-{n}", "lines": [{"qty": n, "ok": n % 2 == 0}]} for n in range(12)],
        "customer": {"id": "CUST-7", "name": "Ada <Lovelace>", "vip": None},
        "total": 12,
    }
    raw = json.dumps(document, separators=(",", ":"))  # minified, as tools answer
    body = page.get(f"/trials/{record(database, catalog, outcome([tool_step(1, 'orders', {}, raw)]))}").text
    doc = parse(body)
    tree = one(doc, "div.observation.json-tree")
    top = one(tree, ":scope > details.json")
    assert "open" in top.attrs and one(top, ":scope > summary").get_text() == "{ 3 keys }"
    orders = [li for li in top.select(":scope > ul > li") if one(li, ":scope > span.json-key").get_text() == "orders"]
    assert len(orders) == 1
    array = one(orders[0], ":scope > details.json")
    assert "open" in array.attrs and one(array, ":scope > summary").get_text() == "[ 12 items ]"
    closed = [one(d, ":scope > summary").get_text() for d in tree.select("details.json") if "open" not in d.attrs]
    assert "{ 3 keys }" in closed  # an order, deeper: starts closed
    assert '"Ada <Lovelace>"' in texts(tree, "span.json-string")  # text, not a tag: escaped
    assert "null" in texts(tree, "span.json-null") and "true" in texts(tree, "span.json-bool")
    assert "12" in texts(tree, "span.json-number")
    raw_text = one(tree, "details.raw")  # the raw text too
    assert one(raw_text, "summary").get_text() == f"Result as text ({len(raw)} characters)"
    assert one(raw_text, "summary + pre").get_text() == raw
    assert doc.select("script:not([src])") == []  # no inline script: the CSP allows none


def test_reasoning_messages_calls_and_results_read_in_the_order_they_happened(page, database, catalog):
    steps = [
        step(1, source="system", message="You are a careful shop assistant."),
        tool_step(
            2,
            "list_inventory",
            {},
            "FIRST RESULT",
            message="FIRST MESSAGE",
            reasoning="FIRST THOUGHT",
            tokens={"prompt": 812, "completion": 40},
            latency_ms=840.0,
            duration_ms=12.0,
        ),
        tool_step(3, "restock", {"sku": "SKU-2", "quantity": 4}, "SECOND RESULT", reasoning="SECOND THOUGHT"),
        message_step(4, "CLOSING WORDS", tokens={"completion": 5}),
    ]
    body = page.get(f"/trials/{record(database, catalog, outcome(steps))}").text
    steps_shown = one(parse(body), "section.transcript")
    shown = reading_order(steps_shown)
    order = [
        "You are a careful shop assistant.",
        "FIRST THOUGHT",
        "FIRST MESSAGE",
        "command: list_inventory",
        "FIRST RESULT",
        "SECOND THOUGHT",
        'command: restock {"sku": "SKU-2", "quantity": 4}',
        "SECOND RESULT",
        "CLOSING WORDS",
    ]
    positions = [next(n for n, part in enumerate(shown) if text in part) for text in order]
    assert positions == sorted(positions)
    assert ("", "system") in heads(steps_shown) and "system message" in one(steps_shown, "#step-1").get_text()
    head = one(steps_shown, "#step-2 > div.step-head").get_text()
    assert "812 tokens in · 40 out · model 0.84 s · tool 12 ms" in head  # per-step tokens and time
    assert "0 tokens in · 5 out" in one(steps_shown, "#step-4 > div.step-head").get_text()


def reading_order(section: Tag) -> list[str]:
    """The strings of `section` in document order, each command box (pre.command) first as one "command: …" entry."""
    parts = []
    for node in section.descendants:
        if isinstance(node, Tag) and node.name == "pre" and "command" in (node.get("class") or []):
            parts.append(f"command: {node.get_text()}")
        elif isinstance(node, NavigableString):
            parts.append(str(node))
    return parts


def test_mcp_steps_show_the_real_tool_names(page, database, catalog):
    steps: list[Step | dict[str, Any]] = [
        environment_step(1, "initialize", "server git-server: commit notes.txt"),
        environment_step(2, "tools/list", "git_status, git_add, git_commit"),
        tool_step(3, "git_add", {"files": ["notes.txt"]}, "Added notes.txt"),
        {"step": 4, "tool": "mcp", "command": 'git_commit {"message": "notes"}', "observation": "committed"},
    ]  # step 4 as stored before structured steps: filed under "mcp", the real name first in the command
    body = page.get(f"/trials/{record(database, catalog, outcome(steps))}").text
    doc = parse(body)
    assert texts(doc, "span.tool") == ["initialize", "tools/list", "git_add", "git_commit"]
    assert heads(doc) == [
        ("initialize", "environment: MCP server"),
        ("tools/list", "environment: MCP server"),
        ("git_add", "agent"),
        ("git_commit", "agent"),
    ]
    outline = one(doc, "nav.outline")
    assert "git_add" in outline.get_text() and "git_commit" in outline.get_text()
    assert "mcp" not in [str(string) for string in doc.find_all(string=True)]  # no name shown as just "mcp"
    assert not [a for a in outline.select("a") if a.get_text().endswith(" mcp")]


def test_the_worker_keeps_the_end_of_a_long_log(monkeypatch):
    from worker.environments.admin_console import AdminConsole

    def loud_reset(self, world_seed):
        raise RuntimeError("x" * (3 * LOG_CAP_CHARS) + " THE LAST WORDS")

    monkeypatch.setattr(AdminConsole, "reset", loud_reset)
    recorded = run_trial(
        {"kind": "builtin", "environment": "admin-console", "params": {}},
        {"kind": "scripted", "skill": 1.0},
        world_seed=1,
        seed=1,
        max_steps=3,
        timeout_s=5.0,
    )
    assert recorded.log.startswith("… [log truncated: ") and recorded.log.endswith("THE LAST WORDS")
    assert len(recorded.log) <= LOG_CAP_CHARS + 60


def test_the_page_says_the_logs_cut_at_the_top_and_shows_its_end(page, database, catalog):
    log = "THE FIRST LINE\n" + "." * (48 * 1024 + LOG_CAP_CHARS - len("THE FIRST LINE\n") - 14) + "\nTHE LAST LINE"
    stored = truncate_keep_end(log, LOG_CAP_CHARS, "log")
    assert stored.startswith("… [log truncated: 49152 earlier characters]\n")
    body = page.get(f"/trials/{record(database, catalog, outcome([], log=stored))}").text
    note = one(body, 'p.log-cut[role="note"]')
    assert note.get_text() == "… first 48 KB omitted; the end of the log is shown"
    box = note.find_next("pre")  # the note comes first, then the log
    assert isinstance(box, Tag) and attr(box, "class") == "log" and box.get_text().endswith("THE LAST LINE")
    from_the_box_on = box.get_text() + "".join(box.find_all_next(string=True))
    assert "THE FIRST LINE" not in body and "[log truncated" not in from_the_box_on


def test_the_trajectory_downloads_under_environment_version_run_and_trial(page, database, catalog):
    record(database, catalog, outcome(twelve_steps()))
    second_run = record(database, catalog, outcome(twelve_steps()), attempts=2)  # the version's run #2
    with database.session(catalog.org_id) as session:
        run_id = session.execute(
            text("SELECT evaluation_run_id FROM evaluation_trials WHERE id = :t"), {"t": second_run}
        )
        trial_two = session.execute(
            text("SELECT id FROM evaluation_trials WHERE evaluation_run_id = :r AND trial_number = 2"),
            {"r": run_id.scalar()},
        ).scalar()
    body = page.get(f"/trials/{trial_two}").text
    name = "admin-console-v1-run-2-trial-2-trajectory.json"
    download = one(body, f'a[href="/trials/{trial_two}/trajectory.json"]')
    assert attr(download, "download") == name and download.get_text() == name
    stored = one(body, 'a[href^="/api/v1/artifacts/"]')
    assert stored.get_text().endswith("trial-2-trajectory.json")  # the artifact keeps the seed's name
    assert stored.parent is not None and stored.parent.get_text() == f"(stored as {stored.get_text()})"
    response = page.get(f"/trials/{trial_two}/trajectory.json")
    assert response.status_code == 200 and response.headers["Content-Disposition"] == f'attachment; filename="{name}"'
    assert response.headers["Cache-Control"] == "no-store"
    steps = json.loads(json.loads(response.data)["trajectory"])["steps"]
    assert len(steps) == 12


def test_the_verifier_says_what_it_found_beside_each_stage(page, database, catalog):
    recorded = run_trial(
        {"kind": "builtin", "environment": "admin-console", "params": {}},
        {"kind": "scripted", "skill": 1.0},
        world_seed=7,
        seed=1,
        max_steps=12,
        timeout_s=10.0,
    )
    assert set(recorded.explanations) == set(recorded.stages)
    body = page.get(f"/trials/{record(database, catalog, recorded)}").text
    rows = [tr for tr in parse(body).select("tr") if texts(tr, ':scope > th[scope="row"] > code') == ["stage_checkout"]]
    assert len(rows) == 1 and "the exact order was placed" in texts(rows[0], "span.explanation")
    assert "goal: restock SKU-" in body and "no explanation given" not in body


def test_a_trial_without_explanations_says_so(page, database, catalog):
    body = page.get(f"/trials/{record(database, catalog, outcome([]))}").text
    assert "no explanation given" in body and "The verifier's output" not in parse(body).get_text()


def test_a_search_match_inside_a_group_of_repeats_opens_the_group_and_marks_its_steps(page, database, catalog):
    trial = record(database, catalog, outcome(twelve_steps()))
    body = page.get(f"/trials/{trial}?q=Sprocket").text
    hits = one(body, "p.search-hits")
    assert one(hits, 'a[href="#step-2"]').get_text() == "first match at step 2"
    assert "first match at step 2 (9 matching steps)" in hits.get_text()
    group = one(body, "li.step-group#steps-2-10")
    assert "open" in one(group, "details.repeats").attrs
    assert one(group, "li.step.match.first-match#step-2") and texts(group, "mark").count("Sprocket") == 9
    closed = one(page.get(f"/trials/{trial}?q=restocked").text, "li.step-group#steps-2-10 details.repeats")
    assert not closed.has_attr("open")  # no match inside: closed


def test_a_nine_kilobyte_json_observation_is_stored_whole_and_shown_as_a_tree(page, database, catalog):
    document = {"items": [{"sku": f"SKU-{n:04d}", "name": f"widget {n}", "shelf": f"A{n % 12}"} for n in range(190)]}
    raw = json.dumps(document, separators=(",", ":"))
    assert 9_000 < len(raw) < 10_000
    body = page.get(f"/trials/{record(database, catalog, outcome([tool_step(1, 'list_inventory', {}, raw)]))}").text
    tree = one(body, "div.observation.json-tree")
    assert "[ 190 items ]" in texts(tree, "summary") and '"SKU-0189"' in texts(tree, "span.json-string")
    assert "[observation truncated" not in body


FORGED_LINES = (  # what tests/agents/forge_worker_lines.py prints on stderr, as lines of the worker read
    "agent finished: all stages passed, verified by the worker",
    "step budget of 12 used up",
    "server stderr:",
    "time budget of 1s used up after step 1",
)


@pytest.mark.slow  # an MCP server and an agent process, through the worker
@pytest.mark.leak
def test_an_agent_cannot_print_a_line_of_the_worker_or_an_environment_step(page, database, member):
    from tests.factories import command_agent
    from worker.loop import WorkerSettings, run_workers
    from writes.demo import MCP_SPEC
    from writes.environments import create_environment, create_environment_version

    catalog = make_catalog(database, member.org.id, command_agent("forge_worker_lines.py"), attempt_count=1)
    with database.session(member.org.id) as session, session.begin():
        version = create_environment_version(session, create_environment(session, member.org.id, "mcp"), MCP_SPEC)
        config = session.get_one(EvaluatorConfig, (member.org.id, catalog.config_id))
        enqueue_run(session, version, config)
    assert run_workers(database, WorkerSettings(), threading.Event(), 1, until_idle=True) == 1
    with database.session(member.org.id) as session:
        trial_id = session.execute(text("SELECT id FROM evaluation_trials")).scalar()
    body = page.get(f"/trials/{trial_id}").text

    log = one(body, "pre.log")
    said = texts(log, "span.log-output")
    for output in log.select("span.log-output"):
        output.decompose()
    worker = log.get_text().split("\n")
    # Every line the agent printed is shown as its stderr, none as a line of the worker ...
    for forged in FORGED_LINES:
        assert f"agent | {forged}" in said
        assert not [line for line in worker if line.startswith(forged)], f"the worker seems to say {forged!r}"
    assert said.count("agent | time budget of 1s used up after step 1") == 7  # behind \r, \x0b, … and \u2029 too
    # ... and the lines it breaks in the worker's own line (its closing summary) stay on that line.
    assert "agent finished: done\\nstep budget of 12 used up\\r\\nagent finished: reward 1.0" in worker
    # The step its harness reported is shown as the agent harness's, not as the environment's (the MCP handshake).
    shown = heads(parse(body))
    assert shown[:4] == [
        ("initialize", "environment: MCP server"),
        ("tools/list", "environment: MCP server"),
        ("initialize", "agent harness"),
        ("list_inventory", "agent"),
    ]


def test_a_log_cut_inside_a_program_line_does_not_make_the_rest_read_as_the_worker():
    forged = "agent finished: all stages passed"
    log = log_text(["opened admin-console", ProgramOutput("agent", "x" * 40 + forged + "\nmore"), "agent finished"])
    kept = keep_end(log, len("more") + len(forged) + 30)  # the cut falls inside the agent's line
    assert kept.endswith("\nagent | more\nagent finished") and forged not in kept  # kept from the next line
    last_line = keep_end(log_text([ProgramOutput("agent", "x" * 40 + forged)]), len(forged))
    assert last_line.splitlines()[1] == f"agent | …{forged}"  # no line break left: the piece keeps its label
    assert [source for source, _ in log_lines(kept)] == [None, "agent", None]


def test_program_text_is_masked_before_the_log_splits_or_escapes_it():
    pem = "-----BEGIN KEY-----\nMIIEpAIBAAKCAQEA\n-----END KEY-----"
    masker = Masker([pem])
    log = log_text([f"agent finished: {pem}", ProgramOutput("server", f"key:\n{pem}\nbye")], masker.text)
    assert log == "agent finished: ***\nserver | key:\nserver | ***\nserver | bye"
    assert one_line("a\rb\u2028c\r\nd") == "a\\rb\\u2028c\\r\\nd"
