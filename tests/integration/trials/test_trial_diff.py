"""The trial diff (/trials/diff?a=…&b=…): two trials' outcomes and stages side by side, their steps aligned by tool
call with the first divergence marked; the other attempts of a trial's task (/trials/<id>/attempts), reached from the
trial page; bad ids (400), unknown ids and another organization's (404, nothing shown)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from bs4 import Tag
from sqlalchemy import text

from db.session import Database
from domain.outcome import TrialOutcome
from domain.trajectory import Step, message_step, tool_step
from models import EnvironmentVersion, EvaluationRun, EvaluatorConfig
from tests.conftest import AuthActions
from tests.factories import Catalog, make_catalog
from tests.helpers import attr, counting_queries, is_whole_page, one, parse, texts
from writes.runs import enqueue_run, record_trial

TASK = "Restock SKU-2 by 4 units."
NOVICE = {"kind": "scripted", "skill": 0.3}


def restock(quantity: int, *, reward: float = 0.0, task: str = TASK, extra: Sequence[Step] = ()) -> TrialOutcome:
    """A trial that lists the inventory, restocks SKU-2 by `quantity` and says so."""
    steps = [
        message_step(1, "Let me look at the stock."),
        tool_step(2, "list_inventory", {}, "SKU-2  Gadget  stock=0"),
        tool_step(3, "restock", {"sku": "SKU-2", "quantity": quantity}, f"restocked SKU-2: stock 0 -> {quantity}"),
        *extra,
        message_step(4 + len(extra), "Done."),
    ]
    passed = reward == 1.0
    return TrialOutcome(
        status="succeeded" if passed else "failed",
        reward=reward,
        failure_category=None if passed else "wrong_quantity",
        stages={"stage_inventory": 1.0, "stage_order": 1.0 if passed else 0.0},
        steps=steps,
        log="opened admin-console",
        started_at=datetime.now(UTC),
        task=task,
    )


def record_run(database: Database, catalog: Catalog, outcomes: Sequence[TrialOutcome]) -> list[uuid.UUID]:
    """A run of the catalog with one trial per outcome, in order; their ids."""
    with database.session(catalog.org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (catalog.org_id, catalog.version_id))
        config = session.get_one(EvaluatorConfig, (catalog.org_id, catalog.config_id))
        run = enqueue_run(session, version, config, len(outcomes))
        run = session.get_one(EvaluationRun, (catalog.org_id, run.id))
        return [record_trial(session, run, n, n, o).id for n, o in enumerate(outcomes, start=1)]


@pytest.fixture
def catalog(database, member):
    return make_catalog(database, member.org.id, NOVICE, attempt_count=2)


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def diff_url(a: uuid.UUID | str, b: uuid.UUID | str) -> str:
    return f"/trials/diff?a={a}&b={b}"


def aligned(doc: Tag) -> list[tuple[str | None, str | None]]:
    """Each aligned row as (A's step number, B's step number), None where that side has no step."""

    def number(cell: Tag) -> str | None:
        found = cell.select_one(".step-no")
        return found.get_text() if found else None

    return [(number(one(row, ".side-a")), number(one(row, ".side-b"))) for row in doc.select("ol.diff-rows > li")]


def outcome_row(doc: Tag, heading: str) -> list[str]:
    """The A and B cells of the outcome table's row headed `heading`."""
    for row in doc.select("table.diff-outcomes tbody tr"):
        if one(row, "th").get_text() == heading:
            return [cell.get_text().strip() for cell in row.select("td")]
    raise AssertionError(f"no row {heading!r}")


def test_the_steps_are_aligned_by_tool_call_and_the_first_divergence_is_marked(page, database, catalog):
    a, b = record_run(database, catalog, [restock(4, reward=1.0), restock(5)])
    response = page.get(diff_url(a, b))
    assert response.status_code == 200 and is_whole_page(response.text)
    doc = parse(response.text)

    assert one(doc, "h1").get_text() == "Trial diff"
    assert one(doc, "#label-a").get_text() == "Trial 1 of 2 · admin-console v1 · run #1"
    assert one(doc, "#label-b").get_text() == "Trial 2 of 2 · admin-console v1 · run #1"
    assert attr(one(doc, "#label-a a"), "href") == f"/trials/{a}"
    assert outcome_row(doc, "Status") == ["succeeded", "failed"]
    assert outcome_row(doc, "Reward") == ["1.000", "0.000"]
    assert outcome_row(doc, "Failure category") == ["—", "wrong_quantity"]
    assert outcome_row(doc, "stage_inventory") == ["1", "1"]
    assert outcome_row(doc, "stage_order") == ["1", "0"]

    # list_inventory paired; A's restock of 4 beside B's restock of 5 (the same tool); the closing words paired.
    assert aligned(doc) == [("1", "1"), ("2", "2"), ("3", "3"), ("4", "4")]
    rows = doc.select("ol.diff-rows > li")
    assert texts(rows[2], ".side-a pre.command") == ['restock {"sku": "SKU-2", "quantity": 4}']
    assert texts(rows[2], ".side-b pre.command") == ['restock {"sku": "SKU-2", "quantity": 5}']
    assert texts(rows[2], ".row-note") == ["same tool, other arguments"]

    first = one(doc, "#first-divergence")
    assert first is rows[2] and "first-divergence" in attr(first, "class")
    assert texts(doc, ".divergence-mark") == ["First divergence"]  # one row only
    jump = one(doc, "#diff-summary")
    assert [attr(link, "href") for link in jump.select("a")] == ["#first-divergence"]
    assert "Go to the first divergence (row 3: A step 3, B step 3)." in " ".join(jump.get_text().split())
    said = " ".join(jump.get_text().split())
    assert "3 rows alike, 1 with other arguments, 0 only in A, 0 only in B, 0 in other words." in said


def test_identical_trials_show_no_divergence(page, database, catalog):
    a, b = record_run(database, catalog, [restock(4), restock(4)])
    doc = parse(page.get(diff_url(a, b)).text)
    assert aligned(doc) == [("1", "1"), ("2", "2"), ("3", "3"), ("4", "4")]
    assert doc.select("#first-divergence") == [] and doc.select(".divergence-mark") == []
    assert doc.select('a[href="#first-divergence"]') == []
    assert "The two trials take the same steps (4)." in one(doc, "#diff-summary").get_text()


def test_an_extra_call_stands_alone_and_messages_in_other_words_are_paired(page, database, catalog):
    check = [tool_step(4, "list_inventory", {"sku": "SKU-2"}, "SKU-2 stock=4")]
    said = restock(4)
    other = restock(4, extra=check)
    other = replace(other, steps=[*other.steps[:-1], message_step(5, "Restocked.")])
    a, b = record_run(database, catalog, [said, other])
    doc = parse(page.get(diff_url(a, b)).text)
    assert aligned(doc) == [("1", "1"), ("2", "2"), ("3", "3"), (None, "4"), ("4", "5")]
    rows = doc.select("ol.diff-rows > li")
    assert one(doc, "#first-divergence") is rows[3]
    assert texts(rows[4], ".row-note") == ["other words"]
    assert [" ".join(t.split()) for t in texts(rows[4], "pre.message")] == ["Done.", "Restocked."]


def test_the_page_stacks_its_sides_in_markup_order_and_stays_within_its_statement_budget(page, database, catalog):
    a, b = record_run(database, catalog, [restock(4), restock(5)])
    with counting_queries(database) as statements:
        response = page.get(diff_url(a, b))
    assert response.status_code == 200
    # the session and membership, each trial's read and its triage's, the label set once: none per step or row
    assert len(statements) <= 8, statements
    boosted = page.get(diff_url(a, b), headers={"HX-Request": "true", "HX-Boosted": "true"})
    assert is_whole_page(boosted.text)
    for row in parse(response.text).select("ol.diff-rows > li"):  # A before B in every row (read, and stacked)
        sides = [attr(cell, "class") for cell in row.select(":scope > .diff-cell")]
        assert sides == ["diff-cell side-a", "diff-cell side-b"]


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("", "a is required"),
        ("b={ok}", "a is required"),
        ("a={ok}", "b is required"),
        ("a=&b={ok}", "a is required"),
        ("a=not-a-uuid&b={ok}", "a must be a UUID, not 'not-a-uuid'"),
        ("a={ok}&b=1234", "b must be a UUID, not '1234'"),
        ("a={ok}&b={ok}0", "b must be a UUID"),
    ],
)
def test_a_missing_or_malformed_id_answers_400_saying_which(page, database, catalog, query, says):
    (ok,) = record_run(database, catalog, [restock(4)])
    response = page.get("/trials/diff?" + query.format(ok=ok))
    assert response.status_code == 400 and is_whole_page(response.text)
    assert texts(response.text, "h1") == ["Bad Request"]
    assert says in one(response.text, "section.card").get_text()


@pytest.mark.bad_input
def test_an_unknown_id_answers_404(page, database, catalog):
    (ok,) = record_run(database, catalog, [restock(4)])
    for url in (diff_url(ok, uuid.uuid4()), diff_url(uuid.uuid4(), ok), f"/trials/{uuid.uuid4()}/attempts"):
        response = page.get(url)
        assert response.status_code == 404 and texts(response.text, "h1") == ["Not Found"], url


@pytest.mark.leak
def test_another_organizations_trials_answer_404_and_show_nothing_of_them(app, database, catalog, make_member):
    secret = "Restock SKU-SECRET-7 for the Acme launch."
    theirs = record_run(database, catalog, [restock(4, task=secret), restock(9, task=secret)])
    attacker = make_member("eve@globex.test", "Globex Research")
    own_catalog = make_catalog(database, attacker.org.id, NOVICE, attempt_count=1)
    (own,) = record_run(database, own_catalog, [restock(4, task=secret)])  # the same task text in their own org
    client = app.test_client()
    AuthActions(client).login(attacker.email)
    for url in (
        diff_url(theirs[0], theirs[1]),
        diff_url(own, theirs[0]),
        diff_url(theirs[0], own),
        f"/trials/{theirs[0]}/attempts",
    ):
        response = client.get(url)
        assert response.status_code == 404, url
        assert "SKU-SECRET" not in response.text and '"quantity": 9' not in response.text, url
    # The attacker's own trial lists no attempt of the other organization, though the task text is the same.
    attempts = parse(client.get(f"/trials/{own}/attempts").text)
    assert attempts.select('a[href^="/trials/diff"]') == [] and one(attempts, "#no-attempts")
    for trial in theirs:
        assert str(trial) not in str(attempts)


def test_the_trial_page_links_to_the_other_attempts_of_its_task(page, database, catalog, member):
    first, second = record_run(database, catalog, [restock(4), restock(5)])
    (later,) = record_run(database, catalog, [restock(6)])
    (other_task,) = record_run(database, catalog, [restock(4, task="Restock SKU-9 by 1 unit.")])
    elsewhere = make_catalog(database, member.org.id, NOVICE, attempt_count=1, config_name="v2")  # another version
    (other_version,) = record_run(database, elsewhere, [restock(4)])

    trial_page = parse(page.get(f"/trials/{first}").text)
    link = [a for a in trial_page.select("a") if a.get_text() == "Compare with another attempt of this task"]
    assert len(link) == 1 and attr(link[0], "href") == f"/trials/{first}/attempts"

    listing = page.get(attr(link[0], "href"))
    assert listing.status_code == 200
    doc = parse(listing.text)
    assert one(doc, "h1").get_text() == "Compare with another attempt of this task"
    assert one(doc, "p.task").get_text() == TASK
    offered = [(a.get_text(), attr(a, "href")) for a in doc.select('table.attempts a[href^="/trials/diff"]')]
    assert offered == [  # newest first; never the trial itself, another task or another version
        ("Trial 1 of 1", diff_url(first, later)),
        ("Trial 2 of 2", diff_url(first, second)),
    ]
    assert "(same run)" in one(doc, "table.attempts tbody tr:nth-of-type(2)").get_text()
    for absent in (first, other_task, other_version):
        assert f"b={absent}" not in listing.text
    followed = parse(page.get(offered[1][1]).text)
    assert one(followed, "#label-b").get_text() == "Trial 2 of 2 · admin-console v1 · run #1"


def test_a_trial_alone_with_its_task_says_there_is_no_other_attempt(page, database, catalog):
    (only,) = record_run(database, catalog, [restock(4)])
    doc = parse(page.get(f"/trials/{only}/attempts").text)
    assert doc.select('a[href^="/trials/diff"]') == []
    assert one(doc, "#no-attempts").get_text() == (
        "No other attempt of this task: no other trial of admin-console v1 was given the same task."
    )


def test_the_list_of_attempts_holds_the_newest_twenty_and_links_the_explorer_for_the_rest(page, database, catalog):
    ids = [trial for size in (8, 8, 7) for trial in record_run(database, catalog, [restock(4)] * size)]  # 8 at most
    doc = parse(page.get(f"/trials/{ids[0]}/attempts").text)
    links = [attr(a, "href") for a in doc.select('table.attempts a[href^="/trials/diff"]')]
    assert links == [diff_url(ids[0], other) for other in reversed(ids[3:])]  # 20 of the 22 others, newest first
    assert one(doc, "#attempts-title").get_text() == "The newest 20 other attempts"
    with database.session(catalog.org_id) as session:
        key = session.execute(text("SELECT md5(:t)"), {"t": TASK}).scalar()
    explorer = [a for a in doc.select("a") if a.get_text() == "Every attempt of this task in the trials explorer"]
    assert attr(explorer[0], "href") == f"/trials?environmentVersionId={catalog.version_id}&task={key}"


def test_a_json_result_is_shown_as_folded_text_beside_the_other_side(page, database, catalog):
    inventory = '{"items": [' + ", ".join(f'{{"sku": "SKU-{i:04d}", "quantity": {i}}}' for i in range(80)) + "]}"
    listing = [tool_step(4, "list_inventory", {"page": 2}, inventory)]
    a, b = record_run(database, catalog, [restock(4, extra=listing), restock(4, extra=listing)])
    doc = parse(page.get(diff_url(a, b)).text)
    row = doc.select("ol.diff-rows > li")[3]
    assert row.select(".json-tree") == []  # the trial page draws it as a tree; side by side it reads as text
    for side in (".side-a", ".side-b"):
        folded = one(row, f"{side} .observation.folded")
        shown, rest = one(folded, ":scope > pre").get_text(), one(folded, "details.fold > pre").get_text()
        assert shown + rest == inventory and shown.endswith(", ")  # cut between two items, the rest one click away
    assert "json-tree" in str(parse(page.get(f"/trials/{a}").text).select("#step-4"))
