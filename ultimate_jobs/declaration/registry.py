"""The registries: what is declared in this process, by its durable name (J4, J7).

``Registry[T]`` holds anything ``Registered`` (a name, a definition that says where it
was declared, a manifest entry), refuses a second declaration of a name from another
place, and answers ``unknown(name)`` for a name it does not hold. Two are made of it:
``registry``, the jobs, holds the ``JobHandle`` each ``@job`` answers
(enqueue/handle.py), known here only as ``Declared`` so that nothing here imports the
layers above (docs/architecture.md); ``scheduling.tasks.task_registry`` the cron tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, Protocol

from ultimate_jobs.declaration.definition import JobDefinition
from ultimate_jobs.declaration.suggest import did_you_mean
from ultimate_jobs.ground.exceptions import JobNameTaken, UnknownJob


class Origin(Protocol):
    """A definition that says where it was declared (``module.function``)."""

    @property
    def origin(self) -> str: ...


class Registered(Protocol):
    """What a registry holds: a declared thing by name."""

    @property
    def name(self) -> str: ...

    @property
    def definition(self) -> Origin: ...

    def describe(self) -> dict[str, Any]: ...


class Declared(Protocol):
    """What the registry holds: a declared job (a ``JobHandle``)."""

    @property
    def name(self) -> str: ...

    @property
    def definition(self) -> JobDefinition: ...

    def describe(self) -> dict[str, Any]: ...


if TYPE_CHECKING:  # a default for the bare ``Registry`` (PEP 696)
    from typing_extensions import TypeVar

    T = TypeVar("T", bound=Registered, default=Declared)
else:
    from typing import TypeVar

    T = TypeVar("T", bound=Registered)


class Registry(Generic[T]):
    """Everything of one kind registered in this process, by its durable name (J4,
    J7); ``Registry`` alone is the jobs' kind."""

    def __init__(self, unknown: Callable[[str, str], Exception] = UnknownJob) -> None:
        self._jobs: dict[str, T] = {}
        self._unknown = unknown

    def register(self, handle: T) -> T:
        """Register a handle; the same function seen twice is one registration."""
        existing = self._jobs.get(handle.name)
        if existing is not None:
            if existing.definition.origin == handle.definition.origin:
                return existing
            raise JobNameTaken(
                handle.name, existing.definition.origin, handle.definition.origin
            )
        self._jobs[handle.name] = handle
        return handle

    def unregister(self, name: str) -> None:
        """Forget a name (tests that declare jobs on the fly)."""
        self._jobs.pop(name, None)

    def get(self, name: str) -> T:
        try:
            return self._jobs[name]
        except KeyError:
            raise self._unknown(name, did_you_mean(name, self._jobs)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def __iter__(self) -> Iterator[T]:
        return iter(sorted(self._jobs.values(), key=lambda h: h.name))

    def __len__(self) -> int:
        return len(self._jobs)

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def queues(self: Registry[Declared]) -> list[str]:
        """Every queue a registered job declares (the default of QUEUES, H5)."""
        return sorted({h.definition.queue for h in self._jobs.values()})

    def describe(self) -> list[dict[str, Any]]:
        return [handle.describe() for handle in self]


registry: Registry[Declared] = Registry()
