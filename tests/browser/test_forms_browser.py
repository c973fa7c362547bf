"""The browser's side of the first hour (Debian's chromium): every create form works with JavaScript off, copy
buttons copy, a #step link survives logging in, and on a phone the explorer's first result is on the first
screen; a refused form's error summary takes focus and its links move focus to the fields, with and without
JavaScript, and the refused forms pass axe at both sizes, light and dark."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_accessibility import MEASURE, axe_violations, describe
from tests.browser.test_browser import browser_page, live_server  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, chromium, log_in, member_with_failures, shot
from tests.conftest import ApiClient
from tests.helpers import api_ids

pytestmark = BROWSER_MARKS  # drives chromium


def test_every_create_form_works_with_javascript_off(live_server, database, make_member):  # noqa: F811
    member = make_member("ann@newco.test", "NewCo", "member")
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        page.set_default_timeout(20_000)
        log_in(page, live_server, member.email, member.password)
        page.goto(f"{live_server}/environments/new?template=mcp")
        page.fill("#f-name", "git")
        page.fill("#f-spec-command", "python\n-m\nmcp_server_git")
        page.fill("#f-spec-verifier-tool", "git_status")
        page.fill("#f-spec-env-name-0", "GIT_TOKEN")
        page.fill("#f-spec-env-value-0", "s3cret")
        page.click("#environment-form button[type=submit]")
        page.wait_for_selector("text=Created git with version 1")
        environment_url = page.url

        page.goto(f"{environment_url}/versions/new")
        assert page.locator("#f-spec-env-value-0").get_attribute("placeholder").startswith("set")
        page.fill("#f-spec-task", "Show the status of the repository.")
        page.click("#version-form button[value=preview]")
        assert "+" in page.locator(".spec-diff").inner_text()
        shot(page, "43-version-preview")
        page.click("#version-form button[value=save]")
        page.wait_for_selector("text=Created v2 of git")

        page.goto(f"{live_server}/evaluators/new?template=scripted")
        page.fill("#f-name", "novice")
        page.fill("#f-attemptCount", "x")
        page.click("#evaluator-form button[type=submit]")
        assert "Attempt count must be a whole number from 1 to 8" in page.locator("#f-attemptCount-error").inner_text()
        page.fill("#f-attemptCount", "2")
        page.click("#evaluator-form button[type=submit]")
        page.wait_for_selector("text=Created the evaluator novice")

        page.goto(f"{live_server}/settings/tokens")
        page.fill("#name", "nightly")
        page.click("text=Create token")
        assert page.locator("#new-token").input_value().startswith("afk_")
        assert page.locator("button[data-copy=new-token]").is_hidden()  # the field is the way without JavaScript
        page.click("details.confirm-revoke summary")
        page.click("details.confirm-revoke button[type=submit]")
        page.wait_for_selector("text=Token revoked.")

        page.goto(f"{live_server}/environments")
        page.click("text=Hide these steps")
        page.wait_for_url(f"{live_server}/environments")
        assert page.locator(".first-steps").count() == 0
        context.close()


def test_copy_buttons_copy_and_a_step_link_survives_logging_in(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    app,
    database,
    make_member,
):
    member = member_with_failures(database, make_member, 4)
    trial = api_ids(ApiClient(app.test_client(), member), "rewardBand=failed")[0]
    page = browser_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"{live_server}/trials/{trial}#step-2")
    page.wait_for_url(re.compile(r".*/login\?next=.*"))
    page.fill("#email", member.email)
    page.fill("#password", member.password)
    page.click("form button[type=submit]")
    page.wait_for_url(f"{live_server}/trials/{trial}#step-2")

    page.goto(f"{live_server}/settings/tokens")
    page.fill("#name", "nightly")
    page.click("text=Create token")
    token = page.locator("#new-token").input_value()
    page.click("button[data-copy=new-token]")
    page.wait_for_selector("button[data-copy=new-token]:has-text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == token


def test_on_a_phone_the_first_result_is_on_the_first_screen(
    live_server,  # noqa: F811
    browser_page,  # noqa: F811
    database,
    make_member,
):
    member = member_with_failures(database, make_member, 4)
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server, member.email, member.password)
    page.goto(f"{live_server}/trials")
    assert page.locator("details.more-filters").get_attribute("open") is None  # folded on a phone
    first = page.locator("table.trials tbody tr").first.bounding_box()
    assert first is not None and first["y"] < 844, f"the first result starts at {first['y']} px"
    page.wait_for_selector("#trial-count:has-text('trials match')")
    page.select_option("select[name=status]", "failed")
    page.wait_for_url(re.compile(r".*/trials\?status=failed&sort=failed$"))  # no empty parameters pushed
    shot(page, "44-explorer-phone")


def refuse_an_evaluator(page, base_url: str) -> None:
    """Submit the scripted evaluator's form with three bad inputs."""
    page.goto(f"{base_url}/evaluators/new?template=scripted")
    page.fill("#f-name", "")
    page.fill("#f-attemptCount", "9")
    page.fill("#f-agent-skill", "3")
    page.click("#evaluator-form button[type=submit]")
    page.wait_for_selector("#error-summary")


def focused(page) -> str:
    return page.evaluate("document.activeElement && document.activeElement.id")


@pytest.mark.parametrize("javascript", [True, False])
def test_the_error_summary_takes_focus_and_its_links_move_focus_to_the_fields(
    live_server,  # noqa: F811
    database,
    make_member,
    javascript,
):
    member = make_member("ann@newco.test", "NewCo", "member")
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=javascript, viewport={"width": 390, "height": 844})
        page = context.new_page()
        page.set_default_timeout(20_000)
        log_in(page, live_server, member.email, member.password)
        refuse_an_evaluator(page, live_server)
        assert focused(page) == "error-summary"
        assert page.locator("#error-summary h2").inner_text() == "There is a problem"
        links = page.locator("#error-summary a")
        assert links.all_inner_texts() == [
            "Enter a name of 1 to 200 characters",
            "Attempt count must be a whole number from 1 to 8",
            "Skill must be a number from 0 to 1",
        ]
        for index, field in enumerate(["f-name", "f-attemptCount", "f-agent-skill"]):
            page.locator("#error-summary a").nth(index).click()
            page.wait_for_function("id => document.activeElement && document.activeElement.id === id", arg=field)
            assert page.locator(f"#{field}").get_attribute("aria-invalid") == "true"
        shot(page, f"45-error-summary-{'js' if javascript else 'no-js'}")
        if javascript:  # a group's link focuses its first input, a JSON view's opens it
            page.goto(f"{live_server}/environments/new?template=mcp")
            page.fill("#f-name", "git")
            page.fill("#f-spec-command", "srv")
            page.fill("#f-spec-verifier-tool", "")  # neither a tool nor a command
            page.click("#environment-form button[type=submit]")
            page.wait_for_selector("#error-summary")
            assert focused(page) == "error-summary"
            page.click("#error-summary a[href='#f-spec-verifier']")
            page.wait_for_function("document.activeElement && document.activeElement.id === 'f-spec-verifier-tool'")
            page.click("details.json-view summary")
            page.fill("#config_json", "{nope")
            page.check("#source-json")
            page.click("#environment-form button[type=submit]")
            page.wait_for_selector("#error-summary a[href='#config_json']")
            page.evaluate("document.querySelector('details.json-view').open = false")
            page.click("#error-summary a[href='#config_json']")
            page.wait_for_function("document.activeElement && document.activeElement.id === 'config_json'")
        context.close()


@pytest.mark.parametrize("javascript", [True, False])
def test_a_refused_start_run_form_focuses_its_summary_whose_links_move_focus_to_the_fields(
    live_server,  # noqa: F811
    database,
    make_member,
    javascript,
):
    from tests.factories import make_catalog

    member = make_member("ann@newco.test", "NewCo", "member")
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=1)
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=javascript, viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        log_in(page, live_server, member.email, member.password)
        page.goto(f"{live_server}/environments/{catalog.environment_id}")
        # a version no longer offered (the page was open while it went) and an attemptCount out of range
        page.evaluate("document.querySelector('#environment_version_id').add(new Option('gone', '', true, true))")
        page.fill("#attempt_count", "0")
        page.click("#start-run button[type=submit]")  # htmx swaps the form in place; without JavaScript, a page
        page.wait_for_selector("#error-summary")
        page.wait_for_function("document.activeElement && document.activeElement.id === 'error-summary'")
        assert page.locator("#error-summary a").all_inner_texts() == [
            "Choose an environment version.",
            "Attempt count must be a whole number from 1 to 8.",
        ]
        for index, field in enumerate(["environment_version_id", "attempt_count"]):
            page.locator("#error-summary a").nth(index).click()
            page.wait_for_function("id => document.activeElement && document.activeElement.id === id", arg=field)
            assert page.locator(f"#{field}").get_attribute("aria-invalid") == "true"
        shot(page, f"45-start-run-summary-{'js' if javascript else 'no-js'}")
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1440, 390])
def test_refused_forms_pass_axe_and_fit_the_width(live_server, database, make_member, width, scheme):  # noqa: F811
    member = make_member("ann@newco.test", "NewCo", "member")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.set_default_timeout(20_000)
        page.emulate_media(color_scheme=scheme)
        log_in(page, live_server, member.email, member.password)
        refuse_an_evaluator(page, live_server)
        page.goto(f"{live_server}/environments/new?template=mcp")
        page.fill("#f-spec-limits-memoryMb", "99999")
        page.fill("#f-spec-vars", "BAD")
        page.click("#environment-form button[type=submit]")
        page.wait_for_selector("#error-summary")
        for url, state in ((None, "environment"), (f"{live_server}/evaluators/new?template=scripted", "evaluator")):
            if url:
                refuse_an_evaluator(page, live_server)
            measured = page.evaluate(MEASURE)
            assert measured["scrollWidth"] <= measured["innerWidth"], f"{state}: {measured['wide']}"
            violations = axe_violations(page)
            assert not violations, f"the refused {state} form at {width} px, {scheme}:\n{describe(violations)}"


NEEDS_A_REASON = "Enter a reason to exclude the trial: what makes it unfit for training."


def summary_focused_and_linked(page, summary_id: str, links: list[tuple[str, str]]) -> None:
    """After a refused submit the focus is on the error summary `summary_id`; its links say `links` (input id,
    message) and each moves the focus to its input, which is marked invalid."""
    page.wait_for_selector(f"#{summary_id}")
    page.wait_for_function("id => document.activeElement && document.activeElement.id === id", arg=summary_id)
    assert page.locator(f"#{summary_id} a").all_inner_texts() == [message for _, message in links]
    for index, (field, _) in enumerate(links):
        page.locator(f"#{summary_id} a").nth(index).click()
        page.wait_for_function("id => document.activeElement && document.activeElement.id === id", arg=field)
        assert page.locator(f"#{field}").get_attribute("aria-invalid") == "true"


SIZES = {"screen": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize(
    ("javascript", "size", "scheme"), [(True, "screen", "light"), (False, "screen", "light"), (True, "phone", "dark")]
)
def test_a_refused_review_decision_or_exclusion_focuses_its_summary_whose_links_lead_to_the_inputs(
    live_server,  # noqa: F811
    app,
    database,
    make_member,
    javascript,
    size,
    scheme,
):
    member = member_with_failures(database, make_member, 6)
    failed = api_ids(ApiClient(app.test_client(), member), "rewardBand=failed")
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=javascript, viewport=SIZES[size], color_scheme=scheme)
        page = context.new_page()
        page.set_default_timeout(20_000)
        log_in(page, live_server, member.email, member.password)

        # the trial page's review form (a plain post): an exclusion without a reason, a category that is none
        page.goto(f"{live_server}/trials/{failed[0]}")
        page.click("#review-edit > summary")
        page.check("#review-form input[name=review_state][value=excluded]")
        page.fill("#reason", "")
        page.fill("#human_category", "no such!")
        page.click("#review-form button[type=submit]")
        summary_focused_and_linked(
            page,
            "error-summary",
            [
                ("reason", NEEDS_A_REASON),
                ("human_category", "Human category must be a failure category of 1 to 64 letters, digits, _, . or -."),
            ],
        )
        shot(page, f"46-trial-review-refused-{'js' if javascript else 'no-js'}-{size}-{scheme}")
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]  # nothing overflows

        # the review queue's decision (htmx swaps the queue): a new category that cannot be one, no reason
        page.goto(f"{live_server}/trials?rewardBand=failed")
        page.click("form.queue-start button")
        page.wait_for_url(re.compile(rf"{live_server}/queue/[0-9a-f-]+/\d+$"))
        page.select_option("#human_category", "+new")
        page.fill("#new_category", "gave up")
        page.fill("#reason", "")
        page.click("#decide-excluded")
        summary_focused_and_linked(
            page,
            "error-summary",
            [
                ("new_category", "A new category must be 1 to 64 letters, digits, _, . or -."),
                ("reason", NEEDS_A_REASON),
            ],
        )
        shot(page, f"46-queue-decision-refused-{'js' if javascript else 'no-js'}-{size}-{scheme}")
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]  # nothing overflows

        # a side of the trial diff (htmx swaps the side's body; without JavaScript the diff comes back whole)
        page.goto(f"{live_server}/trials/diff?a={failed[1]}&b={failed[2]}")
        page.fill("#diff-reason-b", " ")
        page.click("#review-b-body form:has(#diff-reason-b) button[type=submit]")
        summary_focused_and_linked(page, "error-summary-b", [("diff-reason-b", NEEDS_A_REASON)])
        context.close()
