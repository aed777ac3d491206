"""Input validation against the function's signature (J1). No database."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from ultimate_jobs import InvalidJobPayload, JobDeclarationInvalid
from ultimate_jobs.declaration.payload import decode, encode, read_signature


def body(
    run,
    name: str,
    count: int,
    ratio: float = 1.0,
    tags: list[str] | None = None,
    mode: Literal["a", "b"] = "a",
    meta: dict[str, int] | None = None,
    anything: Any = None,
):
    pass


SIG = read_signature(body, job="t.body")


def test_a_fitting_input_is_encoded_as_canonical_json():
    assert (
        encode("t.body", SIG, {"name": "x", "count": 2, "ratio": 3})
        == '{"count":2,"name":"x","ratio":3}'
    )


@pytest.mark.parametrize(
    ("kwargs", "field", "reason"),
    [
        ({"count": 1}, "name", "required parameter is missing"),
        ({"name": "x", "count": 1, "colour": "red"}, "colour", "unknown parameter"),
        ({"name": "x", "count": "1"}, "count", "expected an integer"),
        ({"name": "x", "count": True}, "count", "expected an integer"),
        ({"name": "x", "count": 1, "ratio": "fast"}, "ratio", "expected a number"),
        (
            {"name": "x", "count": 1, "tags": ["a", 2]},
            "tags",
            "item 1: expected a string",
        ),
        ({"name": "x", "count": 1, "mode": "c"}, "mode", "expected one of"),
        ({"name": "x", "count": 1, "meta": {"a": "b"}}, "meta", "key 'a'"),
        (
            {"name": "x", "count": 1, "anything": {1, 2}},
            "anything",
            "not JSON-serialisable",
        ),
        (
            {"name": "x", "count": 1, "ratio": float("nan")},
            "ratio",
            "not JSON-serialisable",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_value(kwargs, field, reason):
    with pytest.raises(InvalidJobPayload) as info:
        encode("t.body", SIG, kwargs)
    assert info.value.field == field
    assert reason in info.value.reason
    assert info.value.code == "X_INVALID_PAYLOAD"


def test_a_stored_payload_that_no_longer_fits_is_refused_on_decode():
    assert decode("t.body", SIG, '{"name": "x", "count": 1}') == {
        "name": "x",
        "count": 1,
    }
    with pytest.raises(InvalidJobPayload):
        decode("t.body", SIG, '{"title": "x", "count": 1}')  # a renamed parameter
    with pytest.raises(InvalidJobPayload):
        decode("t.body", SIG, "[1, 2]")


def test_kwargs_accepts_unknown_names_but_still_checks_json():
    def loose(run, a: int, **rest):
        pass

    sig = read_signature(loose, job="t.loose")
    assert encode("t.loose", sig, {"a": 1, "b": [1]}) == '{"a":1,"b":[1]}'
    with pytest.raises(InvalidJobPayload):
        encode("t.loose", sig, {"a": 1, "b": object()})


def test_signatures_that_cannot_carry_keyword_input_are_refused():
    def no_run():
        pass

    def star_args(run, *values):
        pass

    def bad_default(run, when=object()):
        pass

    for func in (no_run, star_args, bad_default):
        with pytest.raises(JobDeclarationInvalid):
            read_signature(func, job="t.bad")


def test_signature_description_lists_types_and_defaults():
    described = SIG.describe()
    assert described["name"] == {"type": "str", "required": True}
    assert described["ratio"] == {"type": "float", "required": False, "default": 1.0}


def test_a_flat_input_under_max_bytes_is_passed_without_the_walk_and_over_it_as_the_walk_says():
    """Issue 26: a flat object is checked in one pass with its characters counted; over
    max_bytes the walk decides, so the refusal (path, size) is the walk's."""
    from ultimate_jobs.ground.bounds import json_problem

    flat = {"a": "x" * 10, "n": 1, "f": 1.5, "b": True, "z": None}
    assert json_problem(flat, max_depth=4, max_bytes=15) is None  # 5 keys + 10
    large = json_problem(flat, max_depth=4, max_bytes=14)
    assert large is not None
    assert (large.kind, large.path, large.value) == ("large", "a", 15)
    bad = json_problem({"a": "x\x00"}, max_depth=4, max_bytes=100)
    assert bad is not None
    assert bad.path == "a"


def test_encode_answers_the_json_text_of_the_json_encoder():
    """The encoder made once answers what json.dumps(sort_keys, compact) answers."""
    import json

    value = {"b": [1, 2.5, {"y": None, "x": "é\u2028"}], "a": True, "c": 'q"\\'}

    def body(run: Any, b: list[Any], a: bool, c: str) -> None: ...

    signature = read_signature(body, job="j")
    assert encode("j", signature, value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    with pytest.raises(InvalidJobPayload):
        encode("j", signature, {"b": [float("nan")], "a": True, "c": ""})
