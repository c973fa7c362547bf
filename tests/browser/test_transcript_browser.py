"""The transcript in a real browser (Debian's chromium, as tests/browser/test_browser.py): j/k move between steps, a
group of repeats is one stop until opened, Expand all / Collapse all toggle every fold, the download has its name,
e goes from error to error."""

from __future__ import annotations

from domain.trajectory import message_step, tool_step
from tests.browser.test_browser import browser_page, live_server  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, log_in, shot
from tests.factories import make_catalog
from tests.integration.trials.test_transcript import INVENTORY, outcome, record, twelve_steps

pytestmark = BROWSER_MARKS  # drives chromium


def focused_step(page) -> str | None:
    """The id of the step (or group of repeats) holding the keyboard focus."""
    step = page.locator("li.step:focus")
    if step.count():
        return step.get_attribute("id")
    group = page.locator("li.step-group:has(> details > summary:focus)")
    return group.get_attribute("id") if group.count() else None


def test_j_and_k_move_between_steps_and_the_buttons_open_and_close_every_fold(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
):
    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=1)
    trial = record(database, catalog, outcome(twelve_steps()))
    page = browser_page
    log_in(page, live_server, member.email, member.password)

    page.goto(f"{live_server}/trials/{trial}")
    page.wait_for_selector(".transcript-tools:not([hidden])")  # the script un-hides the buttons it drives
    assert page.locator(".outline a").count() == 4  # 1, the group of 2 to 10, 11, 12
    shot(page, "12-transcript")

    page.keyboard.press("j")
    assert focused_step(page) == "step-1" and page.url.endswith("#step-1")
    page.keyboard.press("j")
    assert focused_step(page) == "steps-2-10"  # the closed group is one stop
    page.keyboard.press("j")
    assert focused_step(page) == "step-11" and page.url.endswith("#step-11")
    page.keyboard.press("k")
    assert focused_step(page) == "steps-2-10"
    page.keyboard.press("Enter")  # opens the group: its steps become stops
    assert page.locator("#steps-2-10 > details[open]").count() == 1
    page.keyboard.press("j")
    assert focused_step(page) == "step-2"
    page.keyboard.press("j")
    assert focused_step(page) == "step-3"
    page.keyboard.press("k")
    page.keyboard.press("k")
    assert focused_step(page) == "steps-2-10"

    page.click("button:has-text('Collapse all')")
    assert page.locator("#transcript details[open]").count() == 0
    page.click("button:has-text('Expand all')")
    assert page.locator("#transcript details:not([open])").count() == 0
    assert page.locator("#step-6").is_visible()
    shot(page, "13-transcript-expanded")

    page.locator("#step-12").focus()
    page.keyboard.press("k")
    assert focused_step(page) == "step-11"

    with page.expect_download() as download_info:
        page.click("a.download")
    assert download_info.value.suggested_filename == "admin-console-v1-run-1-trial-1-trajectory.json"


def test_the_outline_stacks_above_the_transcript_on_a_phone(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
):
    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=1)
    trial = record(database, catalog, outcome(twelve_steps()))
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server, member.email, member.password)
    page.goto(f"{live_server}/trials/{trial}")
    outline, steps = page.locator(".outline").bounding_box(), page.locator(".transcript .steps").first.bounding_box()
    assert outline["y"] + outline["height"] <= steps["y"]  # above, not beside
    assert outline["width"] > 300
    shot(page, "14-transcript-390")


def test_e_goes_to_the_first_error_then_the_next_opening_a_group_and_round_again(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
):
    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=1)
    steps = [tool_step(1, "list_inventory", {}, INVENTORY)]
    steps.append(tool_step(2, "restock", {"sku": "SKU-2"}, "error: restock needs quantity", is_error=True))
    steps += [tool_step(n, "inspect", {}, "error: unknown tool 'inspect'", is_error=True) for n in range(3, 6)]
    steps.append(message_step(6, "I give up."))
    trial = record(database, catalog, outcome(steps))
    page = browser_page
    log_in(page, live_server, member.email, member.password)

    page.goto(f"{live_server}/trials/{trial}")
    page.wait_for_selector(".transcript-tools:not([hidden])")
    assert "e next error" in page.locator(".transcript-tools").inner_text()
    assert page.locator("#steps-3-5 > details[open]").count() == 0  # the second error's group starts closed
    page.keyboard.press("e")
    assert focused_step(page) == "step-2" and page.url.endswith("#step-2")
    page.keyboard.press("e")
    assert focused_step(page) == "step-3" and page.url.endswith("#step-3")
    assert page.locator("#steps-3-5 > details[open]").count() == 1  # opened to show it
    shot(page, "15-transcript-error")
    page.keyboard.press("e")
    page.keyboard.press("e")
    assert focused_step(page) == "step-5"
    page.keyboard.press("e")
    assert focused_step(page) == "step-2"  # round again after the last
    page.keyboard.press("j")
    assert focused_step(page) == "steps-3-5"  # j and k go on from where e left
    page.locator("#step-6").focus()
    page.keyboard.press("e")
    assert focused_step(page) == "step-2"  # from a step without an error: the first

    page.click("text=Jump to first error (step 2)")
    assert page.url.endswith("#step-2") and page.locator("#step-2").is_visible()
