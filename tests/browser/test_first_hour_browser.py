"""The first hour in a real browser (Debian's chromium): a new organization goes from nothing to compared runs by
its checklist, with no CLI call: an environment and an evaluator from their forms, two runs started from the
environment's page (the worker runs them), a failed trial opened, two runs compared, a dataset made; each step ticks
itself."""

from __future__ import annotations

from tests.browser.test_accessibility import axe_violations
from tests.browser.test_browser import browser_page, live_server  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, log_in, shot
from tests.helpers import work

pytestmark = BROWSER_MARKS  # drives chromium


def ticked(page) -> list[str]:
    """The checklist's steps that are done, by title."""
    return page.locator(".first-steps li.done a").all_inner_texts()


def test_a_new_organization_walks_the_checklist_to_a_comparison(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
):
    member = make_member("ann@newco.test", "NewCo", "member")
    page = browser_page
    log_in(page, live_server, member.email, member.password)
    page.goto(f"{live_server}/environments")
    assert page.locator("#first-steps-heading").inner_text().startswith("First steps (0 of 6 done)")
    assert axe_violations(page) == []  # the steps as a new organization sees them
    shot(page, "40-first-steps")

    page.click(".first-steps a:text('Create an environment')")
    page.fill("#f-name", "shop")
    page.fill("#f-spec-params-skus", "50")
    page.click("#environment-form button[type=submit]")
    assert "SKUs must be a whole number from 3 to 20" in page.locator("#f-spec-params-skus-error").inner_text()
    assert page.locator("#f-name").input_value() == "shop"  # the refused form is kept
    shot(page, "41-environment-form-refused")
    page.fill("#f-spec-params-skus", "6")
    page.click("#environment-form button[type=submit]")
    page.wait_for_selector("text=Created shop with version 1")

    page.goto(f"{live_server}/environments")
    assert ticked(page) == ["Create an environment"]
    page.click(".first-steps a:text('Create an evaluator')")
    page.fill("#f-name", "novice")
    page.fill("#f-agent-skill", "0.3")
    page.click("#evaluator-form button[type=submit]")
    page.wait_for_selector("text=Created the evaluator novice")

    page.goto(f"{live_server}/environments")
    page.click(".first-steps a:text('Start a run')")
    for _ in range(2):
        page.click("#start-run button[type=submit]")
        page.wait_for_url(f"{live_server}/runs/*")
        work(database)  # the worker, as `flask worker` would run it beside the dashboard
        page.go_back()
        page.reload()

    page.goto(f"{live_server}/environments")
    assert ticked(page) == ["Create an environment", "Create an evaluator", "Start a run"]
    page.click(".first-steps a:text('Open a failed trial')")
    page.wait_for_url(f"{live_server}/trials?*")
    page.click("table.trials tbody tr:first-child td a[href^='/trials/']")
    page.wait_for_selector("#triage")

    page.goto(f"{live_server}/environments")
    assert "Open a failed trial" in ticked(page)
    page.click(".first-steps a:text('Compare two runs')")
    page.wait_for_selector("#compare-picker")
    runs = page.locator("#pick-a optgroup[label^='Runs'] option").all()
    assert len(runs) == 2
    page.select_option("#pick-a", runs[1].get_attribute("value"))
    page.select_option("#pick-b", runs[0].get_attribute("value"))
    page.click("#compare-picker button[type=submit]")
    page.wait_for_selector("text=pass@k")

    page.goto(f"{live_server}/environments")
    assert "Compare two runs" in ticked(page) and "Make a dataset" not in ticked(page)
    page.click(".first-steps a:text('Make a dataset')")
    page.fill("#dataset-name", "shop-10")
    page.click("#dataset-form button[type=submit]")
    page.wait_for_selector("text=Created the dataset shop-10.")

    page.goto(f"{live_server}/environments")
    assert page.locator(".first-steps").count() == 0  # every step done: the checklist is gone
    shot(page, "42-environments-after-first-steps")
