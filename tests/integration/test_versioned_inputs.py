"""P11: ``@job(version=N, upgrade={n: fn})``. The version is stored with each input;
a worker upgrades an older input at decode, one step at a time, instead of
dead-lettering it; an upgrade that fails dead-letters the job with a coded reason; an
input newer than the code is handed back untouched for a worker of the newer code."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from ultimate_jobs import (
    NO_TENANT,
    InputUpgradeFailed,
    InvalidJobPayload,
    JobDeclarationInvalid,
    job,
)
from ultimate_jobs.api import deploy_check
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.models import Attempt, Job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_registry")]
NAME = "versioned.ship"
SEEN: list[dict[str, Any]] = []


def _key(p: dict[str, Any]) -> str:
    return str(p["key"])


def ship_v1(run: Any, key: str, address: str) -> None:
    SEEN.append({"key": key, "address": address})


def ship_v2(run: Any, key: str, street: str, city: str) -> None:
    SEEN.append({"key": key, "street": street, "city": city})


def ship_v3(run: Any, key: str, street: str, city: str, country: str) -> None:
    SEEN.append({"key": key, "street": street, "city": city, "country": country})


def split_address(old: dict[str, Any]) -> dict[str, Any]:
    street, city = old.pop("address").split(", ")
    return {**old, "street": street, "city": city}


def add_country(old: dict[str, Any]) -> dict[str, Any]:
    return {**old, "country": "NL"}


def broken(old: dict[str, Any]) -> dict[str, Any]:
    return {**old, "country": old["missing"]}


def deploy(func: Any, **fields: Any) -> Any:
    """This code's declaration of NAME, as a new deploy replaces the previous one."""
    if NAME in registry:
        registry.unregister(NAME)
    return job(name=NAME, idempotency_key=_key, tenant=NO_TENANT, **fields)(func)


def stored(job_id: Any) -> dict[str, Any]:
    row = Job.objects.get(pk=job_id)
    return row.input if isinstance(row.input, dict) else json.loads(row.input)


@pytest.fixture(autouse=True)
def _seen():
    SEEN.clear()


def test_older_inputs_are_upgraded_step_by_step(jobs):
    v1 = deploy(ship_v1).enqueue(key="a", address="Main St 1, Utrecht")
    assert stored(v1.id) == {"key": "a", "address": "Main St 1, Utrecht"}
    v2 = deploy(ship_v2, version=2, upgrade={1: split_address}).enqueue(
        key="b", street="Oak 2", city="Delft"
    )
    assert stored(v2.id) == {
        "key": "b",
        "street": "Oak 2",
        "city": "Delft",
        "__version__": 2,
    }
    v3 = deploy(ship_v3, version=3, upgrade={1: split_address, 2: add_country})
    assert deploy_check()["ok"] is True  # upgradable rows are no problem
    [first, second] = jobs.run()
    assert (first.outcome, second.outcome) == ("completed", "completed")
    assert SEEN == [
        {"key": "a", "street": "Main St 1", "city": "Utrecht", "country": "NL"},
        {"key": "b", "street": "Oak 2", "city": "Delft", "country": "NL"},
    ]
    assert v3.describe()["version"] == 3 and v3.describe()["upgrades_from"] == [1, 2]


def test_a_failing_upgrade_dead_letters_with_a_coded_reason(jobs):
    v2 = deploy(ship_v2, version=2, upgrade={1: split_address})
    answer = v2.enqueue(key="c", street="Elm 3", city="Leiden")
    deploy(ship_v3, version=3, upgrade={2: broken})
    assert deploy_check()["problems"][0]["example"]["error"].startswith(
        "X_INPUT_UPGRADE_FAILED"
    )
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    row = Job.objects.get(pk=answer.id)
    assert (row.state, row.error_code, SEEN) == ("dead", "X_INPUT_UPGRADE_FAILED", [])
    assert (
        "versioned.ship: __version__=2: the upgrade from version 2 to 3 raised "
        "KeyError: 'missing'"
    ) in row.last_error
    assert stored(answer.id)["__version__"] == 2  # the stored input is left as it was


def test_an_input_without_its_upgrade_step_is_refused_by_name(jobs):
    answer = deploy(ship_v1).enqueue(key="d", address="x, y")
    deploy(ship_v3, version=3, upgrade={2: add_country})  # no step from 1
    [attempt] = jobs.run()
    row = Job.objects.get(pk=answer.id)
    assert (attempt.outcome, row.error_code) == (
        "dead-lettered",
        "X_INPUT_UPGRADE_FAILED",
    )
    assert "__version__=1: no upgrade from version 1 to 2" in row.last_error


def test_an_input_newer_than_the_code_is_handed_back_untouched(jobs):
    newer = deploy(ship_v3, version=3, upgrade={1: split_address, 2: add_country})
    answer = newer.enqueue(key="e", street="Pine 4", city="Gouda", country="BE")
    before = stored(answer.id)
    # A worker of the previous deploy (version 2) claims the row.
    deploy(ship_v2, version=2, upgrade={1: split_address})
    claimed_after = jobs.now()
    [attempt] = jobs.run()
    assert attempt.outcome == "interrupted"
    row = Job.objects.get(pk=answer.id)
    assert (row.state, row.attempt, row.last_error, row.error_code) == (
        "delayed",
        0,
        "",
        "",
    )
    wait = timedelta(seconds=30)
    assert claimed_after + wait <= row.run_at <= jobs.now() + wait
    assert (
        stored(answer.id)
        == before
        == {
            "key": "e",
            "street": "Pine 4",
            "city": "Gouda",
            "country": "BE",
            "__version__": 3,
        }
    )
    assert not Attempt.objects.filter(job_id=answer.id).exists()
    assert SEEN == []
    # The newer code's worker runs it as it was enqueued.
    deploy(ship_v3, version=3, upgrade={1: split_address, 2: add_country})
    jobs.travel(seconds=30)
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert SEEN == [{"key": "e", "street": "Pine 4", "city": "Gouda", "country": "BE"}]
    assert Job.objects.get(pk=answer.id).attempt == 1


@pytest.mark.parametrize(
    ("fields", "field", "value"),
    [
        ({"version": 0}, "version", 0),
        ({"version": True}, "version", True),
        ({"version": 2, "upgrade": {2: add_country}}, "upgrade", 2),
        ({"version": 2, "upgrade": {1: "not callable"}}, "upgrade[1]", "not callable"),
        (
            {"version": 4, "upgrade": {1: add_country, 3: add_country}},
            "upgrade",
            [1, 3],
        ),
        ({"version": 2, "upgrade": [add_country]}, "upgrade", [add_country]),
    ],
)
def test_bad_versions_are_refused_naming_the_field(fields, field, value):
    with pytest.raises(JobDeclarationInvalid) as info:
        deploy(ship_v3, **fields)
    assert (info.value.field, info.value.value) == (field, value)
    assert NAME not in registry


def test_the_version_key_is_reserved():
    def takes_any(run: Any, key: str, **rest: Any) -> None: ...

    handle = job(
        name="versioned.any", idempotency_key=_key, tenant=NO_TENANT, version=2
    )(takes_any)
    with pytest.raises(InvalidJobPayload) as info:
        handle.enqueue(key="f", __version__=9)
    assert info.value.code == "X_INVALID_PAYLOAD"
    assert info.value.field == "__version__"
    assert not Job.objects.filter(name="versioned.any").exists()
    assert issubclass(InputUpgradeFailed, InvalidJobPayload)
