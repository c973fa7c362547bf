"""Errors stand out on the trial page: a step whose result is an error (a refused call, arguments that are no JSON
object, an MCP tool's isError, a command's nonzero exit) says "Error" and has its result framed as one, the outline
marks it, and the page links its first error; a trial without errors shows none of it."""

from __future__ import annotations

from typing import Any

import pytest

from domain.trajectory import Step, message_step, tool_step
from tests.factories import make_catalog
from tests.helpers import attr, one, parse, texts
from tests.integration.trials.test_transcript import INVENTORY, outcome, record

TOOLS = "list_inventory, list_customers, restock, create_order, checkout"


@pytest.fixture
def catalog(database, member):
    return make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=1)


@pytest.fixture
def page(client, auth, member):
    auth.login(member.email)
    return client


def command_step(number: int, cmd: str, output: str, exit_code: int) -> dict[str, Any]:
    """A stored step of a shell call whose result keeps the command's exit status."""
    call = {"id": f"c{number}", "name": "bash", "arguments": {"cmd": cmd}}
    return {
        "step": number,
        "tool": "bash",
        "command": f'bash {{"cmd": "{cmd}"}}',
        "observation": output,
        "source": "agent",
        "toolCalls": [call],
        "results": [{"callId": call["id"], "content": output, "exitCode": exit_code}],
    }


def every_kind() -> list[Step | dict[str, Any]]:
    """A trial meeting each kind of error (steps 3 to 6) between calls that worked."""
    return [
        message_step(1, "Let me look at the stock."),
        tool_step(2, "list_inventory", {}, INVENTORY),
        tool_step(3, "inspect", {}, f"error: unknown tool 'inspect'; available: {TOOLS}", is_error=True),
        tool_step(
            4,
            "restock",
            {},
            "error: the arguments of restock are not valid JSON (Expecting value); send a JSON object",
            is_error=True,
            arguments_text='{"sku": ',
        ),
        tool_step(5, "git_commit", {"message": "m"}, "error: nothing to commit, working tree clean", is_error=True),
        command_step(6, "ls /out", "ls: cannot access '/out': No such file or directory", 2),
        command_step(7, "mkdir /out", "", 0),
        tool_step(8, "restock", {"sku": "SKU-2", "quantity": 4}, "restocked SKU-2: stock 0 -> 4"),
        message_step(9, "Done."),
    ]


def test_each_kind_of_error_is_marked_in_the_steps_and_the_outline_and_the_first_is_linked(page, database, catalog):
    doc = parse(page.get(f"/trials/{record(database, catalog, outcome(every_kind()))}").text)
    erring = ["step-3", "step-4", "step-5", "step-6"]
    assert [attr(li, "id") for li in doc.select("li.step.has-error")] == erring
    for li in doc.select("li.step"):
        said = texts(li, ".step-head .error-badge")
        framed = li.select(".observation.error-result")
        if attr(li, "id") in erring:
            assert said == ["Error"] and len(framed) == 1, attr(li, "id")
        else:
            assert said == [] and framed == [], attr(li, "id")
    assert "nothing to commit" in one(doc, "#step-5 .observation.error-result").get_text()
    assert "cannot access '/out'" in one(doc, "#step-6 .observation.error-result").get_text()

    outline = one(doc, "nav.outline")
    marked = [a for a in outline.select("a") if a.select(".error-mark")]
    assert [attr(a, "href") for a in marked] == ["#step-3", "#step-4", "#step-5", "#step-6"]
    assert texts(outline, ".error-mark") == ["Error"] * 4
    assert " ".join(one(outline, 'a[href="#step-5"]').get_text().split()) == "5 git_commit Error"  # its name says it

    jump = one(doc, "#transcript p.error-jump")
    assert [(attr(a, "href"), a.get_text()) for a in jump.select("a")] == [("#step-3", "Jump to first error (step 3)")]
    assert "4 steps with an error" in jump.get_text()
    assert "e next error" in one(doc, ".transcript-tools").get_text()  # the key, listed with j and k


def test_a_trial_without_errors_shows_no_error_marks_and_no_jump_link(page, database, catalog):
    steps: list[Step | dict[str, Any]] = [message_step(1, "Looking."), tool_step(2, "list_inventory", {}, INVENTORY)]
    steps += [message_step(3, "Done."), command_step(4, "true", "", 0)]
    doc = parse(page.get(f"/trials/{record(database, catalog, outcome(steps))}").text)
    assert doc.select("li.step.has-error, .error-badge, .error-result, .error-mark, .error-jump") == []
    assert "Jump to first error" not in doc.get_text()


def test_a_trial_with_no_steps_has_no_jump_link(page, database, catalog):
    doc = parse(page.get(f"/trials/{record(database, catalog, outcome([]))}").text)
    assert doc.select(".error-jump") == [] and "The agent took no steps" in doc.get_text()


def test_repeated_errors_are_counted_on_their_group_which_opens_at_the_first_error(page, database, catalog):
    refused = f"error: unknown tool 'inspect'; available: {TOOLS}"
    steps: list[Step | dict[str, Any]] = [tool_step(1, "list_inventory", {}, INVENTORY)]
    steps += [tool_step(n, "inspect", {}, refused, is_error=True) for n in range(2, 5)]
    steps += [tool_step(n, "list_inventory", {}, INVENTORY) for n in range(5, 8)]  # repeats without an error
    steps.append(tool_step(8, "restock", {"sku": "SKU-9"}, "error: restock needs quantity", is_error=True))
    doc = parse(page.get(f"/trials/{record(database, catalog, outcome(steps))}").text)
    group = one(doc, "li.step-group#steps-2-4")
    assert texts(group, "summary .error-badge") == ["3 errors"]
    assert "open" in one(group, "details.repeats").attrs  # the first error is in it: the jump link's target shows
    assert [attr(li, "id") for li in group.select("li.step.has-error")] == ["step-2", "step-3", "step-4"]
    calm = one(doc, "li.step-group#steps-5-7")
    assert calm.select(".error-badge") == [] and "open" not in one(calm, "details.repeats").attrs
    outline = one(doc, "nav.outline")
    marked = [(attr(a, "href"), one(a, ".error-mark").get_text()) for a in outline.select("a:has(.error-mark)")]
    assert marked == [("#step-2", "3 errors"), ("#step-8", "Error")]
    jump = one(doc, "p.error-jump")
    assert attr(one(jump, "a"), "href") == "#step-2" and "4 steps with an error" in jump.get_text()


def test_an_error_step_matching_a_search_is_still_marked(page, database, catalog):
    trial = record(database, catalog, outcome(every_kind()))
    doc = parse(page.get(f"/trials/{trial}?q=inspect").text)
    step = one(doc, "li.step.match.has-error#step-3")
    assert texts(step, ".step-head .error-badge") == ["Error"]
    assert "unknown tool" in one(step, "pre.observation.error-result").get_text()


def test_steps_stored_before_the_flag_read_as_they_did(page, database, catalog):
    """A step stored before errors were flagged (its text says "error: …", no isError) shows as before: the rule
    reads what is stored, never guesses from the text."""
    old = {"step": 1, "tool": "restock", "command": "restock {}", "observation": "error: restock needs sku, quantity"}
    doc = parse(page.get(f"/trials/{record(database, catalog, outcome([old]))}").text)
    assert "error: restock needs sku, quantity" in one(doc, "#step-1 .observation").get_text()
    assert doc.select(".has-error, .error-jump") == []


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_images_a_tool_returned_are_drawn_and_only_raster_data_is(page, database, catalog):
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "the chart"},
        {"type": "image", "mimeType": "image/png", "data": PNG},
        {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz48L3N2Zz4="},  # never drawn: no SVG
        {"type": "image", "mimeType": "image/png", "data": 'x" onerror="alert(1)'},  # no base64: not drawn
        {"type": "image", "mimeType": "image/png", "omitted": "400000 characters of base64 over the 262144 kept"},
        # ATIF's image parts (an imported trajectory): a data: URL is drawn, a file path or a mislabelled URL is not
        {"type": "image", "source": {"media_type": "image/gif", "path": f"data:image/gif;base64,{PNG}"}},
        {"type": "image", "source": {"media_type": "image/png", "path": "images/step-1.png"}},
        {"type": "image", "source": {"media_type": "image/png", "path": f"data:image/svg+xml;base64,{PNG}"}},
    ]
    steps: list[Step | dict[str, Any]] = [tool_step(1, "chart", {}, parts), message_step(2, "Done.")]
    doc = parse(page.get(f"/trials/{record(database, catalog, outcome(steps))}").text)
    images = doc.select("#step-1 img.result-image")
    assert [attr(img, "src") for img in images] == [f"data:image/png;base64,{PNG}", f"data:image/gif;base64,{PNG}"]
    assert "image/png" in attr(images[0], "alt")
    assert "[image image/png]" in one(doc, "#step-1 .observation").get_text()  # the text still names each part
    assert "onerror" not in str(one(doc, "#step-1"))
