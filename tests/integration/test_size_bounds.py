"""Size bounds at the command line (B4, issue 31 item 1): every count flag of every
management command has an upper bound, refused with a coded error naming the flag and
the value before anything starts (no child process, no thread, no statement); a cron
with a Unicode digit is a coded InvalidCron; ``jobs_sql`` answers a coded line instead
of a traceback."""

from __future__ import annotations

import io

import psutil
import pytest
from django.core.management import CommandError, call_command

from ultimate_jobs.ground.exceptions import InvalidArgument, InvalidCron
from ultimate_jobs.limits.budgets import Limits, parse_queue_budgets, parse_rate
from ultimate_jobs.management.sizes import (
    MAX_PROCESSES,
    PROCESSES_PER_CPU,
    check_processes,
    process_ceiling,
)
from ultimate_jobs.scheduling.cron import parse_cron

pytestmark = pytest.mark.django_db


def refused(command: str, *args: str) -> str:
    before = psutil.Process().children(recursive=True)
    with pytest.raises(CommandError) as caught:
        call_command(command, *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert psutil.Process().children(recursive=True) == before  # nothing started
    return str(caught.value)


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        (
            "jobs_worker",
            ("--processes", "1000"),
            "X_INVALID_ARGUMENT: --processes=1000: at most",
        ),
        (
            "jobs_worker",
            ("--processes", "1000", "--force"),
            f"X_INVALID_ARGUMENT: --processes=1000: a whole number from 1 to {MAX_PROCESSES}",
        ),
        (
            "jobs_worker",
            ("--processes", "0"),
            "X_INVALID_ARGUMENT: --processes=0: a whole number from 1 to",
        ),
        (
            "jobs_worker",
            ("--concurrency", "100000"),
            "X_INVALID_ARGUMENT: --concurrency=100000: a whole number from 1 to 256",
        ),
        (
            "jobs_worker",
            ("--concurrency", "0"),
            "X_INVALID_ARGUMENT: --concurrency=0: a whole number from 1 to 256",
        ),
        (
            "jobs_worker",
            ("--prefetch", "-1"),
            "X_INVALID_ARGUMENT: --prefetch=-1: a whole number from 0 to 256",
        ),
        (
            "jobs_worker",
            ("--prefetch", "100000"),
            "X_INVALID_ARGUMENT: --prefetch=100000: a whole number from 0 to 256",
        ),
        (
            "jobs_worker",
            ("--max-jobs", "-1"),
            "X_INVALID_ARGUMENT: --max-jobs=-1: a whole number from 1 to",
        ),
        (
            "jobs_worker",
            ("--per-tenant", "10000000"),
            "X_INVALID_ARGUMENT: --per-tenant=10000000: a whole number from 1 to 100000",
        ),
        (
            "jobs_worker",
            ("--global-limit", "10000000"),
            "X_INVALID_ARGUMENT: --global-limit=10000000: a whole number from 1 to",
        ),
        (
            "jobs_worker",
            ("--per-queue", "default=10000000"),
            "X_INVALID_ARGUMENT: --per-queue.default=10000000: a whole number from 1",
        ),
        (
            "jobs_worker",
            ("--roles", "worker,nope"),
            "X_INVALID_ARGUMENT: --roles='worker,nope': unknown role 'nope'",
        ),
        (
            "jobs_relay",
            ("--batch-size", "100000000"),
            "X_INVALID_ARGUMENT: --batch-size=100000000: a whole number from 1 to 10000",
        ),
        (
            "jobs_relay",
            ("--batch-size", "0"),
            "X_INVALID_ARGUMENT: --batch-size=0: a whole number from 1 to 10000",
        ),
        (
            "jobs_relay",
            ("--relay-id", "a\udcffb"),
            "X_INVALID_ARGUMENT: --relay-id='a\\udcffb': holds a lone surrogate",
        ),
        (
            "jobs_worker",
            ("--worker-id", "a\udcffb"),
            "X_INVALID_ARGUMENT: --worker-id='a\\udcffb': holds a lone surrogate",
        ),
        (
            "jobs",
            ("list", "--limit", "100000"),
            "X_JOB_PAGE_INVALID: limit=100000",
        ),
    ],
)
def test_a_count_out_of_bounds_is_refused_before_anything_starts(
    command, args, expected
):
    assert refused(command, *args).startswith(expected)


def test_processes_ceiling_follows_the_cpu_count_and_force_lifts_it():
    assert process_ceiling(force=False, cpus=2) == 2 * PROCESSES_PER_CPU
    assert check_processes(8, force=False, cpus=2) == 8
    with pytest.raises(
        InvalidArgument, match=r"--processes=9: at most 8 .*--force allows up to 256"
    ):
        check_processes(9, force=False, cpus=2)
    assert check_processes(9, force=True, cpus=2) == 9
    with pytest.raises(InvalidArgument, match=r"--processes=257"):
        check_processes(MAX_PROCESSES + 1, force=True, cpus=2)


ONE, THREE, FIVE, TWO = "\u0661", "\u0663", "\u0665", "\u0662"  # Arabic-Indic


@pytest.mark.parametrize("text", [ONE, f"{THREE}/s", f"1{ONE}"])
def test_budgets_refuse_unicode_digits(text):
    with pytest.raises(InvalidArgument, match="--rate-per-tenant"):
        parse_rate(text, field_name="--rate-per-tenant")
    with pytest.raises(InvalidArgument, match="--per-queue"):
        parse_queue_budgets(f"default={text}", field_name="--per-queue")


def test_limits_have_upper_bounds():
    with pytest.raises(InvalidArgument, match="per_tenant=100001"):
        Limits(per_tenant=100_001)


@pytest.mark.parametrize(
    "cron",
    [f"{ONE} * * * *", f"* {TWO} * * *", f"*/{FIVE} * * * *", f"1-{THREE} * * * *"],
)
def test_a_cron_with_a_unicode_digit_is_a_coded_error(cron):
    with pytest.raises(InvalidCron) as caught:
        parse_cron(cron)
    assert caught.value.code == "X_INVALID_CRON"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--show", "no\x00such"), "X_INVALID_ARGUMENT: NAME="),
        (("--render", "job_enqueue", "-p", "nope=1"), "X_INVALID_ARGUMENT: -p="),
        (
            ("--render", "job_enqueue", "-p", "queue=a\x00b"),
            "X_INVALID_ARGUMENT: -p queue=",
        ),
        (
            ("--render", "job_enqueue", "-p", 'queue="a\\u0000b"'),
            "X_INVALID_ARGUMENT: -p queue=",
        ),
        (
            ("--render", "job_enqueue", "-p", "queue=" + "[" * 100 + "]" * 100),
            "X_INVALID_ARGUMENT: -p queue",
        ),
        (
            ("--explain", "job_enqueue", "-p", "priority=abc"),
            "X_QUERY: query 'job_enqueue' failed",
        ),
    ],
)
def test_jobs_sql_answers_coded_lines_not_tracebacks(args, expected):
    assert refused("jobs_sql", *args).startswith(expected)
