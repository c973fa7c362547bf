"""Triage in a real browser (Debian's chromium): from "Unreviewed failures" a reviewer walks the failed trials with
the keyboard (n / p, r marks reviewed, x opens exclude, l the label picker, ? the keys), and labels and excludes
selected rows of the explorer in bulk."""

from __future__ import annotations

from tests.browser.test_browser import browser_page, live_server  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, log_in, member_with_failures, shot
from tests.conftest import ApiClient
from tests.helpers import api_ids

pytestmark = BROWSER_MARKS  # drives chromium


def test_a_reviewer_walks_unreviewed_failures_with_the_keyboard(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    app,
    database,
    make_member,
):
    member = member_with_failures(database, make_member, 6)
    api = ApiClient(app.test_client(), member)
    assert api.post("/api/v1/labels", {"name": "flaky-verifier", "color": "red"}).status_code == 201
    unreviewed = api_ids(api, "reviewState=unreviewed&rewardBand=failed")
    assert len(unreviewed) >= 3
    page = browser_page
    log_in(page, live_server, member.email, member.password)

    page.click("text=Unreviewed failures")
    page.wait_for_url(f"{live_server}/trials?reviewState=unreviewed&rewardBand=failed")
    page.click("table.trials tbody tr:first-child td a[href^='/trials/']")
    page.wait_for_selector("#triage")
    page.wait_for_load_state("load")
    assert page.url.startswith(f"{live_server}/trials/{unreviewed[0]}?")
    page.keyboard.press("?")
    assert page.locator("#triage-keys").is_visible()
    shot(page, "30-triage-keys")
    page.keyboard.press("?")
    assert page.locator("#triage-keys").is_hidden()

    page.keyboard.press("n")
    page.wait_for_url(f"{live_server}/trials/{unreviewed[1]}?*")
    page.keyboard.press("p")
    page.wait_for_url(f"{live_server}/trials/{unreviewed[0]}?*")
    page.keyboard.press("r")  # marks it reviewed and comes back to it, with its list
    page.wait_for_selector(".review-state.review-reviewed")
    page.wait_for_load_state("load")  # the page's scripts (its keys) run, not only its HTML parsed
    assert page.url.startswith(f"{live_server}/trials/{unreviewed[0]}?")
    page.keyboard.press("n")  # the next match of the list it was opened from
    page.wait_for_url(f"{live_server}/trials/{unreviewed[1]}?*")

    page.keyboard.press("l")
    assert page.evaluate("document.activeElement.id") == "label_id"
    page.keyboard.press("Escape")
    page.locator("body").focus()
    page.click("#add-label button[type=submit]")
    page.wait_for_selector("#trial-labels .label-chip")
    page.keyboard.press("x")
    assert page.locator("#review-edit").get_attribute("open") is not None
    assert page.evaluate("document.activeElement.id") == "reason"
    page.keyboard.type("the verifier crashed")  # typing in the reason: keys do nothing
    page.click("#review-form button[type=submit]")
    page.wait_for_selector(".review-state.review-excluded")
    shot(page, "31-trial-excluded")
    assert api.get(f"/api/v1/trials/{unreviewed[1]}").json["reviewState"] == "excluded"
    assert api.get(f"/api/v1/trials/{unreviewed[1]}").json["labels"] == ["flaky-verifier"]
    assert unreviewed[0] not in api_ids(api, "reviewState=unreviewed")


def test_bulk_actions_label_and_exclude_the_selected_rows(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    app,
    database,
    make_member,
):
    member = member_with_failures(database, make_member, 6)
    api = ApiClient(app.test_client(), member)
    assert api.post("/api/v1/labels", {"name": "wrong-customer"}).status_code == 201
    failed = api_ids(api, "status=failed")
    page = browser_page
    log_in(page, live_server, member.email, member.password)
    page.goto(f"{live_server}/trials?status=failed")
    boxes = page.locator('input[name="trial_id"]')
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.click("#bulk button[value=label]")
    page.wait_for_selector(".flashes")
    assert "Labelled 2 trials wrong-customer." in page.locator(".flashes").inner_text()
    assert page.url == f"{live_server}/trials?status=failed&sort=failed"
    page.locator('input[name="trial_id"]').nth(0).check()
    page.fill("#bulk-reason", "ordered for the wrong customer")
    page.click("#bulk button[value=excluded]")
    page.wait_for_selector(".flashes:has-text('Excluded 1 trial from training exports.')")  # not the first's flash
    shot(page, "32-explorer-bulk")
    assert sorted(api_ids(api, "label=wrong-customer")) == sorted(failed[:2])
    assert api_ids(api, "reviewState=excluded") == [failed[0]]
