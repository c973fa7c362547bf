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
