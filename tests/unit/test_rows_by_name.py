"""Query rows become dataclasses by column name (queries.rows), so a column added or moved cannot shift a field."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from sqlalchemy import create_engine, text

from queries.rows import all_by_name, by_name


@dataclass(frozen=True)
class Pair:
    id: int
    name: str


def row(**columns):
    return SimpleNamespace(_mapping=columns)


def test_fields_come_from_the_columns_of_their_names_whatever_the_order():
    assert by_name(Pair, row(name="a", id=1)) == Pair(1, "a")
    assert all_by_name(Pair, [row(id=1, name="a"), row(name="b", id=2)]) == [Pair(1, "a"), Pair(2, "b")]


@pytest.mark.parametrize("columns", [{"id": 1}, {"id": 1, "name": "a", "extra": 2}, {"id": 1, "title": "a"}])
def test_a_row_whose_columns_are_not_the_fields_is_refused(columns):
    with pytest.raises(TypeError, match="Pair is built from columns named"):
        by_name(Pair, row(**columns))


def test_a_computed_field_is_passed_by_keyword_and_its_inputs_are_named():
    built = by_name(Pair, row(id=1, raw_name=" a "), read=("raw_name",), name="a")
    assert built == Pair(1, "a")


@pytest.mark.parametrize(
    ("columns", "read", "derived"),
    [
        ({"id": 1, "raw_name": "a"}, (), {"name": "a"}),  # an input the call does not name
        ({"id": 1}, ("raw_name",), {"name": "a"}),  # a named input the row lacks
        ({"id": 1, "name": "a"}, (), {"name": "b"}),  # a column that a computed field would shadow
        ({"id": 1, "name": "a"}, (), {"title": "b"}),  # a computed value for no field
    ],
)
def test_columns_and_computed_fields_must_add_up_to_the_fields(columns, read, derived):
    with pytest.raises(TypeError, match="Pair is built from columns named"):
        by_name(Pair, row(**columns), read=read, **derived)


def test_the_rows_of_results_are_checked_once_per_set_of_columns():
    engine = create_engine("sqlite://")
    with engine.connect() as connection:
        pairs = connection.execute(text("SELECT 1 AS id, 'a' AS name UNION ALL SELECT 2, 'b'")).all()
        titled = connection.execute(text("SELECT 3 AS id, 'c' AS title")).all()
    assert all_by_name(Pair, pairs) == [Pair(1, "a"), Pair(2, "b")]
    with pytest.raises(TypeError, match="Pair is built from columns named"):
        all_by_name(Pair, [*pairs, *titled])  # a row of other columns after checked ones is still refused
