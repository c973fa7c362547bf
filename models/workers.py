"""Worker processes as the dashboard sees them: which are alive and whether they run tenant programs sandboxed."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base

PRESENCE_TTL_S = 60  # a worker not seen for this long is gone


class WorkerPresence(Base):
    """One running worker process and its AGENTFORGE_SANDBOX mode (bwrap or none)."""

    __tablename__ = "worker_presence"
    __table_args__ = (CheckConstraint("sandbox_mode IN ('bwrap', 'none')", name="sandbox_mode"),)

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    sandbox_mode: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(server_default=func.now())
    last_seen_at: Mapped[datetime] = mapped_column(server_default=func.now())
