"""Browser tests (real chromium) of guarded actions and htmx behaviour: a double click on Start run makes one run,
Back restores the filter forms, arrowing through a select adds one history entry, and with JavaScript off every
page shows its content."""

from __future__ import annotations

import pytest

from tests.browser_support import BROWSER_MARKS, chromium, log_in, serve, shot
from tests.factories import finish_runs, make_catalog

pytestmark = BROWSER_MARKS  # drives chromium

SCRIPTED = {"kind": "scripted", "skill": 0.3}


@pytest.fixture
def live_server(app):
    """The app served over HTTP on a free port, in a thread of this process."""
    with serve(app) as url:
        yield url


@pytest.fixture(name="chromium")
def chromium_browser():
    """A headless chromium (Debian's, by path)."""
    with chromium() as browser:
        yield browser


def open_page(browser, live_server, member, *, javascript: bool = True):
    context = browser.new_context(java_script_enabled=javascript, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    log_in(page, live_server, member.email, member.password)
    return page


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_a_double_click_on_start_run_makes_one_run(
    live_server, chromium, database, make_member, count_rows, javascript
):
    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, SCRIPTED, attempt_count=2)
    page = open_page(chromium, live_server, member, javascript=javascript)
    page.goto(f"{live_server}/environments/{catalog.environment_id}")
    page.dblclick("button:has-text('Start run')")
    # The run page's text first: without JavaScript the second click's submission aborts the first navigation,
    # which wait_for_url may report as net::ERR_ABORTED; a selector waits across navigations.
    page.wait_for_selector("text=0 of 2 trials")
    page.wait_for_url("**/runs/*")
    assert count_rows("evaluation_runs", member.org.id) == 1
    page.goto(f"{live_server}/environments/{catalog.environment_id}")  # a new rendering of the form: a new run
    page.click("button:has-text('Start run')")
    page.wait_for_url("**/runs/*")
    assert count_rows("evaluation_runs", member.org.id) == 2


def test_back_restores_the_capability_gap_form_and_arrowing_adds_one_entry(
    live_server, chromium, database, make_member
):
    member = make_member("ann@acme.test", "Acme RL", "member")
    admin = make_catalog(database, member.org.id, SCRIPTED, attempt_count=3)
    desk = make_catalog(
        database, member.org.id, SCRIPTED, attempt_count=3, environment="support-desk", config_name="desk"
    )
    finish_runs(database, admin)
    finish_runs(database, desk)
    page = open_page(chromium, live_server, member)
    page.click("nav[aria-label=Main] >> text=Capability gap")
    page.wait_for_selector("h1:has-text('Capability gap')")
    gap_url = page.url

    page.select_option("#environmentId", str(desk.environment_id))
    page.wait_for_url(lambda url: str(desk.environment_id) in url)
    # The swap has landed once the version select lists only that environment's versions; selecting before it
    # would change a select the swap is about to replace.
    page.wait_for_selector(f"#environmentVersionId option[value='{admin.version_id}']", state="detached")
    page.wait_for_selector(f"#environmentVersionId option[value='{desk.version_id}']", state="attached")
    page.select_option("#environmentVersionId", str(desk.version_id))
    page.wait_for_url(lambda url: str(desk.version_id) in url)
    page.click("nav[aria-label=Main] >> text=Trials")  # leave, then come back through the history
    page.wait_for_selector("#trial-filters")
    page.go_back()
    page.wait_for_url(lambda url: str(desk.version_id) in url)
    page.wait_for_selector("#environmentVersionId")
    assert page.locator("#environmentId").input_value() == str(desk.environment_id)
    assert page.locator("#environmentVersionId").input_value() == str(desk.version_id)
    page.go_back()
    page.wait_for_url(lambda url: url.endswith(f"?environmentId={desk.environment_id}"))  # the first select's URL,
    # empty fields left out
    assert page.locator("#environmentId").input_value() == str(desk.environment_id)
    assert page.locator("#environmentVersionId").input_value() == ""
    page.go_back()
    page.wait_for_url(gap_url)
    assert page.locator("#environmentId").input_value() == ""
    assert page.locator("#environmentVersionId").input_value() == ""
    shot(page, "guard-01-capability-gap-back")

    # Arrowing through the environment select (two keys in a row): the results follow, the history gets one entry.
    options = page.locator("#environmentId option").evaluate_all("options => options.map(o => o.value)")
    page.focus("#environmentId")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.locator("#environmentId").input_value() == options[2]
    page.wait_for_url(lambda url: f"environmentId={options[2]}" in url)
    page.wait_for_selector(f"#environmentId option[value='{options[2]}'][selected]", state="attached")
    page.go_back()
    page.wait_for_url(gap_url)  # not the first key's URL: its entry was replaced by the second's
    assert page.locator("#environmentId").input_value() == ""


def test_back_restores_the_trials_form(live_server, chromium, database, make_member):
    member = make_member("ann@acme.test", "Acme RL", "member")
    catalog = make_catalog(database, member.org.id, SCRIPTED, attempt_count=6)
    finish_runs(database, catalog, 2)
    page = open_page(chromium, live_server, member)
    page.goto(f"{live_server}/trials")
    page.select_option("select[name=status]", "failed")
    page.wait_for_url(lambda url: "status=failed" in url)
    page.fill("input[name=q]", "inventory")
    page.press("input[name=q]", "Enter")
    page.wait_for_url(lambda url: "q=inventory" in url)
    page.click("nav[aria-label=Main] >> text=Capability gap")
    page.wait_for_selector("h1:has-text('Capability gap')")
    page.go_back()
    page.wait_for_url(lambda url: "q=inventory" in url)
    page.wait_for_selector("#trial-filters")
    assert page.locator("input[name=q]").input_value() == "inventory"
    assert page.locator("select[name=status]").input_value() == "failed"
    page.go_back()
    page.wait_for_url(lambda url: "q=inventory" not in url and "status=failed" in url)
    assert page.locator("input[name=q]").input_value() == ""
    assert page.locator("select[name=status]").input_value() == "failed"


def test_with_javascript_off_every_page_shows_its_content(live_server, chromium, database, make_member):
    from sqlalchemy import text

    from blueprints.insights import EAGER_VERSIONS

    member = make_member("olga@acme.test", "Acme RL", "owner")
    admin = make_catalog(database, member.org.id, SCRIPTED, attempt_count=3)
    desk = make_catalog(
        database, member.org.id, SCRIPTED, attempt_count=3, environment="support-desk", config_name="desk"
    )
    first, second = finish_runs(database, admin, 2)
    finish_runs(database, desk)
    for n in range(EAGER_VERSIONS):  # more versions than the page renders itself: the rest are lazy
        make_catalog(database, member.org.id, SCRIPTED, attempt_count=1, config_name=f"more-{n}")
    with database.session(member.org.id) as session:
        trial = session.execute(
            text("SELECT id FROM evaluation_trials WHERE evaluation_run_id = :run AND trial_number = 1"), {"run": first}
        ).scalar()
    page = open_page(chromium, live_server, member, javascript=False)
    expected = {
        "/environments": "admin-console",
        f"/environments/{admin.environment_id}": "Start a run",
        f"/environments/{admin.environment_id}/export": "agentforge-rollouts-failed.jsonl",
        f"/runs/{first}": "3 of 3 trials",
        f"/runs/{first}/reset?mode=new_world": "Confirm reset (new_world)",
        f"/trials/{trial}": "Trial 1 of 3",
        "/trials": "Trial 1 of 3",
        f"/trials?environmentId={desk.environment_id}": "support-desk",
        "/capability-gap": "failed trials",
        "/partial-rewards": "stage_inventory",
        f"/partial-rewards/versions/{admin.version_id}": "stage_inventory",
        f"/compare?a={first}&b={second}": "Mean reward",
        "/settings/members": "olga@acme.test",
        "/settings/tokens": "API tokens",
    }
    for path, content in expected.items():
        page.goto(f"{live_server}{path}")
        main = page.inner_text("main")
        assert content in main, path
        assert "Loading" not in main, path
    # Past the versions the page renders, each lazy table has a link to its own page, which renders it.
    page.goto(f"{live_server}/partial-rewards")
    assert page.locator(".version-card .stage-table").count() == EAGER_VERSIONS
    links = page.locator(".lazy-fallback a")
    assert links.count() == 2  # 12 versions in all
    links.first.click()
    page.wait_for_selector(".version-card .stage-table")
    assert "Loading" not in page.inner_text("main")
    shot(page, "guard-02-partial-rewards-no-js")
