"""One row per submitted page form: every create form carries a fresh key (web.fields.SubmissionKeyField), and the
row it creates keeps it in `submission_key` under a unique (organization_id, submission_key) index, so a second
POST of the same form (a double click, Back and submit again) answers with the first one's row."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from domain.errors import DomainError

Row = TypeVar("Row")


def submitted(session: Session, model: type[Row], submission_key: uuid.UUID | None) -> Row | None:
    """The row a form submission with `submission_key` already wrote (None: none, or no key)."""
    if submission_key is None:
        return None
    column: Any = model.submission_key  # type: ignore[attr-defined]
    return session.scalar(select(model).where(column == submission_key))


def once(
    session: Session, model: type[Row], submission_key: uuid.UUID | None, create: Callable[[], Row]
) -> tuple[Row, bool]:
    """The row `create()` adds, unless a submission with the same key already added one: (the row, True if new).

    Two concurrent POSTs with one key both try to insert; the second waits on the unique index until the first
    commits, then its savepoint rolls back and it answers with the first one's row."""
    index = f"ux_{model.__tablename__}_org_submission_key"  # type: ignore[attr-defined]
    earlier = submitted(session, model, submission_key)
    if earlier is not None:
        return earlier, False
    try:
        with session.begin_nested():
            return create(), True
    except IntegrityError as error:
        if submission_key is None or index not in str(error.orig):
            raise
    earlier = submitted(session, model, submission_key)
    if earlier is None:  # pragma: no cover - the index said it exists
        raise DomainError("this form was already submitted; reload the page and try again")
    return earlier, False
