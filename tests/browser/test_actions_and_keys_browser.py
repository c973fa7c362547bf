"""After an action, with every panel open, and by keyboard, in a real chromium (Debian's), over the accessibility
suite's organization of demo-like data:

* the message a page shows after an action (a label added to a trial, a bulk review from the explorer, a label
  created, a token created, logging out) and the error summary of a refused form (the trial page's review, a trial
  diff's note, the review queue's decision, a member's role, a task list with bad lines) pass axe-core at 1440 and
  390 px, light and dark, and fit the phone;
* every page opened with all of its panels (each <details>, the trial page's list of keys) fits a 390 px phone:
  a wide table scrolls inside its own region (the trial's History table made the page 467 px wide);
* `/` puts the cursor in the search field, on the explorer and from any other page (unless typing in a field, or
  with a form holding changes);
* the trial keys n / p / u work on a trial opened from a run page or by a link: the run's trials by number, then
  the run.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.test_accessibility import (  # noqa: F401 (fixtures)
    MEASURE,
    OWNER,
    PAGES,
    PUBLIC,
    axe_violations,
    base_url,
    browser,
    clean_database,
    describe,
    pages,
    site,
)
from tests.browser_support import BROWSER_MARKS, log_in, shot
from tests.conftest import PASSWORD

pytestmark = BROWSER_MARKS  # drives chromium

# Open every <details> (those inside opened ones too) and show the trial page's list of keys.
OPEN_EVERY_PANEL = """() => {
  for (let closed = document.querySelectorAll('details:not([open])'); closed.length;
       closed = document.querySelectorAll('details:not([open])')) {
    closed.forEach((details) => { details.open = true; });
  }
  document.querySelectorAll('#triage-keys[hidden]').forEach((keys) => { keys.hidden = false; });
}"""


def problems_after_action(page, name: str) -> list[str]:
    """axe-core's violations and the page's overflow at 1440 and 390 px, light and dark, of the page as an action
    left it (the message it shows)."""
    problems = []
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            violations = axe_violations(page)
            if violations:
                problems.append(f"{name} at {width} px, {scheme}:\n{describe(violations)}")
            measured = page.evaluate(MEASURE)
            if width == 390 and measured["scrollWidth"] > measured["innerWidth"]:
                problems.append(f"{name}: {measured['scrollWidth']} px wide at 390 px: {measured['wide']}")
        shot(page, f"after-{name}-{width}")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.emulate_media(color_scheme="light")
    return problems


def test_messages_after_actions_pass_axe(pages, browser, base_url, site):  # noqa: F811
    page = pages["owner"]
    page.set_viewport_size({"width": 1440, "height": 900})
    problems = []

    page.goto(base_url + site.paths["trial-repeats"])
    page.click("#add-label button[type=submit]")
    page.wait_for_selector(".flashes >> text=Label added.")
    problems += problems_after_action(page, "trial-label-added")

    page.goto(base_url + "/trials?rewardBand=failed")
    page.locator('input[name="trial_id"]').nth(0).check()
    page.click("#bulk button[value=reviewed]")
    page.wait_for_selector(".flashes >> text=Marked 1 trial reviewed.")
    problems += problems_after_action(page, "explorer-bulk-reviewed")

    page.goto(base_url + "/settings/labels")
    page.fill("#label-name", "needs-rerun")
    page.click("#new-label button[type=submit]")
    page.wait_for_selector(".flashes >> text=Label needs-rerun added.")
    problems += problems_after_action(page, "label-created")

    page.goto(base_url + "/settings/tokens")
    page.fill("#name", "nightly")
    page.click("text=Create token")
    page.wait_for_selector("#new-token")
    problems += problems_after_action(page, "token-created")

    # refused forms: every refusal at once in the error summary, which takes the focus
    page.goto(base_url + site.paths["trial-repeats"])
    page.click("#review-edit > summary")
    page.check("#review-form input[name=review_state][value=excluded]")
    page.fill("#reason", "")
    page.fill("#human_category", "no such!")
    page.click("#review-form button[type=submit]")
    page.wait_for_selector("#error-summary:focus")
    problems += problems_after_action(page, "trial-review-refused")

    page.goto(base_url + site.paths["trial-diff"])
    page.fill("#diff-note-b", " ")
    page.click("#review-b-body form:has(#diff-note-b) button[type=submit]")  # swapped in place
    page.wait_for_selector("#error-summary-b:focus")
    problems += problems_after_action(page, "trial-diff-note-refused")

    page.goto(base_url + "/trials?rewardBand=failed")
    page.click("form.queue-start button")
    page.wait_for_url(re.compile(r".*/queue/[0-9a-f-]+/\d+$"))
    page.select_option("#human_category", "+new")
    page.fill("#new_category", "gave up")
    page.fill("#reason", "")
    page.click("#decide-excluded")  # swapped in place
    page.wait_for_selector("#error-summary:focus")
    problems += problems_after_action(page, "queue-decision-refused")

    page.goto(base_url + site.paths["members"])  # a role no page offers (the menu changed meanwhile): refused
    page.evaluate("() => { document.querySelector('select[id^=role-] option:checked').value = 'admin'; }")
    page.locator("form[action$='/role'] button[type=submit]").first.click()
    page.wait_for_selector("#error-summary:focus")
    problems += problems_after_action(page, "member-role-refused")

    page.goto(base_url + site.paths["dataset-draft"])
    page.fill("#draft", "shop 1\nnot-a-version 2\n")
    page.click("#version-form button[value=preview]")  # swapped in place
    page.wait_for_selector("#error-summary:focus")
    assert page.locator("#error-summary li").count() == 2
    problems += problems_after_action(page, "dataset-draft-refused")

    context = browser.new_context()  # logging out here leaves the module's owner logged in
    visitor = context.new_page()
    log_in(visitor, base_url, OWNER, PASSWORD)
    visitor.click("button:has-text('Log out')")
    visitor.wait_for_selector(".flashes >> text=You have been logged out.")
    problems += problems_after_action(visitor, "logged-out")
    context.close()
    assert not problems, "\n".join(problems)


def test_every_page_with_every_panel_open_fits_a_phone(pages, base_url, site):  # noqa: F811
    page = pages["owner"]
    page.set_viewport_size({"width": 390, "height": 844})
    page.emulate_media(color_scheme="light")
    wide = []
    for name in (name for name in PAGES if name not in PUBLIC):
        page.goto(base_url + site.paths[name])
        page.wait_for_load_state("load")
        page.evaluate(OPEN_EVERY_PANEL)
        measured = page.evaluate(MEASURE)
        if measured["scrollWidth"] > measured["innerWidth"]:
            shot(page, f"panels-open-{name}-390")
            wide.append(f"{name}: {measured['scrollWidth']} px, sticking out: {', '.join(measured['wide'])}")
    assert not wide, "pages wider than a 390 px phone with their panels open:\n" + "\n".join(wide)

    page.goto(base_url + site.paths["trial"])  # the History table scrolls inside its own region
    page.click("#history > summary")
    history = page.locator("#history .scroll-region[role=region][aria-label=History] table")
    assert history.is_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390


def test_slash_puts_the_cursor_in_the_search_field(pages, base_url, site):  # noqa: F811
    page = pages["owner"]
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base_url}/trials?status=failed")
    page.wait_for_load_state("load")
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.name") == "q"
    assert page.locator("#trial-filters input[name=q]").input_value() == ""  # the key itself is not typed

    page.fill("#bulk-reason", "")
    page.focus("#bulk-reason")
    page.keyboard.type("a/b")  # typing in a field: "/" is a character
    assert page.evaluate("() => document.activeElement.id") == "bulk-reason"
    assert page.input_value("#bulk-reason") == "a/b"

    page.goto(base_url + site.paths["trial"])  # a page without a search field: the explorer's, focused
    page.wait_for_load_state("load")
    page.keyboard.press("/")
    page.wait_for_url(f"{base_url}/trials#search")
    page.wait_for_load_state("load")
    assert page.evaluate("() => document.activeElement.name") == "q"
    page.keyboard.type("restock")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/trials\?q=restock.*"))

    page.goto(base_url + site.paths["environment"])  # a form holding changes stays
    page.wait_for_load_state("load")
    page.fill("#attempt_count", "2")
    page.evaluate("() => document.activeElement.blur()")
    acted = page.evaluate("""() => {
      const slash = new KeyboardEvent('keydown', {key: '/', bubbles: true, cancelable: true});
      document.body.dispatchEvent(slash);
      return slash.defaultPrevented;
    }""")
    assert not acted and page.url == base_url + site.paths["environment"]


def trial_number(page) -> str:
    """The trial page's "Trial n of N"."""
    return page.locator("h1").inner_text().split(" · ")[0]


@pytest.mark.parametrize("opened", ["run page", "link"])
def test_trial_keys_walk_the_run_when_the_trial_is_opened_from_no_list(pages, base_url, site, opened):  # noqa: F811
    page = pages["owner"]
    page.set_viewport_size({"width": 1440, "height": 900})
    run = base_url + site.paths["run"]
    if opened == "run page":
        page.goto(run)
        page.click("#run-status a:text-is('Trial 2')")
    else:
        page.goto(run)
        href = page.locator("#run-status a:text-is('Trial 2')").get_attribute("href")
        page.goto(base_url + href)
    page.wait_for_selector("#triage")
    page.wait_for_load_state("load")
    assert trial_number(page) == "Trial 2 of 6"

    page.keyboard.press("n")
    page.wait_for_selector("h1:has-text('Trial 3 of 6')")
    assert "n/p next/previous trial of the run" in page.locator("#triage").inner_text()
    page.wait_for_load_state("load")
    page.keyboard.press("p")
    page.wait_for_selector("h1:has-text('Trial 2 of 6')")
    page.wait_for_load_state("load")
    page.keyboard.press("?")
    keys = page.locator("#triage-keys")
    assert keys.is_visible() and "the next / previous trial of its run" in keys.inner_text()
    page.keyboard.press("u")
    page.wait_for_url(run)
