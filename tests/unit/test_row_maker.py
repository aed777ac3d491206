"""The hot door's row maker (db.py ``_row_maker``): one compiled dict display per
statement makes the same dict ``dict(zip(columns, values))`` makes (N2), whatever
the column names PostgreSQL describes (quoted identifiers may hold any text)."""

from __future__ import annotations

import pytest

from ultimate_jobs.db import _row_maker

ODD = ("id", "it's", 'say "hi"', "back\\slash", "{v[0]}", "new\nline", "ünï", "")


@pytest.mark.parametrize("columns", [("id",), ("refused", "id", "input"), ODD])
def test_a_row_maker_makes_the_dict_zip_would(columns: tuple[str, ...]) -> None:
    values = [object() for _ in columns]
    made = _row_maker(columns)(values)
    assert made == dict(zip(columns, values, strict=True))
    assert list(made) == list(columns)  # the statement's column order
    assert all(made[c] is v for c, v in zip(columns, values, strict=True))


def test_a_row_maker_reads_a_tuple_as_a_list() -> None:
    # load_rows hands a list; the unreadable-row path (_readable) hands tuples.
    make = _row_maker(("a", "b"))
    assert make((1, 2)) == make([1, 2]) == {"a": 1, "b": 2}
