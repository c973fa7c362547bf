"""Worker presence: a worker process announces itself and its sandbox mode while it runs, and retires when it stops."""

from __future__ import annotations

from sqlalchemy import delete, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from models.workers import WorkerPresence


def announce_worker(session: Session, name: str, sandbox_mode: str) -> None:
    """Record (or refresh) that worker `name` is alive and how it sandboxes."""
    statement = insert(WorkerPresence).values(name=name, sandbox_mode=sandbox_mode)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=[WorkerPresence.name], set_={"last_seen_at": func.now(), "sandbox_mode": sandbox_mode}
        )
    )


def retire_worker(session: Session, name: str) -> None:
    """Forget worker `name` (it stopped)."""
    session.execute(delete(WorkerPresence).where(WorkerPresence.name == name))
