"""A dataset built in a real browser (Debian's chromium, htmx on): named in its form (a blank name refused in place),
"3 tasks of this version" added, the preview showing the three tasks' text, saved, and the version's page showing
them; the same list again opens that version instead of making another."""

from __future__ import annotations

from tests.browser.test_accessibility import axe_violations, describe
from tests.browser.test_browser import browser_page, live_server  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, log_in, shot
from tests.factories import make_catalog
from worker.environments import load

pytestmark = BROWSER_MARKS  # drives chromium


def task_texts(page, where: str) -> list[str]:
    return [" ".join(text.split()) for text in page.locator(f"{where} .dataset-tasks .task-text").all_inner_texts()]


def test_a_member_adds_three_tasks_of_a_version_previews_their_text_and_saves_them(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
):
    member = make_member("ann@acme.test", "Acme RL", "member")
    make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.5}, params={"skus": 6})
    asked = [load({"environment": "admin-console", "params": {"skus": 6}}).reset(seed).text for seed in (1, 2, 3)]
    page = browser_page
    log_in(page, live_server, member.email, member.password)
    page.goto(f"{live_server}/environments")
    page.click("nav[aria-label=Main] a:text('Datasets')")
    page.wait_for_url(f"{live_server}/datasets")
    assert "No datasets yet." in page.locator(".empty-state").inner_text()

    page.click("#dataset-form button[type=submit]")  # no name
    assert "Enter a name of 1 to 200 characters." in page.locator("#dataset-name-error").inner_text()
    page.fill("#dataset-name", "shop-3")
    page.fill("#dataset-description", "three shop tasks")
    page.click("#dataset-form button[type=submit]")
    page.wait_for_selector("text=Created the dataset shop-3.")
    assert page.locator("h1").inner_text() == "shop-3"

    page.select_option("#environment_version_id", label="admin-console v1 (built-in)")
    page.fill("#count", "3")
    page.click("button[value=add]")
    page.wait_for_selector("#preview-heading:text('Preview: 3 tasks')")
    assert page.locator("#draft").input_value().endswith(" 1..3  # admin-console v1")
    assert task_texts(page, ".version-preview") == asked
    violations = axe_violations(page)
    assert violations == [], describe(violations)
    shot(page, "50-dataset-preview")

    page.click("button[value=save]")
    page.wait_for_url(f"{live_server}/datasets/*/versions/1")
    assert "Saved v1 of shop-3: 3 tasks." in page.locator(".flashes").inner_text()
    assert task_texts(page, "#version-tasks") == asked
    shot(page, "51-dataset-version")

    page.click(".crumbs a:text('shop-3')")
    page.click("#versions a:text('Start from v1')")
    page.click("button[value=preview]")
    page.wait_for_selector("text=these tasks, in this order, are v1")
    page.click("button[value=save]")
    page.wait_for_url(f"{live_server}/datasets/*/versions/1")
    assert "These 3 tasks are already v1 of shop-3: nothing new was saved." in page.locator(".flashes").inner_text()
