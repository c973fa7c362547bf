"""What the browser suites share: Debian's chromium launched by path, the app served over HTTP, screenshots, login.

tests/browser/test_browser.py (user journeys) and tests/browser/test_accessibility.py (axe-core on every page) use
these, each through fixtures of its own scope.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = ROOT / "test-output" / "screenshots"

# Module marks for a browser suite: slow, browser, and skipped with the reason when chromium is missing.
BROWSER_MARKS = [pytest.mark.browser, pytest.mark.slow]
if not Path(CHROMIUM).exists():
    BROWSER_MARKS.append(pytest.mark.skip(reason="chromium is not installed (apt-get install chromium)"))


@contextmanager
def serve(app) -> Iterator[str]:
    """The app served over HTTP on a free port, in a thread of this process; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@contextmanager
def chromium():
    """A headless chromium (Debian's, launched by path: no browser download); yields playwright's Browser."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


def shot(page, name: str) -> None:
    """Save a full-page screenshot as test-output/screenshots/<name>.png (CI keeps them)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def log_in(page, base_url: str, email: str, password: str) -> None:
    """Log in through the login form and wait for the environments page."""
    page.goto(f"{base_url}/login")
    page.fill("#email", email)
    page.fill("#password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/environments")


def member_with_failures(database, make_member, attempts: int):
    """ann@acme.test, a member of Acme RL, whose organization holds one finished run of a novice agent (skill 0.3:
    most attempts fail)."""
    from tests.factories import finish_runs, make_catalog

    member = make_member("ann@acme.test", "Acme RL", "member")
    novice = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 0.3}, attempt_count=attempts)
    finish_runs(database, novice, 1)
    return member
