"""Workers as the dashboard shows them: is an unsandboxed worker running (owners see a warning banner)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

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
