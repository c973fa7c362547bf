"""The trial diff of two 200-step trials: the server time of /trials/diff, and of the alignment alone.

Two trials of one run on the bench organization's first environment version, 200 steps each (an agent's calls with
JSON arguments, multi-line observations and now and then a JSON one drawn as a tree, a message every fifth step),
alike for their first 100 steps and apart after that (every third call of B's with other arguments, and B two
calls longer): two attempts of a task that part ways. `python -m bench.trial_diff` measures in the app's database
(the embedded `agentforge_bench` unless configured otherwise), adds those two trials to it and replaces the "Trial
diff" section of BENCHMARKS.md; `make bench` runs it with the rest.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")

from bench.generate import ORGS, ensure_catalog
from bench.pages import REQUESTS, Timing, login, measure, percentile_timing
from bench.sections import write_section
from db.session import Database
from domain.outcome import TrialOutcome
from domain.trajectory import Step, message_step, tool_step
from domain.trajectory_diff import align
from models import EnvironmentVersion, EvaluationRun, EvaluatorConfig
from writes.runs import complete_run, enqueue_run, record_trial

STEPS = 200
ALIKE = 100  # the steps both trials share before they part ways
TARGET_MS = 100.0
SECTION = "## Trial diff"
TOOLS = ("list_inventory", "inspect_item", "restock", "place_order", "check_order")


def trajectory(side: str) -> list[Step]:
    """A 200-step trajectory (202 for B): the first ALIKE steps the same on both sides, then B's every third call
    with other arguments."""
    steps: list[Step] = []
    for number in range(1, STEPS + (3 if side == "b" else 1)):
        if number % 5 == 0:
            steps.append(message_step(number, f"Step {number}: the stock of SKU-{number:04d} looks low; restocking."))
            continue
        tool = TOOLS[number % len(TOOLS)]
        apart = side == "b" and number > ALIKE and number % 3 == 0
        arguments = {"sku": f"SKU-{number:04d}", "quantity": number % 7 + (2 if apart else 1)}
        if number % 7 == 0:
            items = [{"sku": f"SKU-{i:04d}", "shelf": f"A{i % 12}", "quantity": i % 13} for i in range(20)]
            observation = json.dumps({"items": items})
        else:
            observation = "\n".join(f"{tool}: SKU-{number:04d} line {line} stock={line * 3}" for line in range(8))
        steps.append(tool_step(number, tool, arguments, observation, duration_ms=2.5))
    return steps


def outcome(side: str) -> TrialOutcome:
    return TrialOutcome(
        status="failed",
        reward=0.5 if side == "a" else 0.0,
        failure_category="wrong_quantity",
        stages={"stage_inventory": 1.0, "stage_order": 1.0 if side == "a" else 0.0, "stage_checkout": 0.0},
        steps=trajectory(side),
        log="opened admin-console (benchmark)",
        started_at=datetime.now(UTC),
        task="Restock every item below its threshold, then place the order (trial diff benchmark).",
    )


def record_pair(database: Database, org_id: uuid.UUID, version_id: uuid.UUID, config_id: uuid.UUID) -> list[uuid.UUID]:
    """A completed run of the two trials; their ids (A, B)."""
    with database.session(org_id) as session, session.begin():
        version = session.get_one(EnvironmentVersion, (org_id, version_id))
        config = session.get_one(EvaluatorConfig, (org_id, config_id))
        run = session.get_one(EvaluationRun, (org_id, enqueue_run(session, version, config, 2).id))
        ids = [record_trial(session, run, n, n, outcome(side)).id for n, side in ((1, "a"), (2, "b"))]
        complete_run(session, run)
    return ids


@dataclass(frozen=True)
class DiffResult:
    """The page's and the alignment's times, and what the page showed."""

    page: Timing
    alignment: Timing
    steps: tuple[int, int]
    rows: int
    first_divergence: int | None


def measure_alignment(a: list[Step], b: list[Step]) -> Timing:
    """domain.trajectory_diff.align over the two trajectories, REQUESTS times after 5 warm-ups."""
    for _ in range(5):
        align(a, b)
    samples = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        align(a, b)
        samples.append((time.perf_counter() - started) * 1000)
    return percentile_timing(samples)


def measure_diff(app, database: Database) -> DiffResult:
    """Record the two trials in the bench organization, then time the page and the alignment."""
    org_id, catalog = ensure_catalog(database, *ORGS[0])
    version_id, _, config_id = catalog[0]
    a, b = record_pair(database, org_id, version_id, config_id)
    client = app.test_client()
    login(client, ORGS[0][1])
    page = measure(client, f"/trials/diff?a={a}&b={b}")
    steps_a, steps_b = trajectory("a"), trajectory("b")
    diff = align(steps_a, steps_b)
    return DiffResult(
        page, measure_alignment(steps_a, steps_b), (len(steps_a), len(steps_b)), len(diff.rows), diff.first_divergence
    )


def section(result: DiffResult) -> list[str]:
    """The BENCHMARKS.md section for `result`."""
    met = "met" if result.page.p95 <= TARGET_MS else "**not met**"
    first = "none" if result.first_divergence is None else f"row {result.first_divergence + 1}"
    return [
        SECTION,
        "",
        f"`python -m bench.trial_diff` (also part of `make bench`): `/trials/diff` of two trials of {result.steps[0]} "
        f"and {result.steps[1]} steps, alike for {ALIKE} steps and apart after that ({result.rows} aligned rows, "
        f"first divergence at {first}); server time through Flask's test client, {REQUESTS} requests after 5 "
        "warm-ups, in milliseconds. The alignment alone is domain.trajectory_diff.align over the same steps.",
        "",
        "| | median | p95 |",
        "|---|---:|---:|",
        f"| `/trials/diff?a=<id>&b=<id>` (target p95 at most {TARGET_MS:.0f} ms: {met}) | "
        f"{result.page.median:.2f} | {result.page.p95:.2f} |",
        f"| the alignment alone | {result.alignment.median:.2f} | {result.alignment.p95:.2f} |",
        "",
    ]


def main() -> None:
    """Measure and update BENCHMARKS.md."""
    from app import create_app

    app = create_app()
    lines = section(measure_diff(app, app.extensions["agentforge_db"]))
    write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
