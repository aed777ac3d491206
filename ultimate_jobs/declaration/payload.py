"""A job's input: keyword arguments checked against the function's signature (J1).

The input is a JSON object of keyword arguments. It is checked at enqueue and decoded
and checked again before every attempt, so a stored payload that no longer fits the
function (a renamed parameter, a changed type) is refused before the body runs.
A job that declares ``version=N`` stores N with each input (``__version__``); an input
of an older version is upgraded at decode, one ``upgrade`` step at a time (P11).
Annotations are checked for the JSON shapes: str, int, float, bool, None, list[T],
tuple[T, ...], dict[str, T], Optional/Union, Literal and Any. Other annotations are
accepted as they come (the value still has to be JSON).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import types
import typing
from collections import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ultimate_jobs.declaration.redaction import REDACTED, Redaction
from ultimate_jobs.ground.bounds import (
    DEFAULT_MAX_INPUT_DEPTH,
    check_json,
    check_size,
)
from ultimate_jobs.ground.exceptions import (
    InputUpgradeFailed,
    InputVersionAhead,
    InvalidJobPayload,
    JobDeclarationInvalid,
)

# P11: the key of a stored input that holds its version, written when a job declares
# version=N above 1 (a row without it is version 1). A parameter may not take it.
VERSION_KEY = "__version__"
Upgrades = Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]


@dataclass(frozen=True)
class Parameter:
    name: str
    annotation: Any  # the resolved annotation, or inspect.Parameter.empty
    required: bool
    default: Any


@dataclass(frozen=True)
class Signature:
    """The input half of a job function's signature (every parameter after the run)."""

    parameters: tuple[Parameter, ...]
    accepts_any: bool  # the function takes **kwargs

    @functools.cached_property
    def names(self) -> frozenset[str]:
        """The parameters' names (asked for every input validated)."""
        return frozenset(p.name for p in self.parameters)

    def describe(self) -> dict[str, dict[str, Any]]:
        """A JSON-friendly description for the manifest and the admin."""
        return {
            p.name: {
                "type": _annotation_name(p.annotation),
                "required": p.required,
                **({} if p.required else {"default": _json_or_repr(p.default)}),
            }
            for p in self.parameters
        }


def read_signature(func: Callable[..., Any], *, job: str) -> Signature:
    """Read the input parameters of ``func``; the first parameter is the run context."""
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise JobDeclarationInvalid(
            "function",
            func,
            "the first parameter of a job function is the run context",
            job=job,
        )
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        hints = {}
    out = []
    accepts_any = False
    for param in params[1:]:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_any = True
            continue
        if param.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.POSITIONAL_ONLY,
        ):
            raise JobDeclarationInvalid(
                "function",
                param.name,
                "job input is passed by keyword; *args and positional-only are refused",
                job=job,
            )
        required = param.default is inspect.Parameter.empty
        if not required:
            try:
                _dump(param.default)
            except (TypeError, ValueError) as exc:
                raise JobDeclarationInvalid(
                    f"default of {param.name}",
                    param.default,
                    f"not JSON-serialisable: {exc}",
                    job=job,
                ) from None
        out.append(
            Parameter(
                param.name,
                hints.get(param.name, inspect.Parameter.empty),
                required,
                param.default,
            )
        )
    return Signature(tuple(out), accepts_any)


_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), sort_keys=True)


def _dump(value: Any) -> str:
    return _ENCODER.encode(value)


# The same encoding, its C encoder made once rather than per call (issue 26: a third
# of an enqueue_many's encoding). It keeps no record of the containers it is inside
# (markers None), so it is only for a value check_json accepted: nested at most
# MAX_INPUT_DEPTH deep, so never circular.
_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = (
    None
    if _MAKE_ENCODER is None
    else _MAKE_ENCODER(
        None,  # markers: no record of the containers it is inside
        _ENCODER.default,
        json.encoder.encode_basestring_ascii,
        _ENCODER.indent,
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        _ENCODER.sort_keys,
        _ENCODER.skipkeys,
        _ENCODER.allow_nan,
    )
)


def _dump_checked(value: Any) -> str:
    """``_dump`` of a value ``check_json`` accepted."""
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def _shown(redaction: Redaction | None, field: str, value: Any) -> Any:
    """What an error shows of ``value`` at ``field``: never a redacted value (B5)."""
    if redaction is None:
        return value
    if field != "input" and redaction.hides_path(field):
        return REDACTED
    return redaction.apply(value)


def encode(
    job: str,
    signature: Signature,
    kwargs: Mapping[str, Any],
    *,
    max_bytes: int | None = None,
    max_depth: int = DEFAULT_MAX_INPUT_DEPTH,
    redaction: Redaction | None = None,
    version: int = 1,
) -> str:
    """Check ``kwargs`` against the signature and the bounds (B4: no NUL or lone
    surrogate, 64-bit integers, at most ``max_depth`` deep and ``max_bytes`` long) and
    answer the stored JSON text, with ``version`` when it is above 1 (P11). Errors
    show redacted values as ``[redacted]``."""
    # A dict is a Mapping: said without the ABC's (slower) isinstance check.
    if type(kwargs) is not dict and not isinstance(kwargs, Mapping):
        raise InvalidJobPayload(
            job, "input", kwargs, "input is a mapping of keyword arguments"
        )
    if VERSION_KEY in kwargs:
        raise InvalidJobPayload(
            job,
            VERSION_KEY,
            _shown(redaction, VERSION_KEY, kwargs[VERSION_KEY]),
            "reserved for the input's version (declare @job(version=N) instead)",
        )
    # One plain dict for the walk and the JSON (neither changes it): a dict as it is,
    # any other mapping copied once.
    plain = kwargs if type(kwargs) is dict else dict(kwargs)
    check_json(
        job,
        "",
        plain,
        max_depth=max_depth,
        max_bytes=max_bytes,
        show=lambda field, value: _shown(redaction, field, value),
    )
    validate(job, signature, kwargs, redaction=redaction, json_checked=True)
    stored = plain if version == 1 else {**plain, VERSION_KEY: version}
    try:
        encoded = _dump_checked(stored)
    except (TypeError, ValueError) as exc:
        raise InvalidJobPayload(
            job,
            "input",
            _shown(redaction, "input", kwargs),
            f"not JSON-serialisable: {exc}",
        ) from None
    if max_bytes is not None:
        check_size(job, "input", encoded, max_bytes=max_bytes)
    return encoded


def decode(
    job: str,
    signature: Signature,
    stored: str | Mapping[str, Any],
    *,
    max_depth: int = DEFAULT_MAX_INPUT_DEPTH,
    redaction: Redaction | None = None,
    version: int = 1,
    upgrade: Upgrades | None = None,
) -> dict[str, Any]:
    """Decode a stored payload and check it again; a stale one is InvalidJobPayload,
    and so is one nested past ``max_depth`` (an older version's row).

    P11: an input of an older version than ``version`` is upgraded first, one step
    of ``upgrade`` at a time (n to n+1); a missing step, or one that raises or answers
    no object, is InputUpgradeFailed. An input of a newer version is
    InputVersionAhead (the caller hands the row back untouched)."""
    try:
        value = json.loads(stored) if isinstance(stored, str) else stored
    except (ValueError, RecursionError) as exc:
        raise InvalidJobPayload(
            job,
            "input",
            "...",
            f"the stored input cannot be decoded: {type(exc).__name__}",
        ) from None
    if not isinstance(value, dict):
        raise InvalidJobPayload(
            job,
            "input",
            _shown(redaction, "input", value),
            "the stored input is not a JSON object",
        )
    if VERSION_KEY in value or version != 1:
        value = _upgraded(job, dict(value), version, upgrade or {})
    check_json(
        job,
        "",
        value,
        max_depth=max_depth,
        show=lambda field, bad: _shown(redaction, field, bad),
    )
    validate(job, signature, value, redaction=redaction, json_checked=True)
    return value


def _upgraded(
    job: str, value: dict[str, Any], version: int, upgrade: Upgrades
) -> dict[str, Any]:
    """The input without its version key, upgraded step by step to ``version``."""
    stored = value.pop(VERSION_KEY, 1)
    if isinstance(stored, bool) or not isinstance(stored, int) or stored < 1:
        raise InvalidJobPayload(
            job, VERSION_KEY, stored, "the stored version is not a whole number >= 1"
        )
    if stored > version:
        raise InputVersionAhead(job, stored, version)
    while stored < version:
        step = upgrade.get(stored)
        if step is None:
            raise InputUpgradeFailed(
                job, stored, f"no upgrade from version {stored} to {stored + 1}"
            )
        try:
            value = step(dict(value))
        except Exception as exc:
            raise InputUpgradeFailed(
                job,
                stored,
                f"the upgrade from version {stored} to {stored + 1} raised "
                f"{type(exc).__name__}: {str(exc)[:300]}",
            ) from exc
        if not isinstance(value, dict) or VERSION_KEY in value:
            raise InputUpgradeFailed(
                job,
                stored,
                f"the upgrade from version {stored} to {stored + 1} answered "
                f"{type(value).__name__}, not a dict of keyword arguments",
            )
        stored += 1
    return value


def validate(
    job: str,
    signature: Signature,
    kwargs: Mapping[str, Any],
    *,
    redaction: Redaction | None = None,
    json_checked: bool = False,
) -> None:
    """Refuse missing or unknown parameters and values that break their annotation.

    Call it on a value ``check_json`` accepted (``json_checked``: the JSON walk is then
    not repeated): the annotation checks recurse.
    """
    # A dict is a Mapping: said without the ABC's (slower) isinstance check.
    if type(kwargs) is not dict and not isinstance(kwargs, Mapping):
        raise InvalidJobPayload(
            job, "input", kwargs, "input is a mapping of keyword arguments"
        )
    known = signature.names
    for name in kwargs:
        if not isinstance(name, str):
            raise InvalidJobPayload(job, "input", name, "parameter names are strings")
        if name not in known and not signature.accepts_any:
            raise InvalidJobPayload(
                job,
                name,
                _shown(redaction, name, kwargs[name]),
                f"unknown parameter (expected: {', '.join(sorted(known)) or 'none'})",
            )
    for param in signature.parameters:
        if param.name not in kwargs:
            if param.required:
                raise InvalidJobPayload(
                    job, param.name, None, "required parameter is missing"
                )
            continue
        value = kwargs[param.name]
        problem = _check(value, param.annotation)
        if problem:
            raise InvalidJobPayload(
                job, param.name, _shown(redaction, param.name, value), problem
            )
    for name, value in () if json_checked else kwargs.items():
        if not _is_json(value):
            raise InvalidJobPayload(
                job,
                name,
                _shown(redaction, name, value),
                "not JSON-serialisable (str, int, float, bool, None, list, dict)",
            )


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def _check(value: Any, annotation: Any) -> str | None:  # noqa: C901 - one branch per shape
    """Answer why ``value`` breaks ``annotation``, or None when it fits (or is unchecked)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return None
    if annotation is None or annotation is type(None):
        return None if value is None else "expected null"
    # The plain scalar annotations first: no typing.get_origin/get_args per value (N2:
    # a worker checks every input it runs).
    if annotation is bool:
        return None if isinstance(value, bool) else "expected a boolean"
    if annotation is int:
        return (
            None
            if isinstance(value, int) and not isinstance(value, bool)
            else "expected an integer"
        )
    if annotation is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "expected a number"
    if annotation is str:
        return None if isinstance(value, str) else "expected a string"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        problems = [
            _check(value, arg)
            for arg in args
            if not (value is not None and arg is type(None))
        ]
        if any(problem is None for problem in problems):
            return None
        if len(problems) == 1:  # Optional[X] with a value: say what is wrong with X
            return problems[0]
        return f"expected {_annotation_name(annotation)}"
    if origin is typing.Literal:
        return None if value in args else f"expected one of {list(args)!r}"
    if annotation in (list, tuple) or origin in (list, tuple, abc.Sequence):
        if not isinstance(value, list | tuple):
            return "expected a list"
        inner = [a for a in args if a is not Ellipsis]
        if len(inner) == 1:
            for index, item in enumerate(value):
                if (problem := _check(item, inner[0])) is not None:
                    return f"item {index}: {problem}"
        return None
    if annotation is dict or origin in (dict, abc.Mapping):
        if not isinstance(value, dict):
            return "expected an object"
        if len(args) == 2:
            for key, item in value.items():
                if (problem := _check(item, args[1])) is not None:
                    return f"key {key!r}: {problem}"
        return None
    return None


def _annotation_name(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "any"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _json_or_repr(value: Any) -> Any:
    return value if _is_json(value) else repr(value)
