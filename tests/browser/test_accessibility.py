"""Every page in a real chromium at 1440 and 390 px, light and dark: axe-core finds nothing, nothing spills sideways.

One organization with demo-like data is written once for the module (environments, finished runs with failed and
succeeded trials, a run and its reset to compare, a queued run still waiting, a trial with long observations, a
member, a pending invitation, an API token), one chromium serves every check, and each check loads one page at one
width in one colour scheme, runs the vendored axe-core (tests/vendor/axe-core, never downloaded) and measures:

* axe-core 4.14.1's rules (WCAG 2.0/2.1/2.2 A and AA, best practices, and target-size) report no violation;
* at 390 px the document is no wider than the window (a wide table scrolls inside its own region instead);
* chart labels are drawn at least 12 px tall and none is cut off at its chart's left edge;
* input, select and textarea borders are at least 3:1 against what is behind them (axe does not check this);
* download links, buttons, summaries and menu links are at least 24 x 24 px;
* the page's background is dark in the dark scheme and light in the light one.

Then: the run page's live region survives its polls, the menu folds on a phone and opens without JavaScript, and the
skip link is the first stop. Screenshots of every check go to test-output/screenshots/a11y-<page>-<width>-<scheme>.png.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text

from domain.datasets import TaskInput
from domain.outcome import TrialOutcome
from domain.trajectory import message_step, tool_step
from models import Dataset, EnvironmentVersion, EvaluationRun, EvaluatorConfig
from tests.browser_support import BROWSER_MARKS, chromium, log_in, serve, shot
from tests.conftest import PASSWORD, empty_tables
from tests.factories import (
    Catalog,
    dataset_run_of,
    finish_run,
    finish_runs,
    finished_outcome,
    make_catalog,
    typed_steps,
)
from tests.paths import TESTS
from writes.accounts import add_membership, create_organization, create_user
from writes.datasets import add_dataset_version, create_dataset
from writes.invitations import invite
from writes.runs import complete_run, enqueue_run, record_trial, trial_seed
from writes.tokens import create_token
from writes.triage import Reviewer, add_note, change_labels, create_label, set_review

pytestmark = BROWSER_MARKS

AXE = TESTS / "vendor" / "axe-core" / "axe.min.js"
WIDTHS = (1440, 390)
SCHEMES = ("light", "dark")
OWNER = "demo@acme.test"

# Pages a logged-out visitor sees; every other page is seen by the organization's owner.
PUBLIC = {"login", "invitation"}


@pytest.fixture(autouse=True)
def clean_database():
    """This module writes its organization once (see `site`) and keeps it for all of its checks."""


def chatty_outcome(number: int, seed: int) -> TrialOutcome:
    """A failed trial as an agent with words and long output records it: messages, reasoning, tokens, a 3 KB
    JSON observation, a long unbroken identifier, a call refused as an error, a long log line and a line of the
    agent's stderr."""
    inventory = {"items": [{"sku": f"SKU-{i:04d}", "name": f"widget {i}", "quantity": i * 3} for i in range(60)]}
    steps = [
        message_step(1, "I will list the inventory first.", reasoning="The task asks for restocking."),
        tool_step(1 + 1, "list_inventory", {}, json.dumps(inventory), tokens={"prompt": 812, "completion": 40}),
        tool_step(
            3,
            "restock",
            {"sku": "SKU-0007", "note": "x" * 180},
            "restocked " + "SKU-0007-" * 30,
            tokens={"prompt": 1210, "completion": 33},
            latency_ms=640.0,
        ),
        tool_step(4, "checkout", {}, "error: checkout needs order_id", is_error=True),  # marked "Error"
        message_step(5, "Done: restocked SKU-0007."),
    ]
    return TrialOutcome(
        status="failed",
        reward=round(1 / 3, 6),
        failure_category="wrong_quantity",
        stages={"stage_inventory": 1.0, "stage_order": 0.0, "stage_checkout": 0.0},
        steps=typed_steps(steps),
        log="\n".join(
            [
                "opened admin-console (world 7): 60 items",
                "restock-trace:" + "abcdef0123456789" * 40,
                "done",
                "agent | warning: retrying the model request",  # shown as the agent's, not the worker's
            ]
        ),
        started_at=datetime.now(UTC),
        task="Restock every item below its threshold, then place the order.",
    )


@dataclass
class Site:
    """What the module's checks read: the URL path of each page, and the organization and catalog behind them."""

    paths: dict[str, str]
    org_id: uuid.UUID
    catalog: Catalog


@pytest.fixture(scope="module")
def site(app, cleaner_engine) -> Site:
    """The organization every check reads, written once."""
    from tests.integration.compare.test_compare import EXPERT, reset_with, run_with
    from tests.integration.trials.test_transcript import outcome, record, twelve_steps

    empty_tables(cleaner_engine)
    database = app.extensions["agentforge_db"]
    with database.admin_session() as session, session.begin():
        org = create_organization(session, "Acme RL")
    with database.admin_session(org.id) as session, session.begin():
        owner = create_user(session, OWNER, PASSWORD)
        add_membership(session, owner, org, "owner")
        add_membership(session, create_user(session, "ann@acme.test", PASSWORD), org, "member")
        create_token(session, org.id, owner.id, "training pipeline")
        _, invitation_token = invite(session, org.id, "new-hire@acme.test", "viewer", owner.id)

    novice = {"kind": "scripted", "skill": 0.3}
    admin = make_catalog(database, org.id, novice, attempt_count=6, config_name="novice")
    desk = make_catalog(database, org.id, novice, attempt_count=4, environment="support-desk", config_name="desk")
    runs = finish_runs(database, admin, 2) + finish_runs(database, desk, 1)
    expert = make_catalog(database, org.id, EXPERT, attempt_count=4, config_name="expert")
    first = run_with(database, expert, [True, False, False, True])
    second = reset_with(database, expert, first, [True, True, True, False])
    chatty = make_catalog(database, org.id, novice, attempt_count=2, config_name="chatty")
    chatty_run = finish_run(database, chatty, chatty_outcome)
    with database.session(org.id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org.id, admin.version_id))
        config = session.get_one(EvaluatorConfig, (org.id, admin.config_id))
        queued = enqueue_run(session, version, config, 3)
    dataset_run = dataset_run_of(database, admin, tasks=6, finished=3, errored=1)  # running, one task to retry
    repeats = make_catalog(database, org.id, novice, attempt_count=1, config_name="repeats")
    repeats_trial = record(database, repeats, outcome(twelve_steps()))
    with database.session(org.id) as session:
        chatty_trial = session.execute(
            text("SELECT id FROM evaluation_trials WHERE evaluation_run_id = :r AND trial_number = 1"),
            {"r": chatty_run},
        ).scalar()

    with database.session(org.id) as session, session.begin():  # the trial page's review panel, filled in
        reviewer = Reviewer(org.id, owner.id, "owner")
        for name, color in (("flaky-verifier", "red"), ("wrong-customer", "orange"), ("good-recovery", "green")):
            create_label(session, reviewer, name, color, f"{name} (a label of every palette colour's kind)")
        change_labels(session, reviewer, chatty_trial, names=["flaky-verifier", "wrong-customer"])
        set_review(session, reviewer, chatty_trial, state="excluded", reason="the verifier crashed")
        add_note(session, reviewer, chatty_trial, "Step 1 asked for the wrong customer.", 1)
        other_trial = session.execute(
            text("SELECT id FROM evaluation_trials WHERE evaluation_run_id = :r AND trial_number = 2"),
            {"r": chatty_run},
        ).scalar()

    with database.session(org.id) as session, session.begin():  # a dataset of both worlds, and one without versions
        dataset = create_dataset(session, org.id, "shop-and-desk", "built-in tasks of both worlds")
        tasks = [TaskInput(admin.version_id, seed, "v", "s") for seed in range(1, 131)]
        tasks += [TaskInput(desk.version_id, seed, "v", "s") for seed in (7, 9)]
        add_dataset_version(session, session.get_one(Dataset, (org.id, dataset.id)), tasks)
        create_dataset(session, org.id, "empty", "")

    paths = {
        "login": "/login",
        "invitation": f"/invitations/{invitation_token}",
        "environments": "/environments",
        "environment": f"/environments/{admin.environment_id}",
        "export": f"/environments/{admin.environment_id}/export",
        "run": f"/runs/{runs[0]}",
        "run-queued": f"/runs/{queued.id}",
        "trial": f"/trials/{chatty_trial}",
        "trial-repeats": f"/trials/{repeats_trial}",
        "reset-confirm": f"/runs/{runs[0]}/reset?mode=new_world",
        "trials": "/trials",
        "trials-search": "/trials?q=restock&status=failed",
        "capability-gap": "/capability-gap",
        "partial-rewards": "/partial-rewards",
        "version-stages": f"/partial-rewards/versions/{admin.version_id}",
        "compare": f"/compare?a={first}&b={second}",
        "compare-picker": "/compare",
        "members": "/settings/members",
        "tokens": "/settings/tokens",
        "labels": "/settings/labels",
        "trial-diff": f"/trials/diff?a={chatty_trial}&b={other_trial}",
        "trial-attempts": f"/trials/{chatty_trial}/attempts",
        "new-environment": "/environments/new",
        "new-mcp-environment": "/environments/new?template=mcp",
        "new-version": f"/environments/{admin.environment_id}/versions/new",
        "evaluators": "/evaluators",
        "new-evaluator": "/evaluators/new?template=openai-chat",
        "trials-count": "/trials/count?status=failed",
        "datasets": "/datasets",
        "dataset": f"/datasets/{dataset.id}",
        "dataset-draft": f"/datasets/{dataset.id}?from=1",
        "dataset-version": f"/datasets/{dataset.id}/versions/1?page=2",
        "dataset-runs": "/dataset-runs",
        "dataset-run": f"/dataset-runs/{dataset_run}",
    }
    return Site(paths, org.id, admin)


PAGES = [
    "login",
    "invitation",
    "environments",
    "environment",
    "export",
    "run",
    "run-queued",
    "trial",
    "trial-repeats",
    "reset-confirm",
    "trials",
    "trials-search",
    "capability-gap",
    "partial-rewards",
    "version-stages",
    "compare",
    "compare-picker",
    "members",
    "tokens",
    "labels",
    "trial-diff",
    "trial-attempts",
    "new-environment",
    "new-mcp-environment",
    "new-version",
    "evaluators",
    "new-evaluator",
    "trials-count",
    "datasets",
    "dataset",
    "dataset-draft",
    "dataset-version",
    "dataset-runs",
    "dataset-run",
]


@pytest.fixture(scope="module")
def base_url(app, site):
    with serve(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def pages(browser, base_url):
    """Two tabs: one logged in as the organization's owner, one logged out."""
    owner = browser.new_context()
    visitor = browser.new_context()
    owner_page, visitor_page = owner.new_page(), visitor.new_page()
    for page in (owner_page, visitor_page):
        page.set_default_timeout(20_000)
    log_in(owner_page, base_url, OWNER, PASSWORD)
    yield {"owner": owner_page, "visitor": visitor_page}
    owner.close()
    visitor.close()


AXE_OPTIONS = {
    "runOnly": {
        "type": "tag",
        "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa", "best-practice"],
    },
    "rules": {"target-size": {"enabled": True}},
    "resultTypes": ["violations"],
}

MEASURE = """() => {
  const rgb = (css) => (css.match(/[\\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const f = (c) => ((c /= 255) <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const contrast = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const behind = (element) => {
    for (let e = element.parentElement; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const fields = [...document.querySelectorAll(
    'input:not([type=hidden]):not([type=checkbox]):not([type=radio]), select, textarea')];
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    background: luminance(rgb(getComputedStyle(document.body).backgroundColor)),
    smallTicks: [...document.querySelectorAll('svg text')].filter(shown).map((t) => {
      const svg = t.ownerSVGElement;
      const box = svg.viewBox.baseVal;
      const scale = box && box.width ? svg.getBoundingClientRect().width / box.width : 1;
      return [t.textContent.trim(), Math.round(parseFloat(getComputedStyle(t).fontSize) * scale * 10) / 10];
    }).filter(([, size]) => size < 12),
    clippedLabels: [...document.querySelectorAll('svg text')].filter(shown).filter((t) => {
      const box = t.closest('.scroll-region');
      return box && t.getBoundingClientRect().left < box.getBoundingClientRect().left - 0.5;
    }).map((t) => t.textContent.trim()).slice(0, 6),
    smallTargets: [...document.querySelectorAll('a[download], button, summary, nav[aria-label=Main] a, .chip a')]
      .filter(shown).map((e) => [e.textContent.trim().slice(0, 40), e.getBoundingClientRect()])
      .filter(([, r]) => r.height < 24 || r.width < 24)
      .map(([t, r]) => `${t} ${Math.round(r.width)}x${Math.round(r.height)}`),
    weakBorders: fields.filter(shown).map((f) => [
      f.name || f.id, Math.round(contrast(rgb(getComputedStyle(f).borderTopColor), behind(f)) * 100) / 100,
    ]).filter(([, ratio]) => ratio < 3),
    wide: [...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
      .filter((e) => !e.closest('.scroll-region'))
      .slice(0, 8)
      .map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
        + (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '')),
  };
}"""


def axe_violations(page) -> list[dict]:
    """Run the vendored axe-core on the page; return its violations."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text())  # evaluated by the driver, so the page's CSP (no inline script) still holds
    result = page.evaluate("options => axe.run(document, options)", AXE_OPTIONS)
    return result["violations"]


def describe(violations: list[dict]) -> str:
    """One line per violation: rule id, impact, how many nodes and the first few targets with axe's summary."""
    lines = []
    for v in violations:
        targets = "; ".join(
            f"{' '.join(map(str, node['target']))}: {node.get('failureSummary', '').splitlines()[-1].strip()}"
            for node in v["nodes"][:4]
        )
        lines.append(f"  {v['id']} ({v['impact']}, {len(v['nodes'])} nodes): {targets}")
    return "\n".join(lines)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_page_has_no_axe_violations_and_fits_the_width(pages, base_url, site, name, width, scheme):
    page = pages["visitor" if name in PUBLIC else "owner"]
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    response = page.goto(base_url + site.paths[name])
    assert response is not None and response.status == 200, f"{name}: {response and response.status}"
    page.wait_for_load_state("load")
    shot(page, f"a11y-{name}-{width}-{scheme}")

    violations = axe_violations(page)
    measured = page.evaluate(MEASURE)
    problems = []
    if violations:
        problems.append(f"axe-core found {len(violations)} violations:\n{describe(violations)}")
    if width <= 390 and measured["scrollWidth"] > measured["innerWidth"]:
        problems.append(
            f"the page is {measured['scrollWidth']} px wide in a {measured['innerWidth']} px window; "
            f"sticking out: {', '.join(measured['wide'])}"
        )
    if measured["smallTicks"]:
        problems.append(f"chart labels drawn under 12 px (label, px): {measured['smallTicks'][:6]}")
    if measured["clippedLabels"]:
        problems.append(f"chart labels cut off at the left edge of their chart: {measured['clippedLabels']}")
    if measured["smallTargets"]:
        problems.append(f"download links, buttons and menu links under 24 x 24 px: {measured['smallTargets'][:6]}")
    if measured["weakBorders"]:
        problems.append(f"input borders under 3:1 against their background (field, ratio): {measured['weakBorders']}")
    if (measured["background"] < 0.2) != (scheme == "dark"):
        problems.append(f"the page background (relative luminance {measured['background']:.2f}) is not {scheme}")
    assert not problems, f"{name} at {width} px, {scheme}:\n" + "\n".join(problems)


def test_the_run_progress_stays_one_live_region_while_the_page_polls(pages, base_url, app, site):
    database, org = app.extensions["agentforge_db"], site.org_id
    with database.session(org) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org, site.catalog.version_id))
        config = session.get_one(EvaluatorConfig, (org, site.catalog.config_id))
        run_id = enqueue_run(session, version, config, 2).id
    page = pages["owner"]
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base_url}/runs/{run_id}")
    assert page.locator("#run-progress").inner_text() == "0 of 2 trials"
    assert page.locator("#run-progress").get_attribute("role") == "status"
    assert page.locator("#run-meter progress").get_attribute("aria-label") == "Trials finished"
    page.evaluate("() => { window.liveRegion = document.getElementById('run-progress'); }")

    def record(number: int) -> None:
        with database.session(org) as session, session.begin():
            run = session.get_one(EvaluationRun, (org, run_id))
            seed = trial_seed(run, number)
            record_trial(session, run, number, seed, finished_outcome("admin-console", number, seed))

    record(1)
    page.wait_for_selector("#run-status a >> text=Trial 1")  # the polled block was swapped in (a recorded trial) ...
    assert page.locator("#run-progress").inner_text() == "1 of 2 trials"
    assert page.evaluate("() => document.getElementById('run-progress') === window.liveRegion")  # ... not the region
    record(2)
    with database.session(org) as session, session.begin():
        complete_run(session, session.get_one(EvaluationRun, (org, run_id)))
    page.wait_for_selector("#run-state >> text=completed")
    assert page.locator("#run-progress").inner_text() == "2 of 2 trials"
    assert page.evaluate("() => document.getElementById('run-progress') === window.liveRegion")
    assert page.locator("#run-meter progress").count() == 0
    assert page.locator("#run-live").get_attribute("hx-trigger") is None  # polling stopped
    assert page.locator("#run-status >> text=Trial 2").count() == 1


def test_the_dataset_run_progress_stays_one_live_region_while_the_page_polls(pages, base_url, app, site):
    database, org = app.extensions["agentforge_db"], site.org_id
    dataset_run_id = dataset_run_of(database, site.catalog, tasks=2, name="polled")
    with database.session(org) as session:
        runs = session.scalars(
            select(EvaluationRun)
            .where(EvaluationRun.dataset_run_id == dataset_run_id)
            .order_by(EvaluationRun.dataset_position)
        ).all()
        run_ids, attempts = [run.id for run in runs], runs[0].attempt_count
    page = pages["owner"]
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base_url}/dataset-runs/{dataset_run_id}")
    assert page.locator("#dataset-run-progress").inner_text() == f"0 of 2 tasks · 0 of {2 * attempts} trials"
    page.evaluate("() => { window.liveRegion = document.getElementById('dataset-run-progress'); }")

    def finish(run_id) -> None:
        with database.session(org) as session, session.begin():
            run = session.get_one(EvaluationRun, (org, run_id))
            for number in range(1, attempts + 1):
                seed = trial_seed(run, number)
                record_trial(session, run, number, seed, finished_outcome("admin-console", number, seed))
            complete_run(session, run)

    finish(run_ids[0])
    page.wait_for_selector("#dataset-run-state >> text=running")
    assert page.locator("#dataset-run-progress").inner_text() == f"1 of 2 tasks · {attempts} of {2 * attempts} trials"
    assert page.evaluate("() => document.getElementById('dataset-run-progress') === window.liveRegion")
    finish(run_ids[1])
    page.wait_for_selector("#dataset-run-state >> text=completed")
    assert (
        page.locator("#dataset-run-progress").inner_text() == f"2 of 2 tasks · {2 * attempts} of {2 * attempts} trials"
    )
    assert page.evaluate("() => document.getElementById('dataset-run-progress') === window.liveRegion")
    assert page.locator("#dataset-run-meter progress").count() == 0
    assert page.locator("#dataset-run-live").get_attribute("hx-trigger") is None  # polling stopped


def test_the_menu_collapses_on_a_phone_without_javascript_and_stays_open_on_a_desktop(browser, base_url):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 900})
    page = context.new_page()
    log_in(page, base_url, OWNER, PASSWORD)
    nav = page.locator("nav[aria-label=Main]")
    assert page.locator(".menu > summary").is_visible() and not nav.is_visible()
    page.click(".menu > summary")
    assert nav.is_visible()
    shot(page, "a11y-menu-open-390")
    page.click("nav[aria-label=Main] >> text=Trials")
    page.wait_for_url(f"{base_url}/trials")
    assert not nav.is_visible()  # a new page starts with the menu closed
    page.set_viewport_size({"width": 1440, "height": 900})
    assert nav.is_visible() and not page.locator(".menu > summary").is_visible()
    context.close()


def test_the_skip_link_is_the_first_stop_and_moves_focus_to_the_content(pages, base_url):
    page = pages["owner"]
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base_url}/environments")
    page.keyboard.press("Tab")
    skip = page.locator(".skip-link")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    box = skip.bounding_box()
    assert box is not None and box["y"] >= 0 and box["height"] >= 24  # shown when focused, big enough to hit
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"
