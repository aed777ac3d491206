"""``Registry[T]`` (issue 25 item 7): one registry over a small protocol serves the jobs
and the cron tasks alike; each kind names its own unknown-name error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from ultimate_jobs.declaration.registry import Registry
from ultimate_jobs.ground.exceptions import JobNameTaken, UnknownJob, UnknownTask
from ultimate_jobs.scheduling.tasks import TaskRegistry


@dataclass(frozen=True)
class Origin:
    origin: str


@dataclass(frozen=True)
class Thing:
    name: str
    definition: Origin

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "origin": self.definition.origin}


class Missing(Exception):
    pass


def test_a_registry_of_anything_registered():
    things: Registry[Thing] = Registry(unknown=Missing)
    first = Thing("a", Origin("app.a"))
    assert things.register(first) is first
    assert things.register(Thing("a", Origin("app.a"))) is first  # seen twice: one
    with pytest.raises(JobNameTaken):
        things.register(Thing("a", Origin("app.other")))
    things.register(Thing("b", Origin("app.b")))
    assert (things.names(), len(things), "b" in things) == (["a", "b"], 2, True)
    assert [t.name for t in things] == ["a", "b"]
    assert things.describe()[1] == {"name": "b", "origin": "app.b"}
    with pytest.raises(Missing):
        things.get("c")
    things.unregister("a")
    assert things.names() == ["b"]


def test_the_jobs_and_the_tasks_name_their_own_unknown():
    with pytest.raises(UnknownJob):
        Registry().get("nope")
    with pytest.raises(UnknownTask):
        TaskRegistry().get("nope")
