"""Declarative base shared by every table: naming convention, time-ordered ids, org-scoped mixin."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, ForeignKeyConstraint, MetaData, Uuid, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from uuid_utils.compat import uuid7

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def one_of(column: str, values: tuple[str, ...]) -> str:
    """A CHECK expression restricting `column` to `values` (a vocabulary of domain/vocabulary.py)."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def org_fk(column: str, table: str, *, name: str | None = None) -> ForeignKeyConstraint:
    """The foreign key (organization_id, `column`) to `table`'s (organization_id, id): a row refers only to rows of
    its own organization."""
    return ForeignKeyConstraint(["organization_id", column], [f"{table}.organization_id", f"{table}.id"], name=name)


def new_id() -> uuid.UUID:
    """Return a new time-ordered (v7) UUID, so ids sort by creation and index inserts stay local."""
    return uuid7()


class Base(DeclarativeBase):
    """Base of every AgentForge table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {uuid.UUID: Uuid(), datetime: DateTime(timezone=True)}


class OrgScoped:
    """Columns of every customer-data table: primary key (organization_id, id) under row-level security."""

    organization_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)


class OrgRoot(OrgScoped):
    """An org-scoped table whose rows hang directly off the organization (foreign key to organizations)."""

    organization_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("organizations.id"), primary_key=True)


class Timestamped:
    """A `created_at` column filled by PostgreSQL."""

    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
