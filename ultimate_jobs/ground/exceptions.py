"""
Everything ultimate_jobs raises, and the outcomes a job body raises on purpose.

JobsError                         base class: catch this to catch ours (has .code)
├── ConfigurationError            an ULTIMATE_JOBS setting or variable is invalid
│   └── UnknownSetting            an ULTIMATE_JOBS key names no setting (closest one named)
├── InvalidArgument               a value handed to a public entry point is invalid
│   ├── InvalidDuration           a duration is zero, negative or malformed
│   ├── InvalidQueueName          a queue name breaks ^[a-z0-9][a-z0-9_.-]{0,62}$
│   ├── UnknownQueue              a queue no job, QUEUES nor task declares
│   ├── InstantOutOfRange         an instant before 1970 or more than 100 years ahead
│   ├── JobDeclarationInvalid     a @job declaration (or a value it answers) is invalid
│   │   ├── IdempotencyRequired   @job without idempotency_key
│   │   └── JobTenantRequired     @job without tenant
│   ├── TaskDeclarationInvalid    a @task declaration or a schedule is invalid
│   ├── JobPageInvalid            a job page too large, or a cursor no page answered
│   ├── PurgeTargetInvalid        a purge's targets function answered a bad target
│   │   └── PurgeTargetDuplicate  two targets of one purge share a name
│   └── BackfillInvalid           a backfill's source() or count() answered something unusable
├── InvalidJobPayload             input that does not fit the job's signature
│   ├── InputTooLarge             an input's JSON passes MAX_INPUT_BYTES
│   ├── InputTooDeep              an input nests deeper than MAX_INPUT_DEPTH
│   ├── InputUpgradeFailed        a stored input of an older version could not be upgraded
│   └── InputVersionAhead         a stored input is newer than this code (handed back)
├── ResultTooLarge                a store_result body returned JSON past MAX_RESULT_BYTES
├── JobNameTaken                  two different functions under one job name
├── JobDuplicate                  a live job holds the idempotency key
├── UnknownJob                    no job is registered under a name
├── UnknownTask                   no task or schedule has a name
├── StepDuplicate                 two steps share a name in one attempt
├── JobAborted                    a cancelled attempt tried to write
├── JobTimeout                    an attempt or a step outlived its deadline
│   └── EventTimeout              a wait_for_event outlived its timeout (terminal)
├── OutboxNoTx                    enqueue outside a transaction with OUTBOX="required"
├── InvalidCron                   a cron expression has problems (all listed)
├── InvalidTimezone               a time zone is not in the IANA database
├── JobNotFound                   no job has that id
├── JobNotRequeueable             requeue of a live job
├── JobNotRemovable               remove of a running job
├── JobNotCancellable             cancel of a finished job
├── JobNotPromotable              promote of a job that is not waiting on its run time
├── TaskRunning                   a manual trigger while a run of the task is live
├── TaskNotLoaded                 a task this process has not imported was asked to fire
├── JobKeyBusy                    a keyed concurrency limit refused the run
├── LeaseLost                     this worker no longer holds the job's claim
├── QueryError                    a named SQL statement failed (driver error in __cause__)
├── UnsupportedDatabase           the jobs database is not PostgreSQL
├── AppNotInstalled               "ultimate_jobs" is not in INSTALLED_APPS
├── MigrationsPending             the jobs database lacks this release's migrations
├── JobTenantMismatch             a factory job's input names another tenant than its run
├── ExportInvalid                 an export's source, prefix, storage or cell is unusable
│   ├── ExportUnknownColumn       row() answered a key the export's columns do not carry
│   └── ExportPartTooLarge        one encoded page passed max_part_bytes (lower the batch)
├── ExportWriteConflict           the storage kept a part under another name (retryable)
├── WebhookInvalid                an event id/topic holds ':' or an endpoint URL is unusable
│   └── WebhookAddressRefused     the endpoint resolves to a non-public address (B6)
├── WebhookNotFound               the endpoint or event seam answered None
├── WebhookEndpointDisabled       the endpoint is disabled: no request is made
├── WebhookDeliveryFailed         the receiver failed, refused or was unreachable (retryable)
├── WebhookSignatureInvalid       a received delivery's signature does not verify
├── RowUnreadable                 a stored row Python cannot read (skipped, recorded)
├── TenantScopeRequired           a body without a tenant read tenant-scoped rows (B7)
├── UnknownBackfill               no backfill is declared under a name
├── BackfillExcluded              this ENVIRONMENT is not one the backfill declares
├── BackfillMigrationPending      the migration a backfill requires is not applied
└── BackfillStalled               the source ran dry while count() still answers rows

JobControl                        raised by job bodies on purpose: an outcome, not a failure
├── Terminal                      stop for good: dead-letter now, attempts unspent
└── RetryAfter                    retry at a named time instead of the backoff

RunSuspended (a BaseException)    run.sleep / run.wait_for_event park the run: control
                                  flow, never caught by ``except Exception``
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from django.core.exceptions import ImproperlyConfigured

Classification = Literal["terminal", "retryable"]
SHOWN_CHARS = 200  # how much of a value an error message shows


def shown(value: object) -> str:
    """``repr(value)``, cut to a few hundred characters: an error names the value it
    refuses, and a 100 MB input must not become a 100 MB message."""
    try:
        text = repr(value)
    except Exception:  # a value whose repr fails is still named by its type
        text = f"<{type(value).__name__}>"
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


class JobsError(Exception):
    """Base class for errors raised by ultimate_jobs."""

    code: ClassVar[str] = "X_JOBS"
    classification: ClassVar[Classification] = "terminal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ConfigurationError(JobsError, ImproperlyConfigured):
    """A setting or ULTIMATE_JOBS_* variable has an invalid value."""

    code = "X_CONFIGURATION"

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"{key}={value!r}: {reason}", key=key, value=value)
        self.key = key
        self.value = value
        self.reason = reason


class UnknownSetting(ConfigurationError):
    """An ULTIMATE_JOBS key names no setting; ``closest`` is the key meant, or ''."""

    def __init__(self, key: str, value: object, closest: str, known: list[str]) -> None:
        meant = f"did you mean {closest!r}? " if closest else ""
        super().__init__(
            key,
            value,
            f"unknown ULTIMATE_JOBS key; {meant}(known: {', '.join(known)})",
        )
        self.closest = closest


class InvalidArgument(JobsError):
    """A value handed to a public entry point is invalid; names the field and the value."""

    code = "X_INVALID_ARGUMENT"

    def __init__(
        self, field: str, value: object, reason: str, *, job: str = ""
    ) -> None:
        where = f"{job}: " if job else ""
        super().__init__(
            f"{where}{field}={shown(value)}: {reason}", field=field, value=value
        )
        self.field = field
        self.value = value
        self.reason = reason
        self.job = job


class InvalidDuration(InvalidArgument):
    """A duration is zero, negative or malformed."""

    code = "X_INVALID_DURATION"


class InvalidQueueName(InvalidArgument):
    """A queue name does not match ``^[a-z0-9][a-z0-9_.-]{0,62}$``."""

    code = "X_INVALID_QUEUE"


class UnknownQueue(InvalidArgument):
    """A queue that no job, QUEUES nor task declares: work there would wait for a
    worker nobody starts. The message names the closest declared queue."""

    code = "X_UNKNOWN_QUEUE"


class InstantOutOfRange(InvalidArgument):
    """An instant (run_at, the end of a delay) before 1970 or past 100 years from now."""

    code = "X_INSTANT_OUT_OF_RANGE"


class JobDeclarationInvalid(InvalidArgument):
    """A @job declaration, or a value one of its callables answered, is invalid."""

    code = "X_JOB_DECLARATION_INVALID"


class IdempotencyRequired(JobDeclarationInvalid):
    """A job was declared without an idempotency_key callable."""

    code = "X_IDEMPOTENCY_REQUIRED"


class JobTenantRequired(JobDeclarationInvalid):
    """A job was declared without a tenant callable (or NO_TENANT)."""

    code = "X_JOB_TENANT_REQUIRED"


class TaskDeclarationInvalid(InvalidArgument):
    """A @task declaration, a runtime schedule, or a value a task answered is invalid."""

    code = "X_TASK_DECLARATION_INVALID"


class JobPageInvalid(InvalidArgument):
    """A page of jobs larger than MAX_PAGE, or a cursor (after / before) that is not
    one a page answered; ``field`` names which."""

    code = "X_JOB_PAGE_INVALID"


class PurgeTargetInvalid(InvalidArgument):
    """A purge's targets function answered something that is not a list of targets,
    a target without a name or ``purge_expired``, or a count that is not one."""

    code = "X_PURGE_TARGET_INVALID"


class PurgeTargetDuplicate(PurgeTargetInvalid):
    """Two targets of one purge share a name: refused before the first delete."""

    code = "X_PURGE_TARGET_DUPLICATE"


class InvalidJobPayload(JobsError):
    """A job's input does not fit its signature (at enqueue, or a stale stored payload)."""

    code = "X_INVALID_PAYLOAD"

    def __init__(self, job: str, field: str, value: object, reason: str) -> None:
        super().__init__(
            f"{job}: {field}={shown(value)}: {reason}", field=field, value=value
        )
        self.job = job
        self.field = field
        self.value = value
        self.reason = reason


class InputUpgradeFailed(InvalidJobPayload):
    """A stored input of an older version could not be upgraded to the declared one
    (P11): no upgrade from its version, or the upgrade raised or answered no object."""

    code = "X_INPUT_UPGRADE_FAILED"

    def __init__(self, job: str, version: int, reason: str) -> None:
        super().__init__(job, "__version__", version, reason)
        self.version = version


class InputVersionAhead(InvalidJobPayload):
    """A stored input is of a newer version than this code declares (P11): a worker
    of the previous deploy met a row of the next one. The row is handed back
    untouched, its attempt not counted, for a worker of the newer code."""

    code = "X_INPUT_VERSION_AHEAD"
    classification = "retryable"

    def __init__(self, job: str, version: int, declared: int) -> None:
        super().__init__(
            job,
            "__version__",
            version,
            f"newer than version {declared} this code declares: handed back for a "
            "worker of the newer code",
        )
        self.version = version
        self.declared = declared


class InputTooLarge(InvalidJobPayload):
    """An input's JSON is longer than MAX_INPUT_BYTES (B4)."""

    code = "X_INPUT_TOO_LARGE"

    def __init__(self, job: str, field: str, size: int, max_bytes: int) -> None:
        super().__init__(
            job,
            field,
            size,
            f"the JSON is at least {size} bytes; MAX_INPUT_BYTES is {max_bytes} "
            "(keep large data in your own tables and pass its id)",
        )
        self.size = size
        self.max_bytes = max_bytes


class ResultTooLarge(JobsError):
    """A ``store_result=True`` body returned JSON longer than MAX_RESULT_BYTES (P8)."""

    code = "X_RESULT_TOO_LARGE"

    def __init__(self, job: str, size: int, max_bytes: int) -> None:
        super().__init__(
            f"{job}: result={size} bytes of JSON: MAX_RESULT_BYTES is {max_bytes} "
            "(keep large data in your own tables and return its id)",
            field="result",
            value=size,
        )
        self.job = job
        self.size = size
        self.max_bytes = max_bytes


class InputTooDeep(InvalidJobPayload):
    """An input nests deeper than MAX_INPUT_DEPTH (B4)."""

    code = "X_INPUT_TOO_DEEP"

    def __init__(self, job: str, field: str, max_depth: int) -> None:
        super().__init__(
            job, field, "...", f"nested deeper than MAX_INPUT_DEPTH={max_depth} levels"
        )
        self.max_depth = max_depth


class JobNameTaken(JobsError):
    """Two different functions were declared under one job name."""

    code = "X_JOB_DUPLICATE"

    def __init__(self, name: str, existing: str, new: str) -> None:
        super().__init__(f"job name {name!r} is taken by {existing}; refused for {new}")
        self.name = name


class JobDuplicate(JobsError):
    """A live job of the same name and tenant already holds the idempotency key."""

    code = "X_JOB_DUPLICATE"

    def __init__(self, name: str, idempotency_key: str, existing_id: object) -> None:
        super().__init__(
            f"{name}: idempotency_key={idempotency_key!r} is held by live job {existing_id}"
        )
        self.name = name
        self.idempotency_key = idempotency_key
        self.existing_id = existing_id


class UnknownJob(JobsError):
    """No job is registered under this name in this process."""

    code = "X_UNKNOWN_JOB"
    classification = "retryable"  # a worker of another release may know it

    def __init__(self, name: str, hint: str = "") -> None:
        super().__init__(f"name={name!r}: no job is registered under this name{hint}")
        self.name = name


class UnknownTask(JobsError):
    """No task is declared, and no schedule is stored, under this name."""

    code = "X_UNKNOWN_TASK"

    def __init__(self, name: object, hint: str = "") -> None:
        super().__init__(
            f"name={name!r}: no task is declared and no schedule is stored under it"
            + hint
        )
        self.name = name


class StepDuplicate(JobsError):
    """A step name was used twice in one attempt."""

    code = "X_STEP_DUPLICATE"

    def __init__(self, job: str, step: str) -> None:
        super().__init__(f"{job}: step name {step!r} used twice in one attempt")
        self.step = step


class JobAborted(JobsError):
    """The attempt was cancelled; no further writes are accepted from it."""

    code = "X_ABORTED"
    classification = "retryable"

    def __init__(self, reason: str) -> None:
        super().__init__(f"attempt cancelled ({reason})")
        self.reason = reason


class JobTimeout(JobsError):
    """An attempt, a step or a wait outlived its deadline."""

    code = "X_JOB_TIMEOUT"
    classification: ClassVar[Classification] = "retryable"


class EventTimeout(JobTimeout):
    """A wait_for_event outlived its timeout with no matching event.

    Terminal: the timeout is recorded with the step, so a retry would replay it.
    """

    classification = "terminal"

    def __init__(self, job: str, step: str, event: str) -> None:
        super().__init__(
            f"{job}: step {step!r} waited for event {event!r} past its timeout",
            step=step,
            event=event,
        )
        self.step = step
        self.event = event


class FanInTimeout(JobTimeout):
    """A run.wait_for_jobs outlived its timeout before every child settled (S11).

    Terminal: the timeout is recorded with the step, so a retry would replay it.
    """

    classification = "terminal"

    def __init__(self, job: str, step: str) -> None:
        super().__init__(
            f"{job}: step {step!r} waited for its child jobs past its timeout",
            step=step,
        )
        self.step = step


class OutboxNoTx(JobsError):
    """OUTBOX="required" and the enqueue ran outside a transaction."""

    code = "X_OUTBOX_NO_TX"


class InvalidCron(JobsError):
    """A cron expression is invalid; every problem is listed."""

    code = "X_INVALID_CRON"

    def __init__(self, expression: str, problems: list[str]) -> None:
        super().__init__(f"cron={expression!r}: " + "; ".join(problems))
        self.expression = expression
        self.problems = problems


class InvalidTimezone(JobsError):
    """A time zone name is not in the IANA database."""

    code = "X_INVALID_TIMEZONE"

    def __init__(
        self,
        tz: object,
        reason: str = "not an IANA time zone name (e.g. 'America/Bogota')",
    ) -> None:
        super().__init__(f"tz={tz!r}: {reason}")
        self.tz = tz


class JobNotFound(JobsError):
    """No job has this id."""

    code = "X_JOB_NOT_FOUND"

    def __init__(self, job_id: object) -> None:
        super().__init__(f"id={job_id!s}: no such job")
        self.job_id = job_id


class _JobStateRefused(JobsError):
    verb: ClassVar[str] = ""

    def __init__(self, job_id: object, state: str) -> None:
        super().__init__(f"id={job_id!s}: a {state} job cannot be {self.verb}")
        self.job_id = job_id
        self.state = state


class JobNotRequeueable(_JobStateRefused):
    """Only a finished job (done, failed, dead, cancelled) can be requeued."""

    code = "X_JOB_NOT_REQUEUEABLE"
    verb = "requeued"


class JobNotRemovable(_JobStateRefused):
    """A running job cannot be removed; cancel it first."""

    code = "X_JOB_NOT_REMOVABLE"
    verb = "removed"


class JobNotCancellable(_JobStateRefused):
    """Only a live job (ready, delayed, running, suspended) can be cancelled."""

    code = "X_JOB_NOT_CANCELLABLE"
    verb = "cancelled"


class JobNotPromotable(_JobStateRefused):
    """Only a job waiting on its run time can be promoted."""

    code = "X_JOB_NOT_PROMOTABLE"
    verb = "promoted"


class TaskNotLoaded(JobsError):
    """A task a scheduler recorded, but whose code this process has not imported, was
    asked to fire (pause, resume and next run need no code; a fire does)."""

    code = "X_TASK_NOT_LOADED"

    def __init__(self, name: object) -> None:
        super().__init__(
            f"name={name!r}: its code is not imported by this process (a newer "
            "deploy, or an app this process does not install); fire it from a process "
            "that imports it, or restart this one with the new code"
        )
        self.name = name


class TaskRunning(JobsError):
    """A manual trigger of a task (or schedule) whose jobs are still live: a run now
    would overlap the one in progress; ``force=True`` fires anyway."""

    code = "X_TASK_RUNNING"
    classification = "retryable"

    def __init__(self, task: str, job_ids: list[Any]) -> None:
        shown = ", ".join(str(i) for i in job_ids[:5])
        super().__init__(
            f"task={task!r}: a run is in progress (live jobs {shown}); wait for it, "
            "or trigger with force=True",
            task=task,
            job_ids=job_ids,
        )
        self.task = task
        self.job_ids = job_ids


class JobKeyBusy(JobsError):
    """A keyed concurrency limit with when_busy="fail" refused the run."""

    code = "X_JOB_KEY_BUSY"


class LeaseLost(JobsError):
    """This worker no longer holds the job's claim (reclaimed, cancelled or expired)."""

    code = "X_JOB_LEASE_LOST"
    classification = "retryable"


class QueryError(JobsError):
    """A named SQL statement failed; the driver's error is the __cause__."""

    code = "X_QUERY"
    classification = "retryable"

    def __init__(self, query_name: str, error: object) -> None:
        super().__init__(f"query {query_name!r} failed: {error}")
        self.query_name = query_name


class UnsupportedDatabase(JobsError, ImproperlyConfigured):
    """The jobs database alias is not PostgreSQL."""

    code = "X_UNSUPPORTED_DATABASE"


class AppNotInstalled(JobsError, ImproperlyConfigured):
    """``ultimate_jobs`` is missing from INSTALLED_APPS: its tables, commands and
    discovery of ``jobs`` modules are absent."""

    code = "X_APP_NOT_INSTALLED"


class MigrationsPending(JobsError, ImproperlyConfigured):
    """The jobs database lacks migrations of this release: run ``manage.py migrate``."""

    code = "X_MIGRATIONS_PENDING"


class JobTenantMismatch(JobsError):
    """A factory job's input names another tenant than the one its run is under."""

    code = "X_JOB_TENANT_MISMATCH"

    def __init__(self, job: str, field: str, value: object, tenant: object) -> None:
        super().__init__(
            f"{job}: {field}={value!r}: the run is under tenant {tenant!r}",
            field=field,
            value=value,
        )
        self.job = job
        self.field = field
        self.value = value
        self.tenant = tenant


class ExportInvalid(InvalidArgument):
    """An export's source, prefix, storage or a row's cell cannot be exported."""

    code = "X_EXPORT_INVALID"


class ExportUnknownColumn(ExportInvalid):
    """row() answered a key the export's columns do not carry (F4)."""

    code = "X_EXPORT_UNKNOWN_COLUMN"


class ExportPartTooLarge(ExportInvalid):
    """One encoded page passed max_part_bytes; the message names the batch to lower."""

    code = "X_EXPORT_PART_TOO_LARGE"

    def __init__(self, job: str, page: int, batch: int, max_part_bytes: int) -> None:
        super().__init__(
            "batch",
            batch,
            f"page {page} encodes to more than max_part_bytes={max_part_bytes}; "
            "lower the batch (or raise max_part_bytes)",
            job=job,
        )
        self.page = page
        self.batch = batch
        self.max_part_bytes = max_part_bytes


class ExportWriteConflict(JobsError):
    """The storage kept a part under another name than its key; the page is run again."""

    code = "X_EXPORT_WRITE_CONFLICT"
    classification = "retryable"


class WebhookInvalid(InvalidArgument):
    """An event id or topic holds ':' (or is empty), or an endpoint is unusable."""

    code = "X_WEBHOOK_INVALID"


class WebhookAddressRefused(WebhookInvalid):
    """The endpoint's host resolves to an address deliveries may not reach (B6):
    loopback, link-local, private, unique-local, multicast, unspecified or reserved,
    unless WEBHOOK_ALLOWED_NETWORKS lists its network. Terminal: no request is made."""

    code = "X_WEBHOOK_ADDRESS_REFUSED"


class WebhookNotFound(JobsError):
    """The endpoint or the event of a delivery no longer exists (its seam answered None)."""

    code = "X_WEBHOOK_NOT_FOUND"


class WebhookEndpointDisabled(JobsError):
    """The endpoint is disabled; no request is made until a person re-enables it."""

    code = "X_WEBHOOK_ENDPOINT_DISABLED"

    def __init__(self, job: str, endpoint_id: str, reason: str) -> None:
        super().__init__(
            f"{job}: endpoint_id={endpoint_id!r}: disabled ({reason})",
            endpoint_id=endpoint_id,
        )
        self.endpoint_id = endpoint_id
        self.reason = reason


class WebhookDeliveryFailed(JobsError):
    """The receiver answered a failure or a redirect, or could not be reached."""

    code = "X_WEBHOOK_DELIVERY_FAILED"
    classification = "retryable"

    def __init__(
        self, job: str, endpoint_id: str, status: int | None, error: str
    ) -> None:
        answered = f"answered {status}" if status is not None else "unreachable"
        super().__init__(
            f"{job}: endpoint_id={endpoint_id!r}: {answered}: {error}",
            endpoint_id=endpoint_id,
            status=status,
        )
        self.endpoint_id = endpoint_id
        self.status = status


class WebhookSignatureInvalid(JobsError):
    """A received delivery's signature headers are missing, stale or do not verify."""

    code = "X_WEBHOOK_SIGNATURE_INVALID"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RowUnreadable(JobsError):
    """A stored row holds a value Python cannot read (a timestamp past year 9999, an
    integer of thousands of digits): written by an older version or by hand. Readers
    skip it, record it and name it in the log (B4)."""

    code = "X_ROW_UNREADABLE"

    def __init__(self, table: str, row_id: object, error: str) -> None:
        super().__init__(
            f"{table} id={row_id!s}: the stored row cannot be read: {error}",
            table=table,
            row_id=row_id,
        )
        self.table = table
        self.row_id = row_id
        self.error = error


class TenantScopeRequired(JobsError):
    """A job body without a tenant read or wrote tenant-scoped rows outside
    ``cross_tenant(reason=...)`` (B7)."""

    code = "X_TENANT_SCOPE_REQUIRED"

    def __init__(self, model: str, job: str = "") -> None:
        where = f"{job}: " if job else ""
        super().__init__(
            f"{where}{model} rows are tenant-scoped and this run has no tenant; "
            "wrap the read in cross_tenant(reason=...) if it really spans tenants",
            model=model,
        )
        self.model = model
        self.job = job


class BackfillInvalid(InvalidArgument):
    """A backfill's source() or count() answered something it cannot use (F1)."""

    code = "X_BACKFILL_INVALID"


class UnknownBackfill(JobsError):
    """No backfill is declared under this name in this process (F2)."""

    code = "X_BACKFILL_UNKNOWN"

    def __init__(self, name: object, known: list[str]) -> None:
        listed = ", ".join(known) if known else "none is declared"
        super().__init__(f"name={name!r}: no backfill is declared under it ({listed})")
        self.name = name
        self.known = known


class BackfillExcluded(JobsError):
    """The backfill declares environments, and ENVIRONMENT is not one of them (F1)."""

    code = "X_BACKFILL_ENVIRONMENT"

    def __init__(
        self, name: str, environment: str, environments: tuple[str, ...]
    ) -> None:
        super().__init__(
            f"{name}: ENVIRONMENT={environment!r}: the backfill runs only in "
            f"{', '.join(environments)}",
            environment=environment,
        )
        self.name = name
        self.environment = environment
        self.environments = environments


class BackfillMigrationPending(JobsError):
    """The migration a backfill requires is not applied yet (F1).

    Retryable: a pass enqueued before ``migrate`` ran waits for it with the backoff.
    """

    code = "X_BACKFILL_MIGRATION_PENDING"
    classification = "retryable"

    def __init__(self, name: str, requires: str, database: str) -> None:
        super().__init__(
            f"{name}: requires={requires!r}: the migration is not applied on database "
            f"{database!r} (run manage.py migrate first)",
            requires=requires,
        )
        self.name = name
        self.requires = requires
        self.database = database


class BackfillStalled(JobsError):
    """The source ran dry while count() still answers rows: the two disagree (F1).

    Terminal: the source and count() select different rows, which is an authoring bug
    a retry cannot fix.
    """

    code = "X_BACKFILL_STALLED"

    def __init__(self, name: str, remaining: int, rows: int) -> None:
        super().__init__(
            f"{name}: the source ran dry after {rows} rows while count() still answers "
            f"{remaining}: count() answers the rows still to sweep, so it must select "
            "what source() selects, and handle() must move each row out of it",
            remaining=remaining,
        )
        self.name = name
        self.remaining = remaining
        self.rows = rows


class JobControl(Exception):
    """Base class for outcomes a job body raises on purpose."""


class Terminal(JobControl):
    """Stop for good: the job is dead-lettered now with its remaining attempts unspent."""


class RetryAfter(JobControl):
    """Retry at the named time (seconds from now) instead of the backoff."""

    def __init__(self, seconds: float, message: str = "") -> None:
        super().__init__(message or f"retry after {seconds}s")
        self.seconds = float(seconds)


class RunSuspended(BaseException):
    """The run parks here (run.sleep, run.wait_for_event) and replays when it wakes.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` in a job body
    does not swallow it. A body that catches BaseException (or uses a bare ``except:``)
    must re-raise it; the run suspends anyway, and ``jobs.suspension.swallowed`` is logged.
    """

    def __init__(
        self,
        step: str,
        *,
        wake_at: Any = None,
        poll: float | None = None,
        waiting: bool = False,
    ) -> None:
        super().__init__(f"run suspended at step {step!r}")
        self.step = step
        self.wake_at = wake_at  # a sleep's wake time, a wait's deadline (None: none)
        self.poll = poll  # a wait is re-checked at least this often (event_poll)
        self.waiting = waiting  # True for wait_for_event
