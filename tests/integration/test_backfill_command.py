"""``manage.py db_backfill`` (F2): a dry run unless --write, --write enqueues and never
runs inline, --all isolates per name, --pending and --wait exit non-zero, --list reads
the ledger; exact output and exit codes."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.testapp.models import Record
from ultimate_jobs import Retry, Terminal, backfill
from ultimate_jobs.backfills import runs as backfill_runs
from ultimate_jobs.models import BackfillLedger, Job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_registry")]

PROCESS_BACKFILL = "testapp.records_backfill"  # excluded here (ENVIRONMENT=production)


def declare(tag: str, handled: list[int] | None = None, **options):
    def handle(rows, token):
        if handled is not None:
            handled.extend(r.pk for r in rows)

    options.setdefault("retry", Retry(attempts=2, delay="1s", jitter=False))
    return backfill(
        f"tests.cmd.{tag}.{uuid.uuid4().hex[:6]}",
        options.pop("source", lambda: Record.objects.filter(key=tag)),
        options.pop("handle", handle),
        batch=options.pop("batch", 2),
        rate=options.pop("rate", 10_000),
        **options,
    )


def run(*args: str) -> tuple[str, int]:
    """Call the command; answer its output and its exit status."""
    out = io.StringIO()
    try:
        call_command("db_backfill", *args, stdout=out)
    except SystemExit as exc:
        return out.getvalue(), int(exc.code or 0)
    return out.getvalue(), 0


def records(tag: str, n: int) -> None:
    for i in range(n):
        Record.objects.create(key=tag, event="todo", attempt=i)


def only(prefix: str) -> None:
    """Hide every declared backfill but this test's (and the process tests' one)."""
    from ultimate_jobs import registry

    for name in registry.names():
        if name.startswith("tests.cmd.") and not name.startswith(prefix):
            registry.unregister(name)


def test_a_dry_run_shows_count_and_writes_nothing():
    records("dry", 5)
    sweep = declare("dry", count=lambda: Record.objects.filter(key="dry").count())
    out, status = run(sweep.name)
    assert status == 0
    assert out == (
        f"{sweep.name}: pending: enqueue: would enqueue a new pass\n"
        "  count() = 5 rows: at least 3 batch(es), 0.0s at the declared rate\n"
        "  dry run: nothing was written (--write enqueues)\n"
    )
    assert not Job.objects.filter(name=sweep.name).exists()
    assert not BackfillLedger.objects.exists()
    out, status = run(sweep.name, "--json")
    [plan] = json.loads(out)
    assert plan == {
        "name": sweep.name,
        "state": "pending",
        "action": "enqueue",
        "reason": "would enqueue a new pass",
        "count": 5,
        "batches": 3,
        "seconds": 0.0,
        "error": None,
    }


def test_a_dry_run_of_a_refused_pass_says_why_and_exits_0():
    sweep = declare("gate", requires="testapp.0099_not_yet")
    out, status = run(sweep.name, "--json")
    [plan] = json.loads(out)
    assert status == 0
    assert plan["action"] == "refuse"
    assert plan["error"]["code"] == "X_BACKFILL_MIGRATION_PENDING"
    assert plan["count"] is None


def test_write_enqueues_and_never_runs_inline(jobs):
    records("write", 3)
    handled: list[int] = []
    sweep = declare("write", handled)
    out, status = run(sweep.name, "--write")
    job = Job.objects.get(name=sweep.name)
    assert (status, out) == (0, f"{sweep.name}: enqueued: job {job.pk}\n")
    assert (job.state, job.input) == ("ready", {"force": False})
    assert handled == []  # the queue is the only execution surface
    [row] = BackfillLedger.objects.filter(name=sweep.name)
    assert (row.status, row.job_id, row.forced) == ("pending", job.pk, False)

    out, _ = run(sweep.name, "--write")
    assert out == f"{sweep.name}: joined the live pass: job {job.pk}\n"
    assert Job.objects.filter(name=sweep.name).count() == 1

    jobs.run()
    assert len(handled) == 3
    [row] = BackfillLedger.objects.filter(name=sweep.name)  # the pending row, adopted
    assert (row.status, row.rows) == ("done", 3)

    out, status = run(sweep.name, "--write")
    assert (status, out) == (
        0,
        f"{sweep.name}: skipped: completed in pass #{row.pk}; --force sweeps again\n",
    )
    assert Job.objects.filter(name=sweep.name).count() == 1

    out, status = run(sweep.name, "--write", "--force", "--json")
    [started] = json.loads(out)
    assert (status, started["deduped"], started["reason"]) == (
        0,
        False,
        "would enqueue a new pass (forced)",
    )
    forced = Job.objects.get(pk=started["job_id"])
    assert forced.input == {"force": True}
    jobs.run()
    assert len(handled) == 6
    assert list(
        BackfillLedger.objects.filter(name=sweep.name)
        .order_by("id")
        .values_list("status", "forced")
    ) == [("done", False), ("done", True)]


def test_write_refuses_a_pass_its_gates_refuse_and_enqueues_nothing(settings):
    missing = declare("gates", requires="testapp.0099_not_yet")
    elsewhere = declare("gates", environments=["staging"])
    for sweep, code in (
        (missing, "X_BACKFILL_MIGRATION_PENDING"),
        (elsewhere, "X_BACKFILL_ENVIRONMENT"),
    ):
        with pytest.raises(CommandError, match=code):
            run(sweep.name, "--write")
        assert not Job.objects.filter(name=sweep.name).exists()
    settings.ULTIMATE_JOBS = {"ENVIRONMENT": "staging"}
    assert run(elsewhere.name, "--write")[1] == 0


def test_an_unknown_name_is_a_clear_error():
    sweep = declare("known")
    with pytest.raises(CommandError) as info:
        run("tests.cmd.nope")
    assert "X_BACKFILL_UNKNOWN" in str(info.value)
    assert "name='tests.cmd.nope'" in str(info.value)
    assert sweep.name in str(info.value)
    with pytest.raises(CommandError, match="X_BACKFILL_UNKNOWN"):
        run("tests.cmd.nope", "--write")


def test_bad_flag_combinations_are_refused():
    sweep = declare("flags")
    with pytest.raises(CommandError, match="--wait waits for what --write enqueues"):
        run(sweep.name, "--wait")
    with pytest.raises(CommandError, match="not both"):
        run(sweep.name, "--all")
    with pytest.raises(CommandError, match="invalid choice: 'finished'"):
        run("--list", "--status", "finished")
    with pytest.raises(CommandError, match="--limit='0'"):
        run("--list", "--limit", "0")


def test_pending_exits_1_while_anything_declared_is_pending_or_failed(jobs):
    records("pend", 1)
    ok = declare("pend")
    broken = declare("pend", handle=lambda rows, token: 1 / 0)
    only("tests.cmd.pend.")
    out, status = run("--pending")
    assert status == 1
    assert out.splitlines() == sorted(
        [
            f"pending   {ok.name}",
            f"pending   {broken.name}",
            f"excluded  {PROCESS_BACKFILL}",
        ],
        key=lambda line: line.split()[1],
    )
    run("--all", "--write")
    jobs.run()
    jobs.travel(seconds=5)
    jobs.run()  # the broken one's second and last attempt
    assert Job.objects.get(name=broken.name).state == "dead"
    out, status = run("--pending", "--json")
    states = {s["name"]: s["state"] for s in json.loads(out)}
    assert status == 1
    assert states == {
        ok.name: "done",
        broken.name: "failed",
        PROCESS_BACKFILL: "excluded",
    }
    from ultimate_jobs import registry

    registry.unregister(broken.name)
    out, status = run("--pending")
    assert status == 0  # done and excluded are not pending
    assert f"done      {ok.name} (pass #" in out


def test_a_running_pass_is_not_pending():
    sweep = declare("busy")
    only("tests.cmd.busy.")
    run(sweep.name, "--write")
    Job.objects.filter(name=sweep.name).update(state="running")
    BackfillLedger.objects.filter(name=sweep.name).update(status="running")
    out, status = run("--pending")
    assert status == 0
    assert f"running   {sweep.name} (pass #" in out
    out, _ = run(sweep.name)
    assert f"{sweep.name}: running: running: pass #" in out


def test_all_isolates_each_name_and_continues_past_a_refusal():
    records("all", 2)
    good, refused = declare("all"), declare("all", requires="testapp.0099_not_yet")
    only("tests.cmd.all.")
    out, status = run("--all")  # a dry run: every one planned, exit 0
    assert status == 0
    assert out.count("dry run: nothing was written") == 3
    assert not Job.objects.exists()

    out, status = run("--all", "--write")
    assert status == 1  # one could not start
    lines = {line.split(":")[0]: line for line in out.splitlines()}
    job = Job.objects.get(name=good.name)
    assert lines[good.name] == f"{good.name}: enqueued: job {job.pk}"
    assert lines[refused.name].startswith(
        f"{refused.name}: refused: {refused.name}: requires='testapp.0099_not_yet'"
    )
    assert lines[PROCESS_BACKFILL] == (
        f"{PROCESS_BACKFILL}: skipped: {PROCESS_BACKFILL}: "
        "ENVIRONMENT='production': the backfill runs only in acceptance"
    )
    assert not Job.objects.filter(name=refused.name).exists()


def test_list_reads_the_ledger_with_filters(jobs):
    records("list", 3)
    sweep = declare("list")
    run(sweep.name, "--write")
    jobs.run()
    run(sweep.name, "--write", "--force")
    out, status = run("--list", sweep.name)
    assert status == 0
    first, second = BackfillLedger.objects.filter(name=sweep.name).order_by("id")
    assert out.splitlines() == [
        f"#{second.pk} {sweep.name} pending rows=0 batches=0 started=None "
        "completed=None app=-",
        f"#{first.pk} {sweep.name} done rows=3 batches=2 started={first.started_at} "
        f"completed={first.completed_at} app=-",
    ]
    out, _ = run("--list", "--status", "done", "--json")
    [row] = json.loads(out)
    assert row == {
        "id": first.pk,
        "name": sweep.name,
        "checksum": first.checksum,
        "status": "done",
        "app_version": "",
        "job_id": str(first.job_id),
        "job_state": "done",
        "forced": False,
        "rows": 3,
        "batches": 2,
        "last_cursor": max(
            Record.objects.filter(key="list").values_list("pk", flat=True)
        ),
        "created_at": str(first.created_at),
        "started_at": str(first.started_at),
        "completed_at": str(first.completed_at),
        "error": "",
    }
    out, _ = run("--list", "--limit", "1")
    assert out.startswith(f"#{second.pk} ")
    assert len(out.splitlines()) == 1


def test_the_app_version_is_stamped_on_each_pass(jobs, settings):
    settings.ULTIMATE_JOBS = {"APP_VERSION": "2026.11.3"}
    sweep = declare("version")
    run(sweep.name, "--write")
    jobs.run()
    [row] = BackfillLedger.objects.filter(name=sweep.name)
    assert row.app_version == "2026.11.3"


def test_write_wait_follows_the_pass_to_its_end(jobs, monkeypatch):
    """--wait blocks until the pass ends (plain lines off a terminal) and exits 0 when
    it completed; here the test runs the queue between two looks."""
    records("wait", 5)
    sweep = declare("wait", count=lambda: 0)
    monkeypatch.setattr(backfill_runs, "pause_between_polls", lambda s: jobs.run())
    out, status = run(sweep.name, "--write", "--wait")
    job = Job.objects.get(name=sweep.name)
    assert status == 0
    assert out.splitlines() == [
        f"{sweep.name}: enqueued: job {job.pk}",
        f"{sweep.name}: ready (attempt 0/2) 0 rows, 0 batches",
        f"{sweep.name}: done (attempt 1/2) 5 rows, 3 batches",
    ]


def test_write_wait_exits_1_when_the_pass_fails(jobs, monkeypatch):
    records("dies", 2)

    def handle(rows, token):
        raise Terminal("the rows cannot be swept")

    sweep = declare("dies", handle=handle)
    monkeypatch.setattr(backfill_runs, "pause_between_polls", lambda s: jobs.run())
    out, status = run(sweep.name, "--write", "--wait", "--json")
    assert status == 1
    [answer] = json.loads(out)
    assert (answer["name"], answer["final_state"]) == (sweep.name, "dead")
    [row] = BackfillLedger.objects.filter(name=sweep.name)
    assert row.status == "failed"
    assert row.error == "Terminal: the rows cannot be swept"


def test_the_progress_bar_on_a_terminal():
    from ultimate_jobs.backfills.runs import Plan, Progress
    from ultimate_jobs.management.commands.db_backfill import Command

    plan = Plan("x", "pending", "enqueue", "", 100, 4, 0.6)
    seen = Progress("running", False, 1, 5, 40, 2, "")
    assert Command._progress_line(plan, seen, bar=True) == (
        "x: running (attempt 1/5) [############..................] 40/100"
    )
    failed = Progress("delayed", False, 1, 5, 40, 2, "RuntimeError: boom")
    assert Command._progress_line(plan, failed, bar=False) == (
        "x: delayed (attempt 1/5) 40 rows, 2 batches - RuntimeError: boom"
    )


class TerminalOutput(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_write_wait_draws_a_bar_over_one_line_on_a_terminal(jobs, monkeypatch):
    records("bar", 4)
    handled: list[int] = []
    sweep = declare("bar", handled, count=lambda: 4 - len(handled))
    monkeypatch.setattr(backfill_runs, "pause_between_polls", lambda s: jobs.run())
    out = TerminalOutput()
    call_command("db_backfill", sweep.name, "--write", "--wait", stdout=out)
    job = Job.objects.get(name=sweep.name)
    ready = f"{sweep.name}: ready (attempt 0/2) [{'.' * 30}] 0/4"
    done = f"{sweep.name}: done (attempt 1/2) [{'#' * 30}] 4/4"
    assert out.getvalue() == (
        f"{sweep.name}: enqueued: job {job.pk}\n\r{ready}\r{done.ljust(len(ready))}\n"
    )
