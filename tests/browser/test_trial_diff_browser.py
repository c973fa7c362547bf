"""The trial diff in a real chromium (as tests/browser/test_accessibility.py): reached from the trial page, two
columns at 1440 px and one (A above B) at 390 px, nothing wider than a phone, the jump to the first divergence, and
axe-core finding nothing in the light and the dark scheme at both widths."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from domain.trajectory import tool_step
from tests.browser.test_accessibility import MEASURE, axe_violations, describe
from tests.browser.test_browser import browser_page, live_server  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, log_in, shot
from tests.factories import make_catalog
from tests.integration.trials.test_trial_diff import NOVICE, record_run, restock

pytestmark = BROWSER_MARKS  # drives chromium


def chatty(quantity: int, reward: float = 0.0):
    """A restock trial with long output: a 3 KB JSON observation and a long unbroken identifier in a call."""
    inventory = {"items": [{"sku": f"SKU-{i:04d}", "name": f"widget {i}", "quantity": i * 3} for i in range(60)]}
    trial = restock(quantity, reward=reward)
    extra = [
        tool_step(5, "list_inventory", {"page": 2}, json.dumps(inventory)),
        tool_step(6, "note", {"text": "SKU-0007-" * 30}, "noted " + "abcdef0123456789" * 20),
    ]
    return replace(trial, steps=[*trial.steps, *extra])


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_diff_from_the_trial_page_in_two_columns_then_stacked_with_no_axe_violation(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
    scheme,
):
    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, NOVICE, attempt_count=2)
    first, _ = record_run(database, catalog, [chatty(4, reward=1.0), chatty(5)])
    page = browser_page
    page.emulate_media(color_scheme=scheme)
    log_in(page, live_server, member.email, member.password)

    page.goto(f"{live_server}/trials/{first}")
    page.click("text=Compare with another attempt of this task")
    page.wait_for_url(f"{live_server}/trials/{first}/attempts")
    problems = checked(page, "trial-attempts", scheme)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.click("table.attempts >> text=Trial 2 of 2")
    page.wait_for_selector("#first-divergence")
    assert "/trials/diff?a=" in page.url

    def side_by_side(width: int) -> None:
        paired = page.locator("ol.diff-rows > li").nth(1)  # list_inventory on both sides
        a, b = paired.locator(".side-a").bounding_box(), paired.locator(".side-b").bounding_box()
        assert a is not None and b is not None
        if width == 1440:
            assert abs(a["y"] - b["y"]) < 1 and b["x"] >= a["x"] + a["width"], (a, b)  # side by side
        else:
            assert b["y"] >= a["y"] + a["height"] and abs(a["x"] - b["x"]) < 1, (a, b)  # A above B

    problems += checked(page, "trial-diff", scheme, side_by_side)
    assert not problems, f"{scheme}:\n" + "\n".join(problems)

    page.click("#diff-summary >> text=Go to the first divergence")
    assert page.url.endswith("#first-divergence")
    divergence = page.locator("#first-divergence")
    assert divergence.locator(".divergence-mark").inner_text() == "First divergence"
    assert divergence.is_visible() and divergence.evaluate(
        "e => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight; }"
    )
    shot(page, f"trial-diff-first-divergence-390-{scheme}")


def checked(page, name: str, scheme: str, layout=None) -> list[str]:
    """The page reloaded at 1440 then 390 px: `layout(width)` asserted, and what axe-core and the measures find."""
    problems = []
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(page.url.split("#")[0])
        shot(page, f"{name}-{width}-{scheme}")
        if layout is not None:
            layout(width)
        violations = axe_violations(page)
        if violations:
            problems.append(
                f"{name} at {width} px: axe-core found {len(violations)} violations:\n{describe(violations)}"
            )
        measured = page.evaluate(MEASURE)
        if measured["scrollWidth"] > measured["innerWidth"]:
            problems.append(f"{name} at {width} px: the page is {measured['scrollWidth']} px wide: {measured['wide']}")
        if measured["smallTargets"]:
            problems.append(f"{name} at {width} px: targets under 24 x 24 px: {measured['smallTargets'][:6]}")
    return problems


def test_a_reviewer_labels_notes_and_excludes_from_the_diff_in_place(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
):
    """The restock of 4 beside the restock of 5 in one row, `quantity` marked with A's 4 struck and B's 5 inserted;
    then B labelled, A noted and excluded through the panels, each answer swapped in place (the page is never
    loaded again), with axe-core finding nothing after each action at both widths."""
    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, NOVICE, attempt_count=2)
    first, second = record_run(database, catalog, [restock(4, reward=1.0), restock(5)])
    page = browser_page
    log_in(page, live_server, member.email, member.password)
    page.goto(f"{live_server}/settings/labels")
    page.fill("#label-name", "flaky")
    page.click("#new-label >> text=Add label")
    page.wait_for_selector("text=Label flaky added.")

    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server}/trials/diff?a={first}&b={second}")
    row = page.locator("ol.diff-rows > li.other-arguments")
    assert row.count() == 1 and row.locator("dt mark").inner_text() == "quantity"
    assert row.locator("del code").inner_text() == "4" and row.locator("ins code").inner_text() == "5"
    struck = row.locator("del").evaluate("e => getComputedStyle(e).textDecorationLine")
    assert "line-through" in struck  # not the colour alone
    page.evaluate("() => { window.notReloaded = true; }")

    problems: list[str] = []
    page.select_option("#diff-label-b", label="flaky")
    page.click("#review-b >> text=Add label")
    page.wait_for_selector("#review-b-said >> text=Label added.")
    assert page.locator("#review-b .diff-labels .label-chip").inner_text() == "flaky"
    problems += _axe_both_widths(page, "trial-diff-labelled")
    page.fill("#diff-note-a", "gave up after the restock")
    page.click("#review-a >> text=Add note")
    page.wait_for_selector("#review-a-said >> text=Note added.")
    page.fill("#diff-reason-a", "the verifier crashed")
    page.click("#review-a >> text=Exclude A from training exports")
    page.wait_for_selector("#review-a-said >> text=Excluded from training exports.")
    assert "the verifier crashed" in page.locator("#review-a").inner_text()
    problems += _axe_both_widths(page, "trial-diff-excluded")
    assert page.evaluate("() => window.notReloaded === true")  # every answer came in place
    assert not problems, "\n".join(problems)


def _axe_both_widths(page, name: str) -> list[str]:
    """axe-core and the measures on the page as it is (not reloaded) at 1440 and 390 px."""
    problems = []
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        shot(page, f"{name}-{width}")
        if violations := axe_violations(page):
            problems.append(f"{name} at {width} px: axe-core found {len(violations)}:\n{describe(violations)}")
        measured = page.evaluate(MEASURE)
        if measured["scrollWidth"] > measured["innerWidth"]:
            problems.append(f"{name} at {width} px: the page is {measured['scrollWidth']} px wide: {measured['wide']}")
        if measured["smallTargets"]:
            problems.append(f"{name} at {width} px: targets under 24 x 24 px: {measured['smallTargets'][:6]}")
    page.set_viewport_size({"width": 1440, "height": 900})
    return problems
