"""Other attempts of a trial's task: the trials of the same environment version given the same task text, the ones
the trial diff compares a trial with (newest first, at most ATTEMPTS_SHOWN)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

from queries.outcomes import TrialOutcome
from queries.rows import all_by_name, by_name

ATTEMPTS_SHOWN = 20


@dataclass(frozen=True, kw_only=True)
class AttemptOf:
    """The trial whose task's attempts are listed: what names it, and its task (with the task key the explorer's
    `task` filter reads: the md5 of the text)."""

    id: uuid.UUID
    trial_number: int
    attempt_count: int
    environment_id: uuid.UUID
    environment_name: str
    version_id: uuid.UUID
    version: int
    run_id: uuid.UUID
    run_number: int
    task: str
    task_key: str


@dataclass(frozen=True, kw_only=True)
class Attempt(TrialOutcome):
    """Another trial of the same task: its outcome and its run."""

    attempt_count: int
    run_id: uuid.UUID
    run_number: int


@dataclass(frozen=True)
class Attempts:
    """A trial, the newest other attempts of its task, and whether there are more than those."""

    trial: AttemptOf
    others: list[Attempt]
    more: bool


ATTEMPT_OF = text(
    """
    SELECT t.id, t.trial_number, er.attempt_count, e.id AS environment_id, e.name AS environment_name,
           v.id AS version_id, v.version, t.evaluation_run_id AS run_id, er.sequence_number AS run_number, t.task,
           md5(t.task) AS task_key
    FROM evaluation_trials t
    JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
    JOIN environment_versions v ON v.organization_id = t.organization_id AND v.id = t.environment_version_id
    JOIN environments e ON e.organization_id = v.organization_id AND e.id = v.environment_id
    WHERE t.id = :id
    """
)

# md5(task) is the hash index of migration 0029; the text itself is compared too, so a hash collision never counts.
OTHERS = text(
    """
    SELECT o.id, o.trial_number, er.attempt_count, o.status, o.reward, o.failure_category, o.started_at,
           o.finished_at, o.evaluation_run_id AS run_id, er.sequence_number AS run_number
    FROM evaluation_trials o
    JOIN evaluation_runs er ON er.organization_id = o.organization_id AND er.id = o.evaluation_run_id
    WHERE o.organization_id = :org AND o.environment_version_id = :version AND md5(o.task) = :task_key
      AND o.task = :task AND o.id <> :id
    ORDER BY o.id DESC
    LIMIT :limit
    """
)


def other_attempts(session: Session, trial_id: uuid.UUID, limit: int = ATTEMPTS_SHOWN) -> Attempts | None:
    """The trial and the newest `limit` other trials of its environment version with its task text (newest
    first), or None when the trial is not in the organization."""
    row = session.execute(ATTEMPT_OF, {"id": trial_id}).first()
    if row is None:
        return None
    trial = by_name(AttemptOf, row)
    params = {
        "org": session.info["org_id"],
        "version": trial.version_id,
        "task_key": trial.task_key,
        "task": trial.task,
        "id": trial.id,
        "limit": limit + 1,
    }
    others = all_by_name(Attempt, session.execute(OTHERS, params))
    return Attempts(trial, others[:limit], len(others) > limit)
