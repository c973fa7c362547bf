"""Workers as the dashboard shows them: is an unsandboxed worker running (owners see a warning banner), and what a
queued run waits for."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models.evaluations import EvaluationRun
from models.workers import PRESENCE_TTL_S, WorkerPresence


def unsandboxed_worker_running(session: Session) -> bool:
    """True while a worker with AGENTFORGE_SANDBOX=none has been seen within the last minute."""
    recent = func.now() - func.make_interval(0, 0, 0, 0, 0, 0, PRESENCE_TTL_S)
    return bool(
        session.scalar(
            select(
                select(WorkerPresence.name)
                .where(WorkerPresence.sandbox_mode == "none", WorkerPresence.last_seen_at > recent)
                .exists()
            )
        )
    )


@dataclass(frozen=True)
class WorkerActivity:
    """What a queued run waits for: workers seen within the last minute, and the organization's runs they hold."""

    alive: int
    busy_with: int


def worker_activity(session: Session) -> WorkerActivity:
    """Live workers (any organization's: worker_presence holds no customer data) and this organization's running
    runs (row-level security keeps other organizations' runs out of the count)."""
    recent = func.now() - func.make_interval(0, 0, 0, 0, 0, 0, PRESENCE_TTL_S)
    alive = select(func.count()).select_from(WorkerPresence).where(WorkerPresence.last_seen_at > recent)
    running = select(func.count()).select_from(EvaluationRun).where(EvaluationRun.status == "running")
    row = session.execute(select(alive.scalar_subquery(), running.scalar_subquery())).one()
    return WorkerActivity(int(row[0]), int(row[1]))
