"""Backfill declarations (F1, B1), without a database: every bad field is refused where
it is written, naming the field and the value, and nothing is registered."""

from __future__ import annotations

import math

import pytest

from ultimate_jobs import (
    NO_TENANT,
    JobDeclarationInvalid,
    UnknownBackfill,
    backfill,
    registered_backfills,
    registry,
)
from ultimate_jobs.backfills.sweep import DEFAULT_BATCH, DEFAULT_RATE, get_backfill

pytestmark = pytest.mark.usefixtures("clean_registry")


def declared_here():
    """The backfills these tests declare (the test app declares one of its own)."""
    return [b for b in registered_backfills() if b.name.startswith("tests.")]


def never_called():
    raise AssertionError("source() must not be called at declaration")


def handle(rows, token):
    return None


@pytest.mark.parametrize(
    ("field", "options"),
    [
        ("batch", {"batch": 0}),
        ("batch", {"batch": -5}),
        ("batch", {"batch": 1.5}),
        ("batch", {"batch": True}),
        ("batch", {"batch": "1000"}),
        ("rate", {"rate": 0}),
        ("rate", {"rate": -1}),
        ("rate", {"rate": math.nan}),
        ("rate", {"rate": math.inf}),
        ("rate", {"rate": True}),
        ("rate", {"rate": "5"}),
        ("requires", {"requires": "0012_add_slug"}),
        ("requires", {"requires": "blog."}),
        ("requires", {"requires": "blog posts.0012_x"}),
        ("requires", {"requires": 12}),
        ("environments", {"environments": "production"}),
        ("environments", {"environments": []}),
        ("environments", {"environments": ["production", ""]}),
        ("environments", {"environments": [1]}),
        ("environments", {"environments": 3}),
        ("count", {"count": 5}),
        ("tenant", {"tenant": "org-1"}),
        ("queue", {"queue": "Not A Queue"}),
    ],
)
def test_a_bad_field_is_refused_at_declaration(field, options):
    with pytest.raises(JobDeclarationInvalid) as info:
        backfill("tests.bad", never_called, handle, **options)
    assert info.value.field == field
    assert info.value.code == "X_JOB_DECLARATION_INVALID"
    assert f"{field}=" in str(info.value)
    assert "tests.bad" not in registry
    assert declared_here() == []


@pytest.mark.parametrize(
    ("field", "args"),
    [
        ("name", ("", never_called, handle)),
        ("name", (None, never_called, handle)),
        ("source", ("tests.bad", Ellipsis, handle)),
        ("handle", ("tests.bad", never_called, "handle")),
    ],
)
def test_a_missing_name_source_or_handle_is_refused(field, args):
    with pytest.raises(JobDeclarationInvalid) as info:
        backfill(*args)
    assert info.value.field == field


def test_a_good_declaration_calls_nothing_and_answers_a_job_handle():
    sweep = backfill(
        "tests.good",
        never_called,
        handle,
        batch=500,
        rate=0.5,
        requires="blog.0012_add_slug",
        environments=["staging", "production", "staging"],
        count=lambda: 0,
    )
    assert sweep.name == "tests.good"
    described = sweep.describe()
    assert described["input"] == {
        "force": {"type": "bool", "required": False, "default": False}
    }
    assert described["description"] == (
        "Sweeps the rows of tests.good in batches (backfill)."
    )
    [declared] = declared_here()
    assert declared is get_backfill("tests.good")
    assert declared.describe() == {
        "name": "tests.good",
        "checksum": declared.checksum,
        "batch": 500,
        "rate": 0.5,
        "requires": "blog.0012_add_slug",
        "environments": ["staging", "production"],
        "counts": True,
        "queue": "default",
    }
    assert declared.interval == 2.0
    assert sweep.definition.idempotency_key({"force": False}) == "tests.good"
    assert sweep.definition.tenant is NO_TENANT


def test_defaults_follow_the_spec():
    backfill("tests.defaults", never_called, handle)
    [declared] = declared_here()
    assert (declared.batch, declared.rate) == (DEFAULT_BATCH, DEFAULT_RATE) == (1000, 5)
    assert (declared.requires, declared.environments, declared.count) == (
        None,
        None,
        None,
    )


def test_an_unknown_name_lists_the_declared_ones():
    backfill("tests.known", never_called, handle)
    with pytest.raises(UnknownBackfill) as info:
        get_backfill("tests.unknown")
    assert info.value.code == "X_BACKFILL_UNKNOWN"
    assert "tests.known" in str(info.value)
    assert "name='tests.unknown'" in str(info.value)
