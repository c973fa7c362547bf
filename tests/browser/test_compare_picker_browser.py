"""The compare picker in chromium: it fits a 390 px phone (the document no wider than the window) and passes axe at
both sizes, light and dark, refusal included; the menus follow the environment with JavaScript (an htmx swap) and
without (its button); every refusal, a 404 included, is drawn in place where htmx used to swallow it."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.browser.test_accessibility import MEASURE, axe_violations, describe
from tests.browser.test_browser import live_server  # noqa: F401 (fixture)
from tests.browser_support import BROWSER_MARKS, chromium, log_in, shot
from tests.factories import finish_runs, make_catalog

pytestmark = BROWSER_MARKS  # drives chromium

EXPERT = {"kind": "scripted", "skill": 0.9}


@pytest.fixture
def picker(database, make_member):
    """A member whose admin console has one version and two runs of an evaluator with a long name, and whose
    support desk has one version."""
    member = make_member("ann@acme.test", "Acme RL", "member")
    shop = make_catalog(database, member.org.id, EXPERT, 2, config_name="scripted-expert-with-a-rather-long-name")
    runs = finish_runs(database, shop, 2)
    desk = make_catalog(database, member.org.id, EXPERT, 2, environment="support-desk", config_name="desk")
    return member, shop, runs, desk


def fits_and_passes_axe(page, what: str) -> None:
    measured = page.evaluate(MEASURE)
    assert measured["scrollWidth"] <= measured["innerWidth"], (
        f"{what}: the page is {measured['scrollWidth']} px wide in a {measured['innerWidth']} px window; "
        f"sticking out: {', '.join(measured['wide'])}"
    )
    violations = axe_violations(page)
    assert not violations, f"{what}: axe-core found {len(violations)} violations:\n{describe(violations)}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1440, 390])
def test_the_picker_fits_and_passes_axe_with_its_refusal(live_server, picker, width, scheme):  # noqa: F811
    member, shop, _, _ = picker
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 844})
        page.set_default_timeout(20_000)
        page.emulate_media(color_scheme=scheme)
        log_in(page, live_server, member.email, member.password)
        page.goto(f"{live_server}/compare")
        fits_and_passes_axe(page, f"the picker at {width} px, {scheme}")
        page.select_option("#pick-a", str(shop.version_id))
        page.select_option("#pick-b", str(shop.version_id))
        page.click("#compare-picker button[type=submit]")
        page.wait_for_selector("#compare-refusal")
        shot(page, f"compare-picker-refused-{width}-{scheme}")
        fits_and_passes_axe(page, f"the picker's refusal at {width} px, {scheme}")


def test_the_menus_follow_the_environment_and_refusals_show_in_place(live_server, picker):  # noqa: F811
    member, shop, runs, desk = picker
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.set_default_timeout(20_000)
        log_in(page, live_server, member.email, member.password)
        page.goto(f"{live_server}/compare")
        # Distinct defaults: the only version's two runs, the older as A.
        assert (page.input_value("#pick-a"), page.input_value("#pick-b")) == (str(runs[0]), str(runs[1]))
        page.focus("#environmentId")
        page.select_option("#environmentId", str(desk.environment_id))  # no button pressed: htmx swaps the menus
        page.wait_for_function("id => document.querySelector('#pick-b').value === id", arg=str(desk.version_id))
        assert page.locator(f"#pick-a option[value='{shop.version_id}']").count() == 0
        assert page.url.endswith(f"/compare?environmentId={desk.environment_id}")
        assert page.evaluate("document.activeElement.id") == "environmentId"  # the swap left the menu in place

        page.select_option("#environmentId", str(shop.environment_id))
        page.wait_for_function("id => document.querySelector('#pick-b').value === id", arg=str(runs[1]))
        page.select_option("#pick-a", str(runs[0]))
        page.select_option("#pick-a-evaluator", str(shop.config_id))
        page.click("#compare-picker button[type=submit]")
        refusal = page.locator("#compare-refusal[role=alert]")
        refusal.wait_for()
        assert refusal.inner_text().startswith("Side A is a run: an evaluator narrows a version")
        assert page.input_value("#pick-a-evaluator") == str(shop.config_id)  # the choices are kept

        # A side removed since the page was drawn: the 404 answer is drawn in place too (htmx swaps it).
        page.select_option("#pick-a-evaluator", "")
        page.evaluate(
            "id => { const o = document.querySelector('#pick-b option:checked'); o.value = id; }", str(uuid.uuid4())
        )
        page.click("#compare-picker button[type=submit]")
        page.wait_for_selector("#compare-refusal:has-text('Side B names nothing in this organization')")

        page.select_option("#pick-b", str(runs[1]))
        page.click("#compare-picker button[type=submit]")
        page.wait_for_url(re.compile(r".*/compare\?a=.*&b=.*"))
        page.wait_for_selector("#verdict-pass-at-1")


def test_without_javascript_the_button_reloads_the_menus(live_server, picker):  # noqa: F811
    member, _, _, desk = picker
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844})
        page = context.new_page()
        page.set_default_timeout(20_000)
        log_in(page, live_server, member.email, member.password)
        page.goto(f"{live_server}/compare")
        page.select_option("#environmentId", str(desk.environment_id))
        page.click("#compare-environment button[type=submit]")
        page.wait_for_url(f"{live_server}/compare?environmentId={desk.environment_id}")
        assert page.input_value("#pick-b") == str(desk.version_id)
        page.select_option("#pick-a", str(desk.version_id))
        page.click("#compare-picker button[type=submit]")
        assert page.locator("#compare-refusal").inner_text().startswith("A and B are the same version")
        context.close()
