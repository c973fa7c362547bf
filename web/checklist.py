"""The first-run checklist: a new organization's way from nothing to compared runs, each step ticked once done.

The first three steps read the catalog (an environment, an evaluator, a run); the next two are what this browser
session did in the organization (opened a failed trial, compared two runs), kept in the signed session cookie by
`reached`; the last reads the catalog again (a dataset, the fixed tasks every agent gets). The list shows on
/environments while the organization has no run, and then, in the session that saw it, until every step is done or
the user hides it: an organization that already has runs is not shown it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from flask import session, url_for

from queries.environments import CatalogCounts

OPENED_FAILED_TRIAL, COMPARED_RUNS = "opened-failed-trial", "compared-runs"


@dataclass(frozen=True)
class Step:
    """One step: what to do, where, and whether it is done."""

    title: str
    href: str
    done: bool
    hint: str


def _key(org_id: uuid.UUID) -> str:
    return f"first-steps:{org_id}"


def reached(org_id: uuid.UUID, milestone: str) -> None:
    """Tick a step this session reached in the organization (a no-op once ticked)."""
    done = session.get(_key(org_id), [])
    if milestone not in done:
        session[_key(org_id)] = [*done, milestone]


def hide(org_id: uuid.UUID) -> None:
    """Hide the checklist for the rest of this session."""
    reached(org_id, "hidden")


def first_steps(org_id: uuid.UUID, counts: CatalogCounts) -> list[Step] | None:
    """The checklist while the organization is new (no run yet), and from then on in the session that saw it that
    way, until every step is done or it was hidden; None otherwise (an organization that has runs never sees it)."""
    done = set(session.get(_key(org_id), []))
    if "hidden" in done:
        return None
    if counts.runs == 0:
        reached(org_id, "shown")
    elif "shown" not in done:
        return None
    run_here = (
        url_for("environments.show", environment_id=counts.first_environment_id, _anchor="start-run")
        if counts.first_environment_id
        else url_for("catalog.new_environment")
    )
    steps = [
        Step(
            "Create an environment",
            url_for("catalog.new_environment"),
            counts.environments > 0,
            "a built-in world, or your MCP server",
        ),
        Step(
            "Create an evaluator",
            url_for("catalog.new_evaluator"),
            counts.evaluators > 0,
            "the agent under test and its attemptCount",
        ),
        Step("Start a run", run_here, counts.runs > 0, "every task, attemptCount times; a worker runs it"),
        Step(
            "Open a failed trial",
            url_for("trials.index", rewardBand="failed"),
            OPENED_FAILED_TRIAL in done,
            "its log, trajectory and partial stage_* credit",
        ),
        Step("Compare two runs", url_for("compare.show"), COMPARED_RUNS in done, "pass@k and the per-task verdict"),
        Step(
            "Make a dataset",
            url_for("datasets.index"),
            counts.datasets > 0,
            "fixed tasks (world seeds) every agent is evaluated on, compared task by task",
        ),
    ]
    return None if all(step.done for step in steps) else steps
