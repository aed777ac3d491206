"""Backfills (F1): ``backfill(...)`` declares a job that sweeps every row a QuerySet
matches, once, in keyset batches, recorded in the backfill ledger.

A backfill is a job, not a new primitive: it has the queue, the retries, the
cancellation and the dead-letter path a job has. One pass is one run of it:

1. it checks where it may run: ``environments`` against the ``ENVIRONMENT`` setting
   (``BackfillExcluded``, terminal) and ``requires`` against Django's migration
   recorder on the source's database (``BackfillMigrationPending``, retryable: a pass
   queued before ``migrate`` ran waits for it);
2. it reads where its name stands in the ledger: its own row (an earlier attempt's, or
   the pending row ``db_backfill --write`` wrote) is adopted; otherwise a completed
   newest pass makes this run a no-op unless the input says ``force=True``, which
   starts a new row. Only a completed row blocks: a failed one is a pass to run again;
3. it reads the source in keyset pages on the primary key (never OFFSET), each page in
   its own step ``batch:0``, ``batch:1``, …, which hands the rows to
   ``handle(rows, cancel_token)`` and checkpoints the cursor and the count of rows,
   never the rows (a step's output is kept for the whole run). A resumed attempt
   replays the completed batches from storage, without reading or handling them;
4. it is throttled to ``rate`` batches a second, the pause spent INSIDE the step after
   ``handle`` (so a replayed batch re-pays no pause) and cut short by the run's
   cancellation;
5. when the source runs dry, ``count()`` (if declared) must answer 0: a source that ran
   out while ``count()`` still matches rows is ``BackfillStalled`` (terminal).

The idempotency key is the name: one live pass per backfill, so a second enqueue while
one runs answers the first. ``handle`` runs AT LEAST once per page: an attempt that
dies after ``handle`` and before the checkpoint hands the same page again, so it writes
idempotently (set a value, upsert), never ``count + 1``.

The definition checksum hashes what the declaration sweeps: the source text of
``source``, ``handle`` and ``count``, ``requires`` and ``environments`` (not ``batch``
or ``rate``: pacing is tuning). A completed pass stays completed when it moves: the
checksum is reported (``jobs.backfill.checksum_changed``, the dry run, the ledger),
never acted on, because source text moves without behaviour changing. To sweep again
after a change that matters, run it with ``force``.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import re
from collections.abc import Callable, Iterable
from functools import partial
from time import monotonic
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from ultimate_jobs.backfills.ledger import PassLedger
from ultimate_jobs.conf import get_settings
from ultimate_jobs.declaration.definition import NO_TENANT, NoTenant
from ultimate_jobs.declaration.queues import DEFAULT_QUEUE
from ultimate_jobs.declaration.registry import registry
from ultimate_jobs.declaration.retry import Retry
from ultimate_jobs.declaration.run import DRAINING, CancelToken, Run
from ultimate_jobs.enqueue.factory import declare
from ultimate_jobs.enqueue.handle import JobHandle
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.context import crossing_scope
from ultimate_jobs.ground.durations import Duration
from ultimate_jobs.ground.exceptions import (
    BackfillExcluded,
    BackfillInvalid,
    BackfillMigrationPending,
    BackfillStalled,
    JobDeclarationInvalid,
    UnknownBackfill,
)
from ultimate_jobs.ground.keyset import Cursor, check_source, cursor_of, read_page

logger = logging.getLogger(__name__)

DEFAULT_BATCH = 1000
DEFAULT_RATE = 5.0  # batches per second
STEP_PREFIX = "batch:"
_MIGRATION = re.compile(r"^[A-Za-z_]\w*\.\w+$")

Source = Callable[[], QuerySet[Any]]
Handle = Callable[[list[Any], CancelToken], Any]
Count = Callable[[], int]


def wait_between_batches(token: CancelToken, seconds: float) -> None:
    """The throttle's pause, inside the batch's step; ends early on cancellation."""
    token.wait(seconds)


def _code_text(fn: Callable[..., Any]) -> str:
    """What the checksum reads of a function: its source text, or its dotted name
    where there is none (a builtin, a partial): never an address, which would move
    between processes."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        qualname = getattr(fn, "__qualname__", type(fn).__qualname__)
        return f"{getattr(fn, '__module__', '')}.{qualname}"


def definition_checksum(
    name: str,
    source: Source,
    handle: Handle,
    count: Count | None,
    requires: str | None,
    environments: tuple[str, ...] | None,
) -> str:
    """sha256 over what the declaration sweeps (not batch or rate: pacing is tuning)."""
    parts = [
        name,
        _code_text(source),
        _code_text(handle),
        _code_text(count) if count is not None else "",
        requires or "",
        ",".join(environments or ()),
    ]
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


class Backfill:
    """A declared backfill: what it sweeps, where it may run, and its job's body."""

    def __init__(
        self,
        name: str,
        *,
        source: Source,
        handle: Handle,
        count: Count | None,
        batch: int,
        rate: float,
        requires: str | None,
        environments: tuple[str, ...] | None,
    ) -> None:
        self.name = name
        self.source = source
        self.handle = handle
        self.count = count
        self.batch = batch
        self.rate = rate
        self.requires = requires
        self.environments = environments
        self.checksum = definition_checksum(
            name, source, handle, count, requires, environments
        )
        self.job: JobHandle | None = None  # set once the job is declared

    @property
    def interval(self) -> float:
        """Seconds from the start of one batch to the start of the next, at least."""
        return 1.0 / self.rate

    def describe(self) -> dict[str, Any]:
        """The declaration as ``registered_backfills()`` and ``--json`` show it."""
        return {
            "name": self.name,
            "checksum": self.checksum,
            "batch": self.batch,
            "rate": self.rate,
            "requires": self.requires,
            "environments": list(self.environments) if self.environments else None,
            "counts": self.count is not None,
            "queue": self.job.definition.queue if self.job else DEFAULT_QUEUE,
        }

    # -- the gates, asked by the pass and, before it queues anything, the command --

    def check_environment(self, environment: str | None = None) -> None:
        """Refuse an ENVIRONMENT the backfill does not declare (BackfillExcluded)."""
        environment = environment or get_settings().ENVIRONMENT
        if self.environments is not None and environment not in self.environments:
            raise BackfillExcluded(self.name, environment, self.environments)

    def read_source(self) -> QuerySet[Any]:
        """Call ``source()`` (once per attempt) and check it can be paged."""
        return check_source(
            self.source(), invalid=BackfillInvalid, job=self.name, what="a backfill"
        )

    def check_requires(self, database: str) -> None:
        """Refuse a pass whose required migration is not applied on ``database``."""
        if self.requires is None:
            return
        from django.db.migrations.recorder import MigrationRecorder

        app_label, migration = self.requires.split(".", 1)
        applied = MigrationRecorder(connections[database]).applied_migrations()
        if (app_label, migration) not in applied:
            raise BackfillMigrationPending(self.name, self.requires, database)

    def remaining(self) -> int | None:
        """What ``count()`` answers (None when none is declared), checked."""
        if self.count is None:
            return None
        answer = self.count()
        validate.whole(
            answer,
            field="count()",
            least=0,
            error=partial(BackfillInvalid, job=self.name),
            reason="answers how many rows are still to sweep: a whole number, 0 or more",
        )
        return answer

    # -- the pass ----------------------------------------------------------------------

    def __call__(self, run: Run, input: dict[str, Any]) -> dict[str, Any]:
        if run.tenant_id is not None:
            return self._pass(run, input)
        # B7: a NO_TENANT pass sweeps every tenant's rows on purpose: it runs under a
        # declared cross-tenant scope (logged like cross_tenant when it sweeps)
        # instead of being refused by the tenant guard.
        with crossing_scope(self.crossing):
            return self._pass(run, input)

    @property
    def crossing(self) -> str:
        """The reason a NO_TENANT pass declares for reading across tenants."""
        return f"backfill {self.name}: a NO_TENANT pass over every tenant's rows"

    def _pass(self, run: Run, input: dict[str, Any]) -> dict[str, Any]:
        forced = bool(input.get("force", False))
        self.check_environment()
        source = self.read_source()
        self.check_requires(source.db)
        journal = run.journal_if_any()
        journal_now = journal.now if journal is not None else lambda: None
        ledger = PassLedger(name=self.name, job_id=run.job_id, now=journal_now)
        standing = ledger.standing()
        if standing.completed and not forced and standing.newest is not None:
            return self._skip(run, standing.newest)
        if run.tenant_id is None:  # declared with the backfill: info, not a warning
            logger.info(
                "jobs.tenant.cross",
                extra={
                    "job_name": run.name,
                    "tenant_id": None,
                    "reason": self.crossing,
                },
            )
        ledger.start(checksum=self.checksum, forced=forced)
        try:
            batches, state = self._sweep(run, source, ledger)
            remaining = self.remaining()
            if remaining:
                raise BackfillStalled(self.name, remaining, state["rows"])
        except Exception as exc:
            if run.cancel_token.reason != DRAINING:  # a drained pass resumes: running
                ledger.fail(f"{type(exc).__name__}: {exc}")
            raise
        ledger.complete()
        return {
            "name": self.name,
            "pass": ledger.id,
            "batches": batches,
            "rows": state["rows"],
            "skipped": False,
        }

    def _skip(self, run: Run, newest: dict[str, Any]) -> dict[str, Any]:
        """A completed pass makes this run a no-op; a moved checksum is only told."""
        fields = {
            "job_id": str(run.job_id),
            "backfill": self.name,
            "pass": newest["id"],
        }
        if newest["checksum"] != self.checksum:
            logger.warning(
                "jobs.backfill.checksum_changed",
                extra={
                    **fields,
                    "completed_checksum": newest["checksum"],
                    "checksum": self.checksum,
                },
            )
        logger.info("jobs.backfill.skipped", extra=fields)
        return {
            "name": self.name,
            "pass": None,
            "previous_pass": newest["id"],
            "batches": 0,
            "rows": 0,
            "skipped": True,
        }

    def _sweep(
        self, run: Run, source: QuerySet[Any], ledger: PassLedger
    ) -> tuple[int, dict[str, Any]]:
        state: dict[str, Any] = {"cursor": None, "rows": 0, "more": True}
        index = 0
        while state["more"]:
            state = run.step(
                f"{STEP_PREFIX}{index}", self._batch(source, index, state, ledger)
            )
            index += 1
        return index, state

    def _batch(
        self,
        source: QuerySet[Any],
        index: int,
        before: dict[str, Any],
        ledger: PassLedger,
    ) -> Callable[[CancelToken], dict[str, Any]]:
        def batch(token: CancelToken) -> dict[str, Any]:
            started = monotonic()
            cursor: Cursor = before["cursor"]
            rows, more = read_page(
                source, cursor, self.batch, invalid=BackfillInvalid, job=self.name
            )
            if rows:
                self.handle(rows, token)
                cursor = cursor_of(rows[-1], invalid=BackfillInvalid, job=self.name)
            after = {"cursor": cursor, "rows": before["rows"] + len(rows), "more": more}
            ledger.progress(rows=after["rows"], batches=index + 1, cursor=cursor)
            if more:
                pause = self.interval - (monotonic() - started)
                if pause > 0:
                    wait_between_batches(token, pause)
            return after

        return batch


_declared: dict[str, Backfill] = {}


def _check_rate(rate: object, name: str) -> float:
    return validate.positive(
        rate,
        field="rate",
        error=partial(JobDeclarationInvalid, job=name),
        reason="batches per second: a finite number above 0 (0.5 is one batch every "
        "two seconds; there is no unthrottled mode, raise the number to go faster)",
    )


def _check_requires(requires: object, name: str) -> str | None:
    if requires is None:
        return None
    if not isinstance(requires, str) or not _MIGRATION.match(requires):
        raise JobDeclarationInvalid(
            "requires",
            requires,
            "a migration as 'app_label.migration_name', e.g. 'orders.0012_add_slug'",
            job=name,
        )
    return requires


def _check_environments(environments: object, name: str) -> tuple[str, ...] | None:
    if environments is None:
        return None
    if isinstance(environments, str | bytes) or not isinstance(environments, Iterable):
        raise JobDeclarationInvalid(
            "environments",
            environments,
            "a list of ENVIRONMENT names, e.g. ['staging', 'production']",
            job=name,
        )
    names = list(environments)
    if not names or any(not isinstance(e, str) or not e.strip() for e in names):
        raise JobDeclarationInvalid(
            "environments",
            environments,
            "a non-empty list of non-empty names (omit it to run everywhere)",
            job=name,
        )
    return tuple(dict.fromkeys(names))


def backfill(
    name: str,
    source: Source,
    handle: Handle,
    batch: int = DEFAULT_BATCH,
    rate: float = DEFAULT_RATE,
    tenant: Callable[[dict[str, Any]], Any] | NoTenant = NO_TENANT,
    requires: str | None = None,
    environments: Iterable[str] | None = None,
    count: Count | None = None,
    queue: str = DEFAULT_QUEUE,
    *,
    priority: int = 0,
    description: str = "",
    retry: Retry | None = None,
    timeout: Duration | None = None,
    step_timeout: Duration | None = None,
) -> JobHandle:
    """Declare a backfill: one pass over every row ``source()`` matches (F1).

    ::

        fill_slugs = backfill(
            "blog.fill_slugs",
            source=lambda: Post.objects.filter(slug=""),
            handle=lambda posts, token: Post.objects.bulk_update(
                [p.with_slug() for p in posts], ["slug"]
            ),
            count=lambda: Post.objects.filter(slug="").count(),
            requires="blog.0012_post_slug",
        )
        fill_slugs.enqueue()              # or: manage.py db_backfill blog.fill_slugs --write

    ``source`` answers a QuerySet, called at every attempt (never at import);
    ``handle(rows, cancel_token)`` gets one batch of model instances. Answers the
    job's handle; its input is ``force`` (default False).
    """
    if not isinstance(name, str) or not name:
        raise JobDeclarationInvalid(
            "name", name, "backfill needs a name: the job's durable queue key"
        )
    for field, value in (("source", source), ("handle", handle)):
        if not callable(value):
            raise JobDeclarationInvalid(
                field,
                value,
                "a function of nothing answering a QuerySet, called at every attempt"
                if field == "source"
                else "a function of (rows, cancel_token)",
                job=name,
            )
    if count is not None and not callable(count):
        raise JobDeclarationInvalid(
            "count", count, "a function answering the rows still to sweep", job=name
        )
    if tenant is not NO_TENANT and not callable(tenant):
        raise JobDeclarationInvalid(
            "tenant", tenant, "a function of the input, or NO_TENANT", job=name
        )
    refuse = partial(JobDeclarationInvalid, job=name)
    body = Backfill(
        name,
        source=source,
        handle=handle,
        count=count,
        batch=validate.whole(batch, field="batch", error=refuse),
        rate=_check_rate(rate, name),
        requires=_check_requires(requires, name),
        environments=_check_environments(environments, name),
    )
    body.job = declare(
        "backfill",
        name,
        {"force": bool},
        body,
        defaults={"force": False},
        idempotency_key=lambda _: name,
        tenant=tenant,
        queue=queue,
        priority=priority,
        description=description or f"Sweeps the rows of {name} in batches (backfill).",
        retry=retry,
        timeout=timeout,
        step_timeout=step_timeout,
    )
    known = _declared.get(name)
    if known is None or known.job is not body.job:  # the same declaration seen twice
        _declared[name] = body  # keeps the body its registered job runs
    return body.job


def registered_backfills() -> list[Backfill]:
    """Every backfill declared in this process whose job is still registered, by name."""
    found = []
    for name, body in sorted(_declared.items()):
        if (
            body.job is not None
            and name in registry
            and registry.get(name).definition.func is body.job.definition.func
        ):
            found.append(body)
    return found


def get_backfill(name: object) -> Backfill:
    """The backfill declared under ``name``, or ``UnknownBackfill``."""
    for body in registered_backfills():
        if body.name == name:
            return body
    raise UnknownBackfill(name, [b.name for b in registered_backfills()])
