"""What the suite tried against reliability and isolation, counted for the summary line `make test` prints.

Tests count their probes in LEAKS (the isolation property test: requests read by another organization's members,
direct attempts on its ids). Each test's report carries what it added, so the totals are right whether the tests run
in this process or in pytest-xdist workers (whose reports reach the controller, which prints the summary).
"""

from __future__ import annotations

from collections import Counter

MARKERS = {"bad_input": "bad-input tests", "leak": "leak-attempt tests", "fault": "fault-injection tests"}
LEAKS: Counter[str] = Counter()  # incremented by tests in the process that runs them
_REPORTED: Counter[str] = Counter()  # what earlier reports of this process already carried
PASSED: Counter[str] = Counter()  # passed tests per marker, where the reports arrive
PROBES: Counter[str] = Counter()  # LEAKS summed over the reports that arrive


def properties_since_last_report() -> list[tuple[str, int]]:
    """The probes counted since the previous report of this process, as report properties."""
    added = LEAKS - _REPORTED
    _REPORTED.update(added)
    return [(f"probes:{name}", count) for name, count in added.items()]


def count(report) -> None:
    """Add one test report's passed marker and probes to the totals."""
    for name, value in report.user_properties:
        if isinstance(name, str) and name.startswith("probes:"):
            PROBES[name.removeprefix("probes:")] += value
    if report.when == "call" and report.passed:
        for marker in MARKERS:
            if marker in report.keywords:
                PASSED[marker] += 1


def summary() -> str:
    """The reliability line."""
    parts = [f"{PASSED[m]} {label}" for m, label in MARKERS.items()]
    return (
        "reliability: " + ", ".join(parts) + f"; property test: {PROBES['requests']} requests by org B members "
        f"read with no org A id, {PROBES['attempts']} direct attempts on org A ids refused"
    )
