"""A job whose input changes shape between two deploys (P11): the test process and
workers started without UJ_TEST_NEXT_DEPLOY declare version 1 (one ``address``); a
worker of the next deploy declares version 2 (``street`` and ``city``) with the
upgrade from 1."""

from __future__ import annotations

import os
from typing import Any

from ultimate_jobs import NO_TENANT, Run, job

from .jobs import by_key, record


def split_address(old: dict[str, Any]) -> dict[str, Any]:
    street, city = old.pop("address").split(", ")
    return {**old, "street": street, "city": city}


if os.environ.get("UJ_TEST_NEXT_DEPLOY") == "1":

    @job(
        name="testapp.parcel",
        idempotency_key=by_key,
        tenant=NO_TENANT,
        version=2,
        upgrade={1: split_address},
    )
    def parcel_v2(run: Run, key: str, street: str, city: str) -> None:
        record(run, key, f"shipped-v2 {street}|{city}")

else:

    @job(name="testapp.parcel", idempotency_key=by_key, tenant=NO_TENANT)
    def parcel_v1(run: Run, key: str, address: str) -> None:
        record(run, key, f"shipped-v1 {address}")
