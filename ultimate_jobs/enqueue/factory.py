"""Declaring a job from a factory (export_rows, webhook): a body and a parameter table.

A factory over ``@job`` has no function of the author's to decorate. It builds one
here: a function ``(run, **input)`` whose signature is the factory's parameter table,
so the input is checked at enqueue and before every attempt like any job's (J1), and
whose origin is the module that called the factory and the line it called from, so
the same declaration imported twice is one registration while two declarations under
one name are refused (J4).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ultimate_jobs.declaration.definition import Declaration
from ultimate_jobs.declaration.run import Run
from ultimate_jobs.enqueue.handle import JobHandle, register
from ultimate_jobs.ground.exceptions import JobDeclarationInvalid

Body = Callable[[Run, dict[str, Any]], Any]
_REQUIRED = inspect.Parameter.empty


def check_parameters(
    factory: str, name: str, parameters: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A parameter table: valid identifiers mapped to their annotation (a type)."""
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise JobDeclarationInvalid(
            "input", parameters, "a mapping of parameter names to types", job=name
        )
    for key in parameters:
        if not isinstance(key, str) or not key.isidentifier() or key == "run":
            raise JobDeclarationInvalid(
                "input",
                key,
                f"{factory} input names are Python identifiers other than 'run'",
                job=name,
            )
    return dict(parameters)


def declare(
    factory: str,
    name: str,
    parameters: Mapping[str, Any],
    body: Body,
    *,
    defaults: Mapping[str, Any] | None = None,
    depth: int = 2,
    **options: Any,
) -> JobHandle:
    """Declare ``body(run, input)`` as the job ``name`` with ``parameters`` as its input.

    ``defaults`` makes parameters optional. ``depth`` is how many frames up the
    factory's caller is (the module the job is declared in).
    """
    if not isinstance(name, str) or not name:
        raise JobDeclarationInvalid(
            "name", name, f"{factory} needs a name: the job's durable queue key"
        )
    defaults = defaults or {}

    def function(run: Run, **kwargs: Any) -> Any:
        return body(run, kwargs)

    signature = [inspect.Parameter("run", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for key, annotation in parameters.items():
        signature.append(
            inspect.Parameter(
                key,
                inspect.Parameter.KEYWORD_ONLY,
                default=defaults.get(key, _REQUIRED),
                annotation=annotation,
            )
        )
    caller = sys._getframe(depth)  # the declaring module is the job's origin
    function.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
    function.__annotations__ = dict(parameters)
    function.__module__ = str(caller.f_globals.get("__name__", factory))
    function.__name__ = factory
    function.__qualname__ = f"{factory}[{name}]@{caller.f_lineno}"
    function.__doc__ = f"The job {factory}({name!r}) declares."
    return register(function, Declaration(name=name, **options))
