"""Environment listings: each environment of the current organization with its newest version."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import Environment, EnvironmentVersion


@dataclass(frozen=True)
class EnvironmentSummary:
    """One row of the environments page."""

    id: uuid.UUID
    name: str
    description: str
    latest_version: int | None
    created_at: datetime


def list_environments(session: Session) -> list[EnvironmentSummary]:
    """Return every environment the session's organization can see, by name, with its latest version number."""
    latest = (
        select(func.max(EnvironmentVersion.version))
        .where(
            EnvironmentVersion.organization_id == Environment.organization_id,
            EnvironmentVersion.environment_id == Environment.id,
        )
        .scalar_subquery()
    )
    rows = session.execute(
        select(Environment.id, Environment.name, Environment.description, latest, Environment.created_at).order_by(
            Environment.name
        )
    )
    return [EnvironmentSummary(*row) for row in rows]
