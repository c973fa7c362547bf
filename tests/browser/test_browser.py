"""Browser tests: Debian's chromium driven by playwright against the real app and a real worker.

A user logs in, opens an environment, starts a run with attemptCount 3, watches
the progress reach 3 of 3 with a worker running, opens a failed trial and reads
its steps, resets the run (new_world) and lands on the new run, and downloads
an export. Screenshots of every page go to test-output/screenshots/.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.browser_support import BROWSER_MARKS, chromium, log_in, serve, shot
from tests.factories import command_agent, make_catalog
from worker.loop import WorkerSettings, run_workers

pytestmark = BROWSER_MARKS  # drives chromium


@pytest.fixture
def live_server(app):
    """The app served over HTTP on a free port, in a thread of this process."""
    with serve(app) as url:
        yield url


@pytest.fixture
def worker(database):
    """A worker claiming runs in the background while the browser clicks."""
    stop = threading.Event()
    thread = threading.Thread(
        target=run_workers, args=(database, WorkerSettings(poll_seconds=0.3), stop, 1, False), daemon=True
    )
    thread.start()
    yield
    stop.set()
    thread.join(timeout=30)


@pytest.fixture
def browser_page():
    """A headless chromium page at 1280 x 900 that accepts downloads."""
    with chromium() as browser:
        context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        yield page
        context.close()


def test_a_user_runs_inspects_resets_and_exports(live_server, worker, browser_page, database, make_member):
    member = make_member("ann@acme.test", "Acme RL", "member")
    make_catalog(
        database,
        member.org.id,
        command_agent("misbehave.py", "wrong-quantity", "0.4"),
        attempt_count=4,
        config_name="careless-restocker",
    )
    page = browser_page

    page.goto(f"{live_server}/environments")
    assert "/login" in page.url
    shot(page, "01-login")
    page.fill("#email", member.email)
    page.fill("#password", member.password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server}/environments")
    shot(page, "02-environments")

    page.click("text=admin-console")
    page.wait_for_selector("h1:has-text('admin-console')")
    shot(page, "03-environment")
    page.fill("#attempt_count", "3")
    page.click("button:has-text('Start run')")
    page.wait_for_url("**/runs/*")
    run_url = page.url
    page.wait_for_selector("text=3 of 3 trials", timeout=60_000)
    assert page.locator("#run-live").get_attribute("hx-trigger") is None  # polling stopped
    assert "Completed in" in page.inner_text("#run-status")
    shot(page, "04-run")

    page.click("text=Trial 1")
    page.wait_for_selector("h1:has-text('Trial 1 of 3')")
    assert page.locator(".badge.status-failed").count() >= 1
    assert "wrong_quantity" in page.inner_text(".facts")
    commands = page.locator("pre.command").all_inner_texts()
    assert commands[0] == "list_inventory" and commands[1].startswith('restock {"sku": "SKU-')
    shot(page, "05-trial")

    page.goto(run_url)
    page.click("a:has-text('Reset (new_world)')")  # a confirmation step first
    page.wait_for_selector("h1:has-text('Reset')")
    page.click("button:has-text('Confirm reset (new_world)')")
    page.wait_for_url(lambda url: url != run_url and "/runs/" in url)  # a Python predicate: the CSP forbids eval
    page.wait_for_selector("text=reset mode new_world")
    assert page.url != run_url and "/runs/" in page.url
    shot(page, "06-reset-run")

    page.click("nav[aria-label=Main] >> text=Environments")
    page.click("text=admin-console")
    page.click("text=Export rollouts")
    page.wait_for_selector("h1:has-text('Export rollouts')")
    shot(page, "07-export")
    with page.expect_download() as download_info:
        page.click("a:has-text('agentforge-rollouts-failed.jsonl')")
    download = download_info.value
    assert download.suggested_filename == "agentforge-rollouts-failed.jsonl"
    first = json.loads(Path(download.path()).read_text().splitlines()[0])
    assert first["privacyClass"] == "PRIVATE" and first["reward"] < 1 and first["format"] == "atif-shaped"

    page.click("nav[aria-label=Main] >> text=Capability gap")
    page.wait_for_selector("text=wrong_quantity")
    shot(page, "08-capability-gap")
    page.click("nav[aria-label=Main] >> text=Partial rewards")
    page.wait_for_selector(".stage-table")
    shot(page, "09-partial-rewards")


def test_compare_opens_from_a_reset_run_and_from_the_run_list(live_server, browser_page, database, make_member):
    from tests.integration.compare.test_compare import EXPERT, reset_with, run_with

    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, EXPERT, attempt_count=4, config_name="expert")
    first = run_with(database, catalog, [True, False, False, True])
    second = reset_with(database, catalog, first, [True, True, True, False])
    page = browser_page
    log_in(page, live_server, member.email, member.password)

    page.goto(f"{live_server}/runs/{second}")
    assert page.title().startswith("admin-console v1 · expert · #2")
    page.click("text=compare with the run it resets")
    page.wait_for_selector("table.compare-tasks")
    # One task (the same text) on both sides: its trials are compared exactly, never trial n with trial n.
    assert "Fisher's exact test, over trials: a side holds one task" in page.inner_text("#verdict-pass-at-1")
    assert page.locator("#warnings [data-code='one-task']").count() == 2
    assert page.locator("svg title:has-text('pass@k with 95% intervals')").count() == 1
    shot(page, "10-compare-reset")

    page.goto(f"{live_server}/environments/{catalog.environment_id}")
    page.check("input[aria-label='Pick admin-console v1 · expert · #1 to compare']")
    page.check("input[aria-label='Pick admin-console v1 · expert · #2 to compare']")
    page.click("button:has-text('Compare selected runs')")
    page.wait_for_url("**/compare?a=*")
    page.wait_for_selector("#verdict-mean-reward")
    sides = page.inner_text(".sides")
    assert sides.index("admin-console v1 · expert · #1") < sides.index("admin-console v1 · expert · #2")  # older is A
    shot(page, "11-compare-from-list")

    # The picker: /compare with no sides offers the menus; two runs picked there compare them.
    page.goto(f"{live_server}/compare")
    page.select_option("#pick-a", label="admin-console v1 · expert · #1")
    page.select_option("#pick-b", label="admin-console v1 · expert · #2")
    page.click("#compare-picker button:has-text('Compare')")
    page.wait_for_selector("#verdict-pass-at-1")
    assert f"a={first}" in page.url and f"b={second}" in page.url
    shot(page, "12-compare-picker")


def test_the_explorer_filters_shows_chips_and_back_restores_the_form(live_server, browser_page, database, make_member):
    from tests.factories import finish_runs

    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=6)
    finish_runs(database, catalog, 2)
    page = browser_page
    log_in(page, live_server, member.email, member.password)

    page.click("nav[aria-label=Main] >> text=Trials")
    page.wait_for_selector("#trial-filters")
    assert page.locator(".chip").count() == 0
    page.select_option("select[name=status]", "failed")  # the change submits the form through htmx
    page.wait_for_selector(".chip:has-text('status: failed')")
    assert "status=failed" in page.url
    assert page.locator(".badge.status-succeeded").count() == 0 and page.locator(".badge.status-failed").count() > 0
    page.click("details.more-filters > summary")  # folded while none of its filters is set
    page.select_option("select[name=failureCategory]", "gave_up")
    page.wait_for_selector(".chip:has-text('category: gave_up')")
    assert "failureCategory=gave_up" in page.url
    shot(page, "08-explorer-filtered")

    page.go_back()
    page.wait_for_url(lambda url: "gave_up" not in url)  # Python predicates: the CSP forbids eval
    page.wait_for_selector(".chip:has-text('status: failed')")
    assert page.locator(".chip:has-text('category: gave_up')").count() == 0
    assert page.locator("select[name=status]").input_value() == "failed"
    assert page.locator("select[name=failureCategory]").input_value() == ""
    page.go_back()
    page.wait_for_url(lambda url: "status" not in url)
    page.wait_for_selector("#trial-filters")
    assert page.locator("select[name=status]").input_value() == ""
    page.go_forward()
    page.wait_for_selector(".chip:has-text('status: failed')")
    assert page.locator("select[name=status]").input_value() == "failed"

    page.click(".chip:has-text('status: failed') >> a")  # the chip's remove link drops the filter
    page.wait_for_url(lambda url: "status=failed" not in url)
    page.wait_for_selector("#trial-filters")
    assert page.locator(".chip").count() == 0 and page.locator("select[name=status]").input_value() == ""
