"""The export's pure parts, without a database (F4, B2): keys, prefixes, cells."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from ultimate_jobs import ExportInvalid, export_part_key
from ultimate_jobs.exports import _csv_cell, _json_cell, check_prefix, neutralise


def test_part_keys_sort_in_page_order_up_to_the_last_part():
    keys = [export_part_key("x", i, "csv") for i in (0, 9, 10, 99_999)]
    assert keys == [
        "x/part-00000.csv",
        "x/part-00009.csv",
        "x/part-00010.csv",
        "x/part-99999.csv",
    ]
    assert keys == sorted(keys)


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        (" =1", " =1"),
        ("a-b", "a-b"),
        ("", ""),
    ],
)
def test_formula_starts_are_neutralised(text, cell):
    assert neutralise(text) == cell
    assert _csv_cell(text, "c", "job") == cell


def test_only_strings_are_neutralised():
    assert _csv_cell(-5, "c", "job") == "-5"
    assert _csv_cell(-0.5, "c", "job") == "-0.5"
    assert _csv_cell(Decimal("-1.50"), "c", "job") == "-1.50"
    assert _csv_cell(True, "c", "job") == "true"
    assert _csv_cell(None, "c", "job") == ""
    assert _json_cell(Decimal("-1.50"), "c", "job") == "-1.50"
    assert _json_cell("-1", "c", "job") == "-1"


def test_cells_of_other_types_are_formatted_or_refused():
    uid = uuid.UUID(int=1)
    assert _csv_cell(uid, "c", "job") == str(uid)
    assert _csv_cell(date(2026, 5, 1), "c", "job") == "2026-05-01"
    aware = datetime(2026, 5, 1, 12, tzinfo=UTC)
    assert _csv_cell(aware, "c", "job") == "2026-05-01T12:00:00+00:00"
    for value, reason in (
        (datetime(2026, 5, 1), "naive datetime"),
        (float("nan"), "finite"),
        (object(), "format other values"),
    ):
        with pytest.raises(ExportInvalid, match=reason) as caught:
            _csv_cell(value, "c", "job")
        assert caught.value.field == "row()['c']"


@pytest.mark.parametrize("prefix", ["", "/", "a//b", "../a", "a/./b", "a\\b", " a"])
def test_bad_prefixes_are_refused(prefix):
    with pytest.raises(ExportInvalid, match="prefix="):
        check_prefix(prefix, job="job")


def test_a_prefix_loses_its_outer_slashes():
    assert check_prefix("/exports/o1/e1/", job="job") == "exports/o1/e1"
