"""The review queue in a real browser (Debian's chromium), by keyboard alone: from the explorer's "Review these as a
queue" a reviewer makes 20 decisions (reviewed, reviewed with a label, excluded with a reason typed once and then
remembered, a category from the organization's list), undoes the last one, goes back with p to a trial already
decided, while a second reviewer's queue skips the trials the first has open and shows "Being reviewed by" on one
opened directly. The decision panel sits beside the transcript (sticky) at 1440 px and under it at 390 px."""

from __future__ import annotations

import re

from sqlalchemy import text

from tests.browser.test_accessibility import MEASURE, axe_violations, describe
from tests.browser.test_browser import browser_page, live_server  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, log_in, shot
from tests.conftest import ApiClient
from tests.factories import finish_runs, make_catalog
from tests.helpers import api_ids

pytestmark = BROWSER_MARKS  # drives chromium

FAILED = "reviewState=unreviewed&rewardBand=failed"
REASON = "the verifier crashed"


def at(page, position: int, size: int) -> None:
    """Wait until the queue shows trial `position` of `size` (the answer of the last key swapped in)."""
    page.locator("#queue h1", has_text=f"trial {position} of {size}").wait_for()


def accessible(page) -> None:
    """axe-core finds nothing on the page as it is now, nothing spills sideways, and every button is 24 px or more."""
    violations = axe_violations(page)
    assert not violations, describe(violations)
    measured = page.evaluate(MEASURE)
    assert measured["scrollWidth"] <= measured["innerWidth"], measured["wide"]
    assert not measured["smallTargets"] and not measured["weakBorders"], measured


def shown(page) -> str:
    """The id of the trial the queue shows (its decision form posts to it)."""
    return page.locator("form#decision").get_attribute("action").rsplit("/", 1)[1]


def test_a_reviewer_works_a_queue_by_keyboard_while_another_is_kept_off_her_trials(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    app,
    database,
    make_member,
):
    ann = make_member("ann@acme.test", "Acme RL", "member")
    bob = make_member("bob@acme.test", ann.org, "member")
    finish_runs(database, make_catalog(database, ann.org.id, {"kind": "scripted", "skill": 0.2}, attempt_count=8), 6)
    api = ApiClient(app.test_client(), ann)
    for name, color in (("flaky-verifier", "red"), ("wrong-customer", "orange")):
        assert api.post("/api/v1/labels", {"name": name, "color": color}).status_code == 201
    listed = api_ids(api, FAILED)
    size = len(listed)
    assert size >= 24
    page = browser_page
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, live_server, ann.email, ann.password)
    page.goto(f"{live_server}/trials?{FAILED}")
    page.focus("form.queue-start button")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"{live_server}/queue/[0-9a-f-]+/1$"))
    page.wait_for_load_state("load")
    queue_url = page.url.rsplit("/", 1)[0]
    at(page, 1, size)
    assert shown(page) == listed[0]

    # the panel beside the transcript, and still in view after scrolling the transcript
    panel, trial = page.locator(".queue-panel").bounding_box(), page.locator(".queue-trial").bounding_box()
    assert panel and trial and panel["x"] >= trial["x"] + trial["width"] and panel["y"] < 450
    page.evaluate("window.scrollTo(0, 1500)")
    assert page.evaluate("window.scrollY") > 0
    assert 0 <= page.locator(".queue-panel").bounding_box()["y"] <= 40
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "40-review-queue")

    keys_per_decision = []
    expected = {}
    for n in range(20):
        kind = ("label", "exclude", "category", "reviewed", "reviewed")[n % 5]
        trial_id = shown(page)
        if kind == "label":
            keys = ["1", "r"]
            expected[trial_id] = ("reviewed", ["flaky-verifier"])
        elif kind == "exclude":
            keys = ["x"] if n > 1 else ["x", *REASON, "Enter"]  # the reason is typed once, then remembered
            expected[trial_id] = ("excluded", [])
        elif kind == "category":
            keys = ["c", "ArrowDown", "Enter", "r"]  # the first of the organization's categories
            expected[trial_id] = ("reviewed", [])
        else:
            keys = ["r"]
            expected[trial_id] = ("reviewed", [])
        for key in keys:
            page.keyboard.press(key)
        keys_per_decision.append(len(keys))
        at(page, n + 2, size)
    shot(page, "41-review-queue-after-20")
    accessible(page)  # after an action: its words shown, the focus on the queue
    decided = {t: (api.get(f"/api/v1/trials/{t}").json["reviewState"], api.get(f"/api/v1/trials/{t}").json["labels"])
               for t in expected}  # fmt: skip
    assert decided == expected
    assert list(expected) == listed[:20]
    with database.session(ann.org.id) as session:
        categories = session.execute(
            text("SELECT DISTINCT failure_category FROM failure_category_counts WHERE trials > 0 ORDER BY 1")
        ).scalars()
        first_category = next(iter(categories))
        human = session.execute(
            text("SELECT human_category FROM trial_reviews WHERE evaluation_trial_id = :t"), {"t": listed[2]}
        ).scalar_one()
    assert human == first_category  # c, ↓ picked the first of the organization's categories
    assert api.get(f"/api/v1/trials/{listed[1]}").json["reviewState"] == "excluded"
    assert sum(keys_per_decision[2:]) / len(keys_per_decision[2:]) < 2  # after the first exclusion's reason

    # u: the 20th decision undone, its trial shown again as it was
    page.keyboard.press("u")
    at(page, 20, size)
    assert shown(page) == listed[19]
    assert "Undone: trial 20" in page.locator("#queue-said").inner_text()
    page.emulate_media(color_scheme="dark")
    accessible(page)
    assert api.get(f"/api/v1/trials/{listed[19]}").json["reviewState"] == "unreviewed"
    # p: back to trial 19, decided and still reachable; n forward again
    page.keyboard.press("p")
    at(page, 19, size)
    assert shown(page) == listed[18] and page.locator(".queue-now .review-state").inner_text() == "reviewed"
    page.keyboard.press("n")
    at(page, 20, size)
    page.keyboard.press("p")
    at(page, 19, size)
    assert page.url == f"{queue_url}/19"

    # a second reviewer: her queue skips what ann has open (19, 20 and 21 were opened in the last ten minutes)
    context = page.context.browser.new_context(viewport={"width": 390, "height": 844})
    other = context.new_page()
    other.set_default_timeout(20_000)
    log_in(other, live_server, bob.email, bob.password)
    other.goto(f"{live_server}/trials?{FAILED}")
    other.focus("form.queue-start button")
    other.keyboard.press("Enter")
    other.wait_for_url(re.compile(rf"{live_server}/queue/[0-9a-f-]+/\d+$"))
    other.wait_for_load_state("load")
    opened = shown(other)
    assert opened not in (listed[19], listed[20])  # ann's
    bob_queue = other.url.rsplit("/", 1)[0]
    # on a phone the panel is under the trial
    panel, trial = other.locator(".queue-panel").bounding_box(), other.locator(".queue-trial").bounding_box()
    assert panel and trial and panel["y"] >= trial["y"] + trial["height"]
    assert other.evaluate("document.documentElement.scrollWidth") <= 390
    other.goto(f"{bob_queue}/1")  # ann's trial 20, opened directly
    other.wait_for_load_state("load")
    assert shown(other) == listed[19]
    assert other.locator(".claim-notice").inner_text().startswith("Being reviewed by ann@acme.test")
    other.keyboard.press("r")  # the button is disabled: nothing is sent
    shot(other, "42-review-queue-claimed")
    accessible(other)
    context.close()
    assert api.get(f"/api/v1/trials/{listed[19]}").json["reviewState"] == "unreviewed"
