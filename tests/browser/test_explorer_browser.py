"""The trials explorer's first screen in a real chromium (Debian's), over the accessibility suite's organization of
demo-like data (two environments, five evaluators, finished runs of failed and succeeded trials, labels, an excluded
trial, a dataset run), logged in as its owner:

* on /trials and on "Unreviewed failures", the first trial row starts under 450 px on a 1440 x 900 screen and under
  700 px on a 390 x 844 phone, after the everyday filters, in the light and the dark scheme (it was at 1,229 and
  1,292 px on the screen: "More filters" opened by itself and stacked its fields in one column);
* "More filters" is folded unless one of its filters is set, and opens as a grid (several columns on the screen, two
  on the phone, none wider than the window); opened by the reader, it stays open while the list follows a change.
"""

from __future__ import annotations

import pytest

from tests.browser.test_accessibility import base_url, browser, clean_database, pages, site  # noqa: F401 (fixtures)
from tests.browser_support import BROWSER_MARKS, shot
from web.trial_filters import BASIC_FILTERS, TRIAL_FILTERS

pytestmark = BROWSER_MARKS  # drives chromium

VIEWS = {"trials": "/trials", "unreviewed-failures": "/trials?reviewState=unreviewed&rewardBand=failed"}
SCREENS = {"screen": (1440, 900, 450), "phone": (390, 844, 700)}  # width, height, the first row's top under

FIRST_ROW_TOP = """() => {
  const row = document.querySelector('table.trials tbody tr');
  return row ? row.getBoundingClientRect().top + window.scrollY : null;
}"""

# The fields under "More filters": how many columns and rows they fill, and how wide the page is.
MORE_FILTERS_GRID = """() => {
  const boxes = [...document.querySelectorAll('details.more-filters .more-filters-body > label')]
    .map((label) => label.getBoundingClientRect()).filter((box) => box.width > 0);
  return {
    fields: boxes.length,
    columns: new Set(boxes.map((box) => Math.round(box.left))).size,
    rows: boxes.map((box) => box.bottom).sort((a, b) => a - b)
      .filter((bottom, i, bottoms) => i === 0 || bottom - bottoms[i - 1] > 8).length,
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  };
}"""


def open_explorer(page, base_url, path: str, screen: str, scheme: str = "light") -> None:  # noqa: F811
    """Load the explorer at `path` on the screen or the phone, and wait for its count (the last line it loads)."""
    width, height, _ = SCREENS[screen]
    page.set_viewport_size({"width": width, "height": height})
    page.emulate_media(color_scheme=scheme)
    response = page.goto(base_url + path)
    assert response is not None and response.status == 200
    page.wait_for_load_state("load")
    page.wait_for_selector("#trial-count[role=status]")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("view", VIEWS)
def test_the_first_trial_row_is_on_the_first_screen(pages, base_url, site, view, screen, scheme):  # noqa: F811
    page = pages["owner"]
    open_explorer(page, base_url, VIEWS[view], screen, scheme)
    shot(page, f"explorer-{view}-{screen}-{scheme}")
    assert page.locator("table.trials tbody tr").count() >= 10  # a list worth scrolling
    assert page.locator("details.more-filters").get_attribute("open") is None
    assert page.locator("details.more-filters").is_visible()
    top, bound = page.evaluate(FIRST_ROW_TOP), SCREENS[screen][2]
    assert top is not None and top < bound, f"{view} on the {screen} ({scheme}): the first row starts at {top:.0f} px"
    for name in ("q", "status", "rewardBand", "environmentId", "reviewState"):  # the everyday filters, above it
        box = page.locator(f"#trial-filters [name={name}]").bounding_box()
        assert box is not None and box["y"] + box["height"] <= top, f"{name} is not above the list"


@pytest.mark.parametrize("screen", SCREENS)
def test_more_filters_open_as_a_grid_that_fits_the_window(pages, base_url, site, screen):  # noqa: F811
    page = pages["owner"]
    open_explorer(page, base_url, VIEWS["unreviewed-failures"], screen)
    page.click("details.more-filters > summary")
    shot(page, f"explorer-more-filters-{screen}")
    grid = page.evaluate(MORE_FILTERS_GRID)
    assert grid["fields"] == len(TRIAL_FILTERS) - len(BASIC_FILTERS)
    if screen == "screen":
        assert grid["columns"] >= 5 and grid["rows"] <= 3, grid
    else:
        assert grid["columns"] == 2, grid
    assert grid["scrollWidth"] <= grid["innerWidth"], grid

    page.select_option("#trial-filters select[name=status]", "failed")  # an everyday filter: the list is swapped
    page.wait_for_url("**/trials?*status=failed*")
    page.wait_for_selector("#explorer .chips >> text=status: failed")
    assert page.locator("details.more-filters").get_attribute("open") is not None  # as the reader left it


def test_more_filters_are_open_when_one_of_them_is_set(pages, base_url, site):  # noqa: F811
    page = pages["owner"]
    open_explorer(page, base_url, f"/trials?rewardBand=failed&environmentVersionId={site.catalog.version_id}", "screen")
    more = page.locator("details.more-filters")
    assert more.get_attribute("open") is not None
    assert more.locator("summary").inner_text() == "More filters (1 set)"
    page.click("#explorer .chips a[aria-label^='Remove filter version']")  # its chip drops it: folded again
    page.wait_for_url(f"{base_url}/trials?rewardBand=failed")
    page.wait_for_selector("#trial-count[role=status]")
    assert page.locator("details.more-filters").get_attribute("open") is None
    assert page.evaluate(FIRST_ROW_TOP) < SCREENS["screen"][2]
