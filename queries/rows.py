"""Rows mapped by name: a frozen dataclass built from a result row, each field from the column of its name.

A statement names its columns after the fields they fill (`SELECT v.id, coalesce(s.runs, 0) AS runs …`, or
`.label("runs")` in SQLAlchemy's select), so a column added, dropped or moved cannot shift values into the wrong
field: a row whose columns are not exactly the dataclass's fields is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def by_name(cls: type[T], row: Any, *, read: Iterable[str] = (), **derived: Any) -> T:
    """`cls` (a dataclass) from `row`, each field from the column of the same name; TypeError when the row's
    columns are not exactly the fields.

    A field computed in Python is passed by keyword in `derived`; the columns it was computed from are named in
    `read`. The row's columns must then be exactly the other fields and the `read` ones.
    """
    columns = row._mapping
    names = {field.name for field in fields(cls)}  # type: ignore[arg-type]
    inputs = set(read)
    expected = (names - set(derived)) | inputs
    if set(columns) != expected or not set(derived) <= names:
        raise TypeError(
            f"{cls.__name__} is built from columns named {sorted(expected)} and computed fields "
            f"{sorted(derived)}, not from columns {sorted(str(c) for c in columns)}"
        )
    return cls(**{name: value for name, value in columns.items() if name not in inputs}, **derived)


def all_by_name(cls: type[T], rows: Iterable[Any]) -> list[T]:
    """`by_name` of every row, in order. The columns are checked once per set of column names (the rows of one
    result share theirs), so a result of 10,000 rows costs 10,000 constructions, not 10,000 checks."""
    found: list[T] = []
    checked: tuple[str, ...] | None = None
    for row in rows:
        names = getattr(row, "_fields", None)  # a Row's column names (one tuple per result)
        if names is None or names != checked:
            found.append(by_name(cls, row))
            checked = names
        else:
            found.append(cls(**dict(zip(names, row, strict=True))))
    return found
