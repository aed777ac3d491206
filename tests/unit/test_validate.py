"""The shared field checks (issue 25 item 8): one whole-number, flag, positive-number
and duration check that settings, declarations, budgets and factories reuse, each
raising the error type its caller names, told apart by type and code."""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any

import pytest

from ultimate_jobs import (
    ConfigurationError,
    InvalidArgument,
    JobDeclarationInvalid,
    export_rows,
    job,
)
from ultimate_jobs.declaration.definition import NO_TENANT, Declaration, declare
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.ground import validate
from ultimate_jobs.limits.budgets import Limits


@pytest.mark.parametrize(
    ("value", "kwargs", "expected"),
    [
        (1, {}, 1),
        (0, {"least": 0}, 0),
        (-100, {"least": -100, "most": 100}, -100),
        (" 42 ", {"digits": True}, 42),
        (1000, {"most": 1000}, 1000),
    ],
)
def test_whole_accepts_within_its_bounds(value, kwargs, expected):
    assert validate.whole(value, field="n", **kwargs) == expected


@pytest.mark.parametrize(
    ("value", "kwargs"),
    [
        (True, {}),
        (False, {"least": 0}),
        (0, {}),
        (1001, {"most": 1000}),
        (1.0, {}),
        ("3", {}),  # digits only when asked
        ("three", {"digits": True}),
        ("9" * 5000, {"digits": True}),  # past int()'s digit limit: refused, coded
        ("\u0663", {"digits": True}),  # an Arabic-Indic 3: int() reads it, not we
        ("1_000", {"digits": True}),
        (None, {}),
    ],
)
def test_whole_refuses_with_the_callers_error(value, kwargs):
    with pytest.raises(InvalidArgument) as refused:
        validate.whole(value, field="n", **kwargs)
    assert (refused.value.field, refused.value.value) == ("n", value)
    with pytest.raises(ConfigurationError) as configured:
        validate.whole(value, field="KEY", error=ConfigurationError, **kwargs)
    assert configured.value.key == "KEY"


def test_flag_and_positive():
    assert validate.flag(False, field="f") is False
    assert validate.flag(" Yes ", field="f", words=True) is True
    assert validate.flag("off", field="f", words=True) is False
    for bad, words in ((1, False), ("yes", False), ("perhaps", True), (None, True)):
        with pytest.raises(InvalidArgument):
            validate.flag(bad, field="f", words=words)
    assert validate.positive(2, field="r") == 2.0
    assert validate.positive(0, field="r", zero=True) == 0.0
    refused: list[object] = [0, -1, math.inf, math.nan, True, "1"]
    for wrong in refused:
        with pytest.raises(InvalidArgument):
            validate.positive(wrong, field="r")


def test_duration_bounds():
    assert validate.duration("2s", field="d", least=1, most=60) == 2.0
    for bad in ("0.5s", "2m", "soon", 0, True):
        with pytest.raises(InvalidArgument) as refused:
            validate.duration(bad, field="d", least=1, most=60)
        assert refused.value.field == "d"


def test_declarations_budgets_and_factories_refuse_by_type_and_code():
    """The same check, each caller's own error: a declaration's names its job."""
    with pytest.raises(JobDeclarationInvalid) as declared:
        export_rows(
            "exports.daily",
            tenant=NO_TENANT,
            prefix=str,
            source=unused,
            columns=["id"],
            row=dict,
            storage=unused,
            batch=True,
        )
    assert (declared.value.code, declared.value.job) == (
        "X_JOB_DECLARATION_INVALID",
        "exports.daily",
    )
    with pytest.raises(InvalidArgument) as budget:
        Limits(per_tenant=0)
    assert type(budget.value) is InvalidArgument
    assert budget.value.field == "per_tenant"
    refuse = partial(JobDeclarationInvalid, job="j")
    with pytest.raises(JobDeclarationInvalid):
        validate.flag("yes", field="dead_letter", error=refuse)


unused: Any = object()


def body(run, n: int) -> None:
    return None


def test_a_declaration_is_one_frozen_object_that_declare_checks():
    """@job builds one Declaration; declare reads its typed fields."""
    declared = Declaration(
        idempotency_key=lambda p: str(p["n"]),
        tenant=NO_TENANT,
        name="validate.body",
        priority=5,
        retry=None,
        store_result=True,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        declared.priority = 6  # type: ignore[misc]
    definition = declare(body, declared)
    assert (definition.name, definition.priority, definition.store_result) == (
        "validate.body",
        5,
        True,
    )
    assert definition.retry.attempts == 5
    changes: list[tuple[str, Any]] = [
        ("priority", 101),
        ("priority", True),
        ("dead_letter", "yes"),
        ("store_result", 1),
        ("concurrency", 0),
    ]
    for field, value in changes:
        with pytest.raises(JobDeclarationInvalid) as refused:
            declare(body, dataclasses.replace(declared, **{field: value}))
        assert (refused.value.field, refused.value.value) == (field, value)
        assert refused.value.job == "validate.body"


def test_the_decorator_passes_its_options_once():
    handle = job(
        idempotency_key=lambda p: "k",
        tenant=NO_TENANT,
        name="validate.decorated",
        queue="mail",
        dead_letter=False,
    )(body)
    try:
        assert (handle.definition.queue, handle.definition.dead_letter) == (
            "mail",
            False,
        )
    finally:
        registry.unregister(handle.name)
