"""The worker's writes on the runs it claims: claim the next one, renew its lease, hand it back, fail it for good.

A claim goes through the SECURITY DEFINER function claim_next_run (FOR UPDATE SKIP LOCKED), the only write that looks
across organizations; the others run in a session scoped to the run's organization and touch the run only while
`owner` holds its lease (failing a run that can never succeed excepted).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, func, text, update
from sqlalchemy.orm import Session

from db.session import rows_changed
from models.evaluations import EvaluationRun
from writes.runs import notify_workers


def claim_run(
    connection: Connection, worker: str, *, lease_seconds: int, max_attempts: int, max_runs_per_org: int
) -> tuple[uuid.UUID, uuid.UUID] | None:
    """Claim the next run round-robin across organizations (within the per-org cap) for `worker`: (organization id,
    run id), or None when nothing is claimable."""
    row = connection.execute(
        text("SELECT run_organization_id, run_id FROM claim_next_run(:worker, :lease, :attempts, :per_org)"),
        {"worker": worker, "lease": lease_seconds, "attempts": max_attempts, "per_org": max_runs_per_org},
    ).first()
    return (row[0], row[1]) if row else None


def renew_lease(session: Session, org_id: uuid.UUID, run_id: uuid.UUID, owner: str, seconds: int) -> bool:
    """Extend `owner`'s lease on a running run by `seconds`; False when the run is no longer ours."""
    renewed = session.execute(
        update(EvaluationRun)
        .where(
            EvaluationRun.organization_id == org_id,
            EvaluationRun.id == run_id,
            EvaluationRun.lease_owner == owner,
            EvaluationRun.status == "running",
        )
        .values(lease_expires_at=func.now() + func.make_interval(0, 0, 0, 0, 0, 0, seconds))
    )
    return rows_changed(renewed) == 1


def release_run(
    session: Session, org_id: uuid.UUID, run_id: uuid.UUID, owner: str, error: str | None, *, counted: bool
) -> None:
    """Hand `owner`'s run back to the queue (queued, no lease) with `error` when given, and wake the workers; a claim
    not `counted` is given back too (a stop request is not the run's fault)."""
    values: dict[str, Any] = {"status": "queued", "lease_owner": None, "lease_expires_at": None}
    if error:
        values["error"] = error
    if not counted:
        values["attempts"] = func.greatest(EvaluationRun.attempts - 1, 0)
    session.execute(
        update(EvaluationRun)
        .where(EvaluationRun.organization_id == org_id, EvaluationRun.id == run_id)
        .where(EvaluationRun.lease_owner == owner)
        .values(**values)
    )
    notify_workers(session)


def fail_run(session: Session, org_id: uuid.UUID, run_id: uuid.UUID, error: str) -> None:
    """Mark a run that can never succeed (bad spec or agent, secrets that do not open) failed, with the reason."""
    session.execute(
        update(EvaluationRun)
        .where(EvaluationRun.organization_id == org_id, EvaluationRun.id == run_id)
        .values(status="failed", error=error, finished_at=func.now(), lease_owner=None, lease_expires_at=None)
    )
