"""The first-run checklist: a new organization's way from nothing to compared runs, each step ticked once done.

The first three steps read the catalog (an environment, an evaluator, a run); the next two are what the member did
in the organization (opened a failed trial, compared two runs), each a mark `reached` keeps for them in the
database (checklist_marks, migration 0043), so the checklist remembers it at their next login and in any browser;
the signed session cookie holds a copy, so a mark is written once. The last step reads the catalog again (a
dataset, the fixed tasks every agent gets). The list shows on /environments while the organization has no run, and
then, for the member who saw it, until every step is done or they hide it: a member who first comes to an
organization that already has runs is not shown it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from flask import g, session, url_for

from domain.vocabulary import ChecklistMark
from queries.checklist import marks_of
from queries.environments import CatalogCounts
from web.database import get_database, request_session
from writes.checklist import leave_mark

OPENED_FAILED_TRIAL: ChecklistMark = "opened-failed-trial"
COMPARED_RUNS: ChecklistMark = "compared-runs"


@dataclass(frozen=True)
class Step:
    """One step: what to do, where, and whether it is done."""

    title: str
    href: str
    done: bool
    hint: str


def _key(org_id: uuid.UUID) -> str:
    return f"first-steps:{org_id}"


def reached(org_id: uuid.UUID, milestone: ChecklistMark) -> None:
    """Keep a mark the member's visit left in the organization (a no-op once kept): in the database, in a
    transaction of its own (a page's GET commits nothing else), and in the session cookie."""
    done = session.get(_key(org_id), [])
    if milestone in done:
        return
    session[_key(org_id)] = [*done, milestone]
    user_id = g.get("user_id")
    if user_id is not None:
        with get_database().session(org_id, user_id) as own, own.begin():
            leave_mark(own, org_id, user_id, milestone)


def hide(org_id: uuid.UUID) -> None:
    """Hide the checklist for the member, from now on."""
    reached(org_id, "hidden")


def _marks(org_id: uuid.UUID) -> set[str]:
    """The marks the member left: the database's, copied into the session cookie, and the cookie's."""
    done = set(session.get(_key(org_id), []))
    user_id = g.get("user_id")
    if user_id is not None:
        stored = marks_of(request_session(), user_id)
        if stored - done:
            session[_key(org_id)] = [*session.get(_key(org_id), []), *sorted(stored - done)]
        done |= stored
    return done


def first_steps(org_id: uuid.UUID, counts: CatalogCounts) -> list[Step] | None:
    """The checklist while the organization is new (no run yet), and from then on for the member who saw it that
    way, until every step is done or they hid it; None otherwise (a member who first comes when the organization
    has runs never sees it)."""
    done = _marks(org_id)
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
