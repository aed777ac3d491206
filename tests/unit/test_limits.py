"""Lease keys, per-process budgets and their options (L1-L3), without a database."""

from __future__ import annotations

import argparse

import pytest

from tests.testapp.jobs import capped, exclusive, noop, per_account
from ultimate_jobs import Concurrency, InvalidArgument, Registry
from ultimate_jobs.limits.budgets import (
    Budget,
    Limits,
    add_limit_arguments,
    fleet_caps,
    limits_from_options,
    parse_queue_budgets,
    parse_rate,
)
from ultimate_jobs.limits.slots import job_lease_key, keyed_lease_key


def row(queue="default", tenant=None):
    return {"queue": queue, "tenant_id": tenant}


def test_lease_keys_keep_a_job_cap_apart_from_every_keyed_cap():
    assert job_lease_key("billing.sync") == "job:billing.sync"
    assert keyed_lease_key("billing.sync", "acct-1") == "job-key:billing.sync:acct-1"
    # The name is encoded: a name with ':' cannot end where another's key begins.
    assert keyed_lease_key("a:b", "c") != keyed_lease_key("a", "b:c")
    assert keyed_lease_key("a:b", "c") == "job-key:a%3Ab:c"


def test_fleet_caps_list_every_declared_cap_with_its_mode():
    jobs = Registry()
    for handle in (capped, per_account, exclusive, noop):
        jobs.register(handle)
    caps = fleet_caps(jobs)
    found = zip(caps["cap_names"], caps["cap_limits"], caps["cap_modes"], strict=True)
    assert {name: (limit, mode) for name, limit, mode in found} == {
        capped.name: (2, "job"),
        per_account.name: (1, "wait"),
        exclusive.name: (1, "fail"),
    }


@pytest.mark.parametrize(
    ("value", "per_second"),
    [
        (5, 5.0),
        (2.5, 2.5),
        ("10", 10.0),
        ("10/s", 10.0),
        ("600/m", 10.0),
        ("36/h", 0.01),
    ],
)
def test_rates_read_per_second_minute_or_hour(value, per_second):
    assert parse_rate(value) == pytest.approx(per_second)


@pytest.mark.parametrize("value", [0, -1, "0/s", "fast", "10/d", True, None, "nan"])
def test_bad_rates_are_refused_naming_the_field(value):
    with pytest.raises(InvalidArgument) as caught:
        parse_rate(value, field_name="--rate-per-tenant")
    assert caught.value.field == "--rate-per-tenant"


def test_queue_budgets_parse_and_refuse_bad_pairs():
    assert parse_queue_budgets("mail=4, reports=1") == {"mail": 4, "reports": 1}
    for bad in ("mail", "mail=0", "mail=x", "Bad Queue=1", "mail=-1"):
        with pytest.raises(InvalidArgument):
            parse_queue_budgets(bad)


def test_limits_check_their_values():
    assert not Limits().bounded
    assert Limits(per_tenant=2).bounded
    for kwargs in ({"per_tenant": 0}, {"total": -1}, {"per_queue": {"mail": 0}}):
        with pytest.raises(InvalidArgument):
            Limits(**kwargs)
    assert Limits(rate_per_tenant=parse_rate("120/m")).rate_per_tenant == 2.0


def test_worker_options_become_limits_and_bad_ones_name_the_option():
    parser = argparse.ArgumentParser()
    add_limit_arguments(parser)
    options = vars(
        parser.parse_args(
            [
                "--per-queue",
                "mail=2",
                "--per-tenant",
                "3",
                "--global-limit",
                "6",
                "--rate-per-tenant",
                "5/s",
            ]
        )
    )
    assert limits_from_options(options) == Limits(
        per_queue={"mail": 2}, per_tenant=3, total=6, rate_per_tenant=5.0
    )
    assert limits_from_options(vars(parser.parse_args([]))) == Limits()
    with pytest.raises(InvalidArgument) as caught:
        limits_from_options(vars(parser.parse_args(["--per-tenant", "0"])))
    assert caught.value.field == "--per-tenant"


def test_free_slots_are_bounded_by_threads_then_the_global_limit():
    held = [row(), row()]
    assert Budget().free(8, held) == 6
    assert Budget(Limits(total=3)).free(8, held) == 1
    assert Budget(Limits(total=16)).free(8, held) == 6


def test_room_per_queue_and_per_tenant_counts_what_the_process_holds():
    budget = Budget(Limits(per_queue={"mail": 2}, per_tenant=2))
    held = [row("mail", "a"), row("mail", "a"), row("default", "b")]
    params = budget.claim_parameters(["default", "mail"], held)
    assert params["queue_rooms"] == [None, 0]
    assert dict(zip(params["tenant_ids"], params["tenant_rooms"], strict=True)) == {
        "a": 0,
        "b": 1,
    }
    assert params["tenant_room"] == 2  # any tenant it holds nothing of
    assert Budget().claim_parameters(["default"], held) == {
        "queue_rooms": [None],
        "tenant_ids": [],
        "tenant_rooms": [],
        "tenant_room": None,
    }


def test_the_tenant_rate_is_a_token_bucket_of_one_second():
    now = [100.0]
    budget = Budget(Limits(rate_per_tenant=2), clock=lambda: now[0])
    assert budget.claim_parameters(["default"], [])["tenant_room"] == 2
    budget.started([row(tenant="a"), row(tenant="a"), row(tenant=None)])
    params = budget.claim_parameters(["default"], [])
    assert (params["tenant_ids"], params["tenant_rooms"]) == (["a"], [0])
    assert budget.retry_in() == pytest.approx(0.5)
    now[0] += 0.5
    assert budget.claim_parameters(["default"], [])["tenant_rooms"] == [1]
    now[0] += 0.5
    budget.started([])  # a full bucket is forgotten: the same as never seen
    assert budget.claim_parameters(["default"], [])["tenant_ids"] == []
    assert budget.retry_in() is None


def test_a_slow_rate_still_allows_one_start():
    now = [0.0]
    budget = Budget(Limits(rate_per_tenant=0.5), clock=lambda: now[0])
    assert budget.claim_parameters(["default"], [])["tenant_room"] == 1
    budget.started([row(tenant="a")])
    assert budget.retry_in() == pytest.approx(2.0)


def test_concurrency_declarations_are_checked_where_they_are_written():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgument):
            Concurrency(key=lambda p: "k", limit=bad)  # type: ignore[arg-type]
