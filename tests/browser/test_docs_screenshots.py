"""Getting started, walked in chromium on the demo's data: the screenshots docs/getting-started.md shows.

`demo` creates the demo organizations and runs their runs with the worker until idle, as `make run` does. The
demo user of Acme RL then opens the environments list, the admin-console environment, a completed run of the
scripted-novice evaluator, a failed trial of that run, and the comparison of admin-console's two versions. Each
page's heading and text are asserted, and each screenshot is written at 1280 px wide to test-output/docs-images/
(a test run leaves the tree clean), or to the folder AGENTFORGE_DOCS_IMAGES names: `make docs-images` points it at
docs/images/, the pictures the documentation build (`mkdocs build --strict` in `make lint`) shows.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

from tests.browser_support import BROWSER_MARKS, chromium, log_in, serve
from tests.conftest import ROOT

pytestmark = BROWSER_MARKS  # drives chromium

IMAGES = Path(os.environ.get("AGENTFORGE_DOCS_IMAGES") or ROOT / "test-output" / "docs-images")
WIDTH = 1280  # every screenshot's width in pixels (the viewport's; device scale factor 1)
MAX_HEIGHT = 1600  # the top of a long page is enough for the docs
SHOTS = ("environments", "environment", "run", "failed-trial", "compare")
DEMO_EMAIL, DEMO_PASSWORD = "demo@acme.test", "agentforge-demo"


@pytest.fixture
def live_server(app):
    """The app served over HTTP on a free port, in a thread of this process."""
    with serve(app) as url:
        yield url


@pytest.fixture
def docs_page():
    """A headless chromium page 1280 px wide."""
    with chromium() as browser:
        context = browser.new_context(viewport={"width": WIDTH, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        yield page
        context.close()


def docs_shot(page, name: str) -> Path:
    """Save the top of the page (at most MAX_HEIGHT px of it) as IMAGES/<name>.png; return the path."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / f"{name}.png"
    height = min(page.evaluate("document.documentElement.scrollHeight"), MAX_HEIGHT)
    page.screenshot(path=str(path), full_page=True, clip={"x": 0, "y": 0, "width": WIDTH, "height": height})
    return path


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG file's IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG file"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_getting_started_walk_writes_the_docs_screenshots(runner, live_server, docs_page):
    result = runner.invoke(args=["demo"])
    assert result.exit_code == 0, result.output
    assert f"Demo login: {DEMO_EMAIL} / {DEMO_PASSWORD} (organization Acme RL)" in result.output
    IMAGES.mkdir(parents=True, exist_ok=True)
    for name in SHOTS:
        (IMAGES / f"{name}.png").unlink(missing_ok=True)
    page = docs_page

    # The first run: the environments list of the demo's organization.
    log_in(page, live_server, DEMO_EMAIL, DEMO_PASSWORD)
    assert page.inner_text("h1") == "Environments"
    names = page.locator("#environment-list tbody tr td:first-child > a").all_inner_texts()
    assert sorted(names) == ["admin-console", "admin-console-mcp", "support-desk"]
    assert "no completed runs" not in page.inner_text("#environment-list")  # the worker ran every run
    docs_shot(page, "environments")

    # The first environment: admin-console, its two versions, the evaluators, the start-run form, the runs.
    page.get_by_role("link", name="admin-console", exact=True).click()
    page.wait_for_selector("h1:has-text('admin-console')")
    assert page.inner_text("h1") == "admin-console"
    main = page.inner_text("main")
    for text in ("Versions", "Evaluator configurations", "Start a run", "Recent runs", "scripted-novice"):
        assert text in main
    assert page.locator("input[aria-label='Pick v1 to compare']").count() == 1
    assert page.locator("input[aria-label='Pick v2 to compare']").count() == 1
    docs_shot(page, "environment")
    environment_url = page.url

    # The first evaluation run: a completed scripted-novice run (attemptCount 4) with a failed trial.
    novice_runs = page.locator("#recent-runs td > a", has_text="scripted-novice")
    hrefs = [novice_runs.nth(i).get_attribute("href") for i in range(novice_runs.count())]
    assert hrefs, "the environment page lists no scripted-novice run"
    for href in hrefs:
        page.goto(f"{live_server}{href}")
        dataset_task = "of dataset run" in page.inner_text("main")  # the demo dataset's runs take 2 trials a task
        if page.locator("table.run-trials .badge.status-failed").count() and not dataset_task:
            break
    else:
        pytest.fail("no scripted-novice run of admin-console has a failed trial")
    assert re.fullmatch(r"admin-console v[12] · scripted-novice · #\d+", page.inner_text("h1"))
    assert page.inner_text("#run-progress") == "4 of 4 trials"
    assert "Completed in" in page.inner_text("#run-status")
    assert page.locator("table.run-trials tbody tr").count() == 4
    assert "stage_checkout" in page.inner_text("table.run-trials thead")
    docs_shot(page, "run")

    # The first failed trial: its category, stages, steps and log.
    failed = page.locator("table.run-trials tbody tr", has=page.locator(".badge.status-failed")).first
    failed.locator("a").click()
    page.wait_for_selector("h1:has-text('Trial')")
    assert re.fullmatch(r"Trial [1-4] of 4 · admin-console v[12]", page.inner_text("h1"))
    facts = page.inner_text(".facts")
    assert "failed" in facts
    category = page.locator(".facts dt:has-text('Failure category') + dd").inner_text()
    assert re.fullmatch(r"[a-z_]+", category), f"a failed trial without a failure category: {category!r}"
    main = page.inner_text("main")
    for text in ("Task", "Stages", "stage_inventory", "Trajectory (", "Log"):
        assert text in main
    docs_shot(page, "failed-trial")

    # The first compare: admin-console's two versions side by side.
    page.goto(environment_url)
    page.check("input[aria-label='Pick v1 to compare']")
    page.check("input[aria-label='Pick v2 to compare']")
    page.click("button:has-text('Compare selected versions')")
    page.wait_for_selector("h1:has-text('Compare')")
    assert "/compare?a=" in page.url
    sides = page.inner_text("dl.sides")
    assert "admin-console v1" in sides and "admin-console v2" in sides
    assert page.inner_text("#verdict-pass-at-1").startswith("pass@1:")
    main = page.inner_text("main")
    for text in ("Verdict", "Figures", "Per evaluator", "Tasks", "Failure categories"):
        assert text in main
    docs_shot(page, "compare")

    for name in SHOTS:
        path = IMAGES / f"{name}.png"
        assert path.is_file(), f"{path} was not written"
        width, height = png_size(path)
        assert width == WIDTH and 0 < height <= MAX_HEIGHT, f"{path} is {width} x {height}"
