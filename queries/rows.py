"""Rows mapped by name: a frozen dataclass built from a result row, each field from the column of its name.

A statement names its columns after the fields they fill (`SELECT v.id, coalesce(s.runs, 0) AS runs …`, or
`.label("runs")` in SQLAlchemy's select), so a column added, dropped or moved cannot shift values into the wrong
field: a row whose columns are not exactly the dataclass's fields is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from operator import itemgetter
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
    """`by_name` of every row, in order: the first row's columns are checked, and every row with the same columns
    is built by the same mapping of columns to fields (the rows of one result share their columns, so a thousand
    rows cost a thousand constructions, not a thousand checks)."""
    answer: list[T] = []
    columns: tuple[str, ...] | None = None
    pick: Any = None
    for row in rows:
        if columns is None:
            answer.append(by_name(cls, row))
            columns = tuple(row._mapping)
            pick = _picker([columns.index(field.name) for field in fields(cls)])  # type: ignore[arg-type]
        else:
            answer.append(cls(*pick(row)))
    return answer


def _picker(order: list[int]) -> Any:
    """A function of a row giving its values at `order`, as a tuple."""
    if len(order) == 1:
        only = order[0]
        return lambda row: (row[only],)
    return itemgetter(*order)
