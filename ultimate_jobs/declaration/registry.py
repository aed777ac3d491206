"""The registry: every job declared in this process, by its durable name (J4, J7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ultimate_jobs.declaration.suggest import did_you_mean
from ultimate_jobs.exceptions import JobNameTaken, UnknownJob

if TYPE_CHECKING:
    from ultimate_jobs.enqueue.handle import JobHandle


class Registry:
    """Every job registered in this process, by its durable name (J4, J7)."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobHandle] = {}

    def register(self, handle: JobHandle) -> JobHandle:
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
        """Forget a job (tests that declare jobs on the fly)."""
        self._jobs.pop(name, None)

    def get(self, name: str) -> JobHandle:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJob(name, did_you_mean(name, self._jobs)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def __iter__(self) -> Iterator[JobHandle]:
        return iter(sorted(self._jobs.values(), key=lambda h: h.name))

    def __len__(self) -> int:
        return len(self._jobs)

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def queues(self) -> list[str]:
        """Every queue a registered job declares (the default of QUEUES, H5)."""
        return sorted({h.definition.queue for h in self._jobs.values()})

    def describe(self) -> list[dict[str, Any]]:
        return [handle.describe() for handle in self]


registry = Registry()
