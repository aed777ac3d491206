"""Settings, in order: defaults, settings.ULTIMATE_JOBS, then ULTIMATE_JOBS_<KEY> variables.

Each key is declared once, as a field of ``JobsSettings`` whose metadata (``Setting``)
carries its kind, its bounds and its one-line doc. Everything else derives from it: the
cleaning of a value (one check per kind, ``ground/validate.py``), the
django-environ schema ``ENV_SCHEMA`` (a cast per kind: durations through the
declarations' own parser, so ``ULTIMATE_JOBS_LEASE=2s`` means what ``@job(timeout="2s")``
means), the list of durations and the table of docs/settings.md
(``scripts/settings_doc.py`` writes it; a test fails when they differ).

No other module reads django.conf.settings or os.environ for these keys. A bad value
is a ConfigurationError naming the key and the value (``UnknownSetting`` for a key that
is none, with the closest real one), which checks.py reports as ultimate_jobs.E001 /
E002 at `manage.py check`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import functools
import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import environ
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.declaration.redaction import (
    DEFAULT_PATTERNS,
    DEFAULT_SECRET_PATTERNS,
)
from ultimate_jobs.declaration.retention import check_retention
from ultimate_jobs.ground import validate
from ultimate_jobs.ground.bounds import (
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_MAX_INPUT_DEPTH,
    text_problem,
)
from ultimate_jobs.ground.durations import parse_duration
from ultimate_jobs.ground.exceptions import (
    ConfigurationError,
    InvalidArgument,
    JobsError,
    UnknownSetting,
)

ENV_PREFIX = "ULTIMATE_JOBS_"
# Settings renamed since a release: the old name is refused, naming the new one.
RENAMED = {"HISTORY_AFTER": "ARCHIVE_AFTER"}  # issue 25: "history" is P6 only
OUTBOX_MODES = ("auto", "required", "off")
LOG_FORMATS = ("text", "json")
Kind = Literal[
    "text",
    "choice",
    "count",
    "duration",
    "flag",
    "queues",
    "patterns",
    "networks",
    "regexes",
    "retention",
    "modules",
]
HOUR, DAY = 3600.0, 86400.0
# Handler threads (and pooled connections) per worker process: past this a typo such
# as 100000 ends in "can't start new thread"; jobs_worker --concurrency agrees.
MAX_THREADS = 256
# PostgreSQL's jsonb holds at most 255 MB: an input or a result past it cannot be stored.
MAX_JSONB_BYTES = 255 * 1024 * 1024
# How deep an input may nest at most: encoding and decoding JSON recurse once per
# level, and a job body's stack must keep room under Python's recursion limit (1000).
MAX_DEPTH = 256


@dataclasses.dataclass(frozen=True)
class Setting:
    """What one key is: its kind, bounds and one-line doc (docs/settings.md's row).

    ``least`` and ``most`` bound a count, a duration (seconds), the length of a text
    or the number of items of a list; ``values`` is the docs' "unit / values" column
    before the bounds; ``shown`` how the docs show the default when its value does not
    say it (``HEARTBEAT``: a third of ``LEASE``)."""

    kind: Kind
    doc: str
    least: float | None = None
    most: float | None = None
    values: str = ""
    choices: tuple[str, ...] = ()
    shown: str = ""
    optional: bool = False  # None is a value (HEARTBEAT)

    def __post_init__(self) -> None:
        bounded = self.kind not in ("choice", "flag")
        if bounded and (self.least is None or self.most is None):
            raise TypeError(f"a {self.kind} setting declares least and most")


def _key(default: Any = dataclasses.MISSING, **spec: Any) -> Any:
    """A settings field: its default and its ``Setting`` in the field's metadata."""
    metadata = {"setting": Setting(**spec)}
    if isinstance(default, dict | list):
        return dataclasses.field(
            default_factory=lambda: type(default)(default), metadata=metadata
        )
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Placement:
    """Where the jobs live (Q1) and how a worker runs them (W, N1): the first settings,
    and what they answer beyond their values (an alias per queue, the renewal
    period). JobsSettings adds the rest."""

    DATABASE: str = _key(
        "default",
        kind="text",
        least=1,
        most=200,
        values="alias",
        doc="the `DATABASES` alias that holds the jobs tables (PostgreSQL)",
    )
    QUEUES: tuple[str, ...] = _key(
        (),
        kind="queues",
        least=0,
        most=1000,
        shown="every declared queue",
        values='list, or `"a,b"` in the environment; or a mapping `{"reports": '
        '{"database": "jobs_b"}}` (JSON in the environment)',
        doc="what a worker serves without `--queues`; the mapping form also routes a "
        "queue to another `DATABASES` alias (Q1, [scaling.md]"
        "(scaling.md#queues-on-several-databases)); an unknown alias or key is "
        "`X_CONFIGURATION`",
    )
    # Q1: the queues QUEUES routes to another alias than DATABASE (its mapping form,
    # {"reports": {"database": "jobs_b"}}); derived from QUEUES, not a key of its own.
    ROUTES: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata={"derived": True}
    )
    CONCURRENCY: int = _key(
        8,
        kind="count",
        least=1,
        most=MAX_THREADS,
        values="threads",
        doc="handler threads per worker process",
    )
    PREFETCH: int | None = _key(
        None,
        kind="count",
        least=0,
        most=MAX_THREADS,
        optional=True,
        values="rows",
        shown="`CONCURRENCY`, at most 16 (0 at concurrency 1)",
        doc="rows a busy worker's claim takes beyond its free slots, so a handler that "
        "finishes starts the next at once; their leases are renewed while they wait, "
        "a drain hands them back uncounted; never for capped names or under a "
        "per-process budget; `0` turns it off ([worker.md](worker.md#prefetch))",
    )
    POOL_SIZE: int = _key(
        4,
        kind="count",
        least=1,
        most=MAX_THREADS,
        values="connections",
        doc="connections a worker process's handler threads share for what their jobs "
        "write (steps, retries, failures, slot releases, deadlines); dialled at the "
        "start, at most `CONCURRENCY` of them. A process holds this plus its fixed ones "
        "([scaling.md](scaling.md#connections-per-worker-process))",
    )
    POLL_INTERVAL: float = _key(
        0.25,
        kind="duration",
        least=0.001,
        most=HOUR,
        doc="wait between claims while there is work; at most `IDLE_POLL_MAX`",
    )
    IDLE_POLL_MAX: float = _key(
        2.0,
        kind="duration",
        least=0.001,
        most=HOUR,
        doc="ceiling of the idle backoff (the poll doubles while idle)",
    )
    WOKEN_IDLE_POLL_MAX: float = _key(
        5.0,
        kind="duration",
        least=0.001,
        most=HOUR,
        doc="the ceiling once a LISTEN/NOTIFY wake is proven (the outbox relay's is six "
        "times this)",
    )
    LEASE: float = _key(
        30.0,
        kind="duration",
        least=1,
        most=DAY,
        doc="visibility timeout: a claim lapses unless renewed; also the outbox "
        "relay's claim lease, and the time after which a killed worker's concurrency "
        "slots free",
    )
    HEARTBEAT: float | None = _key(
        None,
        kind="duration",
        least=0.001,
        most=DAY,
        optional=True,
        shown="a third of `LEASE`",
        doc="how often leases are renewed; shorter than `LEASE`",
    )
    DRAIN_TIMEOUT: float = _key(
        25.0,
        kind="duration",
        least=0.001,
        most=DAY,
        doc="how long SIGTERM waits for in-flight jobs",
    )

    def database_for(self, queue: str) -> str:
        """The Django alias that holds ``queue``'s jobs (Q1): its route, else DATABASE."""
        return self.ROUTES.get(queue, self.DATABASE)

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every alias that holds jobs tables: DATABASE first, then the routed ones."""
        routed = sorted(set(self.ROUTES.values()) - {self.DATABASE})
        return (self.DATABASE, *routed)

    def queues_by_alias(self, queues: Iterable[str]) -> dict[str, list[str]]:
        """``queues`` grouped by the alias that holds each, in ``aliases`` order."""
        grouped: dict[str, list[str]] = {}
        for queue in queues:
            grouped.setdefault(self.database_for(queue), []).append(queue)
        return {alias: grouped[alias] for alias in self.aliases if alias in grouped}

    @property
    def heartbeat_seconds(self) -> float:
        """The renewal period: HEARTBEAT, or a third of the lease."""
        return self.HEARTBEAT if self.HEARTBEAT is not None else self.LEASE / 3


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobsSettings(Placement):
    """The effective configuration; durations are held in seconds."""

    OUTBOX: str = _key(
        "auto",
        kind="choice",
        choices=OUTBOX_MODES,
        doc="inside a transaction: stage in the outbox (`auto`, `required`) or publish "
        "at once (`off`); outside one: publish (`auto`, `off`) or raise `OutboxNoTx` "
        "(`required`). See [outbox.md](outbox.md)",
    )
    RELAY_INTERVAL: float = _key(
        0.2,
        kind="duration",
        least=0.001,
        most=HOUR,
        doc="the outbox relay's poll after an empty pass, doubling while idle up to "
        "`IDLE_POLL_MAX`",
    )
    SCHEDULER_TICK: float = _key(
        1.0,
        kind="duration",
        least=0.001,
        most=HOUR,
        doc="longest wait between scheduler rounds (a round also runs when an "
        "occurrence falls due; [scheduling.md](scheduling.md))",
    )
    SCHEDULER_LEASE: float = _key(
        30.0,
        kind="duration",
        least=1,
        most=DAY,
        doc="scheduler leader lease TTL, renewed every third; a killed leader is "
        "replaced within it",
    )
    RETENTION: Mapping[str, Any] = _key(
        {},
        kind="retention",
        least=0,
        most=8,
        values="mapping, JSON in the environment",
        doc='overrides the default retention of finished jobs per state, e.g. `{"done": '
        '{"days": 3}}` ([retention.md](retention.md))',
    )
    ENVIRONMENT: str = _key(
        "production",
        kind="text",
        least=1,
        most=200,
        doc="where this deployment runs: a backfill declaring `environments` runs only "
        "where this is one of them ([backfills.md]"
        "(backfills.md#gates-requires-and-environments))",
    )
    APP_VERSION: str = _key(
        "",
        kind="text",
        least=0,
        most=200,
        doc="the deployed app's version (a release tag, a commit), stamped on each "
        "backfill pass in the ledger ([backfills.md](backfills.md#the-ledger))",
    )
    WAKE: bool = _key(
        True,  # noqa: FBT003 - a default, not a flag argument
        kind="flag",
        doc="LISTEN/NOTIFY wake-up; `False` behind a transaction-pooling proxy",
    )
    PREPARED_STATEMENTS: bool = _key(
        True,  # noqa: FBT003 - a default, not a flag argument
        kind="flag",
        doc="prepare the named statements once per connection (the worker's, and "
        "the app's own for a one-by-one enqueue in autocommit); `False` behind a "
        "transaction-pooling proxy that cannot hold prepared statements (PgBouncer "
        "before 1.21)",
    )
    LOG_FORMAT: str = _key(
        "text",
        kind="choice",
        choices=LOG_FORMATS,
        doc="how the worker commands print events when the project configured no "
        "logging ([observability.md](observability.md))",
    )
    EVENT_RETENTION: float = _key(
        7 * DAY,
        kind="duration",
        least=0.001,
        most=3650 * DAY,
        doc="how long a published event stays matchable by `wait_for_event` "
        "([steps.md](steps.md))",
    )
    OUTBOX_RETENTION: float = _key(
        7 * DAY,
        kind="duration",
        least=0.001,
        most=3650 * DAY,
        doc="how long the purge keeps a published outbox row ([retention.md]"
        "(retention.md))",
    )
    PURGE_BATCH: int = _key(
        1000,
        kind="count",
        least=1,
        most=100_000,
        values="rows",
        doc="the most rows one purge statement deletes",
    )
    # Q2: how long a finished job stays in the hot table before the scheduler leader
    # moves it to the partitioned archive.
    ARCHIVE_AFTER: float = _key(
        60.0,
        kind="duration",
        least=0.001,
        most=3650 * DAY,
        doc="how long a finished job stays in the hot table before the scheduler "
        "leader moves it to the partitioned archive (SPEC Q2, [scaling.md]"
        "(scaling.md#partitioned-archive)); named `HISTORY_AFTER` before issue 25: the "
        "old name, as a key or a variable, is refused naming this one",
    )
    PURGE_MAX_BATCHES: int = _key(
        100,
        kind="count",
        least=1,
        most=10_000,
        values="statements",
        doc="the most statements one purge pass runs per target; the rest waits for "
        "the next pass ([retention.md](retention.md#the-purge-is-bounded))",
    )
    MAX_INPUT_BYTES: int = _key(
        DEFAULT_MAX_INPUT_BYTES,
        kind="count",
        least=1,
        most=MAX_JSONB_BYTES,
        values="bytes",
        shown="`1048576` (1 MiB)",
        doc="the longest JSON an input may encode to; longer is `X_INPUT_TOO_LARGE` at "
        "enqueue ([security.md]"
        "(security.md#b1-b4-bad-input-is-refused-at-the-call-before-any-sql)); at "
        "most what PostgreSQL's jsonb holds",
    )
    MAX_INPUT_DEPTH: int = _key(
        DEFAULT_MAX_INPUT_DEPTH,
        kind="count",
        least=1,
        most=MAX_DEPTH,
        values="levels",
        doc="how deep an input may nest (the input object is level 1); deeper is "
        "`X_INPUT_TOO_DEEP` at enqueue, and a stored one dead-letters its job. Bounded "
        "so that no accepted input reaches Python's recursion limit",
    )
    REDACT: tuple[str, ...] = _key(
        DEFAULT_PATTERNS,
        kind="patterns",
        least=0,
        most=200,
        shown=f"`{', '.join(DEFAULT_PATTERNS)}`",
        values='list, or `"a,b"` in the environment',
        doc='key patterns whose values every operator surface shows as `"[redacted]"`: '
        "a key matches when it contains a pattern, ignoring case; added to each job's "
        "own `redact=` paths ([security.md]"
        "(security.md#b5-secrets-never-reach-an-operator-surface)). Setting it "
        "replaces the defaults",
    )
    WEBHOOK_ALLOWED_NETWORKS: tuple[str, ...] = _key(
        (),
        kind="networks",
        least=0,
        most=200,
        shown="none",
        values='list of CIDR networks, or `"a,b"` in the environment',
        doc="networks webhook deliveries may reach although they are not public, e.g. "
        '`["127.0.0.1/32"]` for a local receiver ([security.md]'
        "(security.md#b6-webhooks-reach-public-addresses-only))",
    )
    WEBHOOK_SECRET_PATTERNS: tuple[str, ...] = _key(
        DEFAULT_SECRET_PATTERNS,
        kind="regexes",
        least=0,
        most=200,
        shown="Slack, Discord, Teams, Zapier, Mattermost, Telegram, long tokens",
        values="list of regular expressions; in the environment a JSON list",
        doc="secrets in webhook URL paths, masked (`***`) in the ledger, `last_error` "
        "and logs: group 1 of each match, else the match ([security.md]"
        "(security.md#b6-webhooks-reach-public-addresses-only); issue 31)",
    )
    RUN_LOG_MAX_ENTRIES: int = _key(
        200,
        kind="count",
        least=0,
        most=10_000,
        values="lines",
        doc="the newest lines an attempt keeps of what its body wrote through "
        "`run.logger`; 0 keeps none ([jobs.md](jobs.md#per-run-logs))",
    )
    MAX_RESULT_BYTES: int = _key(
        64 * 1024,
        kind="count",
        least=1,
        most=MAX_JSONB_BYTES,
        values="bytes",
        doc="the JSON a `@job(store_result=True)` body may return; a larger result "
        "fails the job with `X_RESULT_TOO_LARGE` ([jobs.md](jobs.md#optional-fields))",
    )
    AUTODISCOVER: tuple[str, ...] = _key(
        ("jobs", "tasks"),
        kind="modules",
        least=0,
        most=50,
        values='list of module names, or `"a,b"` in the environment',
        doc="the module of every installed app imported at start-up to declare jobs and "
        "tasks: `jobs.py`, and `tasks.py` as Celery, Procrastinate and `django.tasks` "
        "projects name it (issue 30); a job in a module nobody imports is unknown to "
        "the worker, and the dashboard warns of its waiting runs",
    )


def specs() -> dict[str, Setting]:
    """Every key a user sets, with its ``Setting``, in declaration order."""
    return {
        field.name: field.metadata["setting"]
        for field in dataclasses.fields(JobsSettings)
        if "setting" in field.metadata
    }


def setting_names() -> list[str]:
    """The keys a user sets (ULTIMATE_JOBS, ULTIMATE_JOBS_<KEY>): every field but the
    derived ones."""
    return list(specs())


def defaults() -> dict[str, Any]:
    """Every key's default value."""
    return dataclasses.asdict(JobsSettings())


SPECS = specs()
_DURATIONS = tuple(name for name, spec in SPECS.items() if spec.kind == "duration")
ROUTE_KEYS = ("database",)


def _routes(key: str, value: object, home: str) -> dict[str, str]:
    """QUEUES' mapping form (Q1): queue -> {"database": alias}; the queues it routes to
    another alias than ``home`` (DATABASE). Every alias must be in DATABASES."""
    if not isinstance(value, Mapping):
        return {}
    known = list(getattr(settings, "DATABASES", {}))
    routes = {}
    for queue, route in value.items():
        if route is None:
            route = {}
        if not isinstance(route, Mapping):
            raise ConfigurationError(
                f"{key}[{queue!r}]",
                route,
                'expected a dict like {"database": "jobs_b"}',
            )
        if unknown := sorted(set(route) - set(ROUTE_KEYS)):
            raise ConfigurationError(
                f"{key}[{queue!r}]",
                route,
                f"unknown key {unknown[0]!r} (known: {', '.join(ROUTE_KEYS)})",
            )
        alias = route.get("database", home)
        if not isinstance(alias, str) or alias not in known:
            raise ConfigurationError(
                f"{key}[{queue!r}]['database']",
                alias,
                f"not an alias of DATABASES (known: {', '.join(known)})",
            )
        if alias != home:
            routes[queue] = alias
    return routes


def _queues(key: str, value: object) -> tuple[str, ...]:
    names: object = value
    if isinstance(value, Mapping):  # Q1's form: queue -> {"database": alias}
        names = list(value)
    elif isinstance(value, str):
        names = value.split(",")
    if not isinstance(names, list | tuple):
        raise ConfigurationError(
            key, value, 'expected a list of queue names or {"queue": {"database": ...}}'
        )
    out = []
    for name in names:
        name = name.strip() if isinstance(name, str) else name
        if name == "":
            continue
        try:
            out.append(validate_queue(name, field=key))
        except JobsError as exc:
            raise ConfigurationError(key, value, exc.message) from exc
    return tuple(out)


def _retention(key: str, value: object) -> dict[str, Any]:
    """The project-wide retention rules, checked like a job's ``retention=`` (F6)."""
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            key, value, "expected a mapping like {'done': {'days': 1}}"
        )
    try:
        return check_retention(value, key)
    except InvalidArgument as exc:
        field = exc.field.replace("retention", key, 1)
        raise ConfigurationError(
            key, value, f"{field}={exc.value!r}: {exc.reason}"
        ) from None


def _strings(key: str, value: object) -> tuple[str, ...]:
    """A list of strings, or one comma-separated string (an environment variable)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigurationError(key, value, "expected a list of strings")
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigurationError(key, value, "expected a list of strings")
        if item.strip():
            out.append(item.strip())
    return tuple(out)


def _patterns(key: str, value: object) -> tuple[str, ...]:
    return tuple(pattern.lower() for pattern in _strings(key, value))


def _networks(key: str, value: object) -> tuple[str, ...]:
    out = []
    for item in _strings(key, value):
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise ConfigurationError(
                key, value, f"{item!r} is not a network like '10.0.0.0/8' or '::1/128'"
            ) from None
    return tuple(out)


def _regexes(key: str, value: object) -> tuple[str, ...]:
    out = []
    for item in _strings(key, value):
        try:
            re.compile(item)
        except re.error as exc:
            raise ConfigurationError(
                key, value, f"{item!r} is not a regular expression ({exc})"
            ) from None
        out.append(item)
    return tuple(out)


def _module_names(key: str, value: object) -> tuple[str, ...]:
    names = _strings(key, value)
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise ConfigurationError(
                key, value, f"{name!r} is not a module name like 'jobs' or 'tasks'"
            )
    return names


def _bounds(spec: Setting) -> tuple[int, int]:
    """A count's or a size's bounds (every such key declares both: Setting checks)."""
    if spec.least is None or spec.most is None:  # pragma: no cover - refused below
        raise TypeError(f"a {spec.kind} setting declares its bounds")
    return int(spec.least), int(spec.most)


def _text(key: str, value: object, spec: Setting) -> str:
    least, most = _bounds(spec)
    if not isinstance(value, str) or not least <= len(value) <= most:
        size = "a non-empty string" if least else "a string"
        raise ConfigurationError(
            key, value, f"expected {size} of at most {most} characters"
        )
    if (problem := text_problem(value)) is not None:
        raise ConfigurationError(key, value, problem)
    return value


def _choice(key: str, value: object, spec: Setting) -> str:
    if not isinstance(value, str) or value not in spec.choices:
        raise ConfigurationError(
            key, value, f"expected one of {', '.join(spec.choices)}"
        )
    return value


def _count(key: str, value: object, spec: Setting) -> int:
    least, most = _bounds(spec)
    return validate.whole(
        value,
        field=key,
        least=least,
        most=most,
        error=ConfigurationError,
        digits=True,
    )


def _sized(clean: Callable[[str, Any], Any]) -> Callable[[str, Any, Setting], Any]:
    """A list or mapping kind's cleaner, refusing more than ``most`` entries."""

    def sized(key: str, value: Any, spec: Setting) -> Any:
        cleaned = clean(key, value)
        _least, most = _bounds(spec)
        if len(cleaned) > most:
            raise ConfigurationError(
                key, value, f"expected at most {most} entries (got {len(cleaned)})"
            )
        return cleaned

    return sized


# How each kind of key is cleaned: (key, value, spec) -> the value held.
_CLEANERS: dict[Kind, Callable[[str, Any, Setting], Any]] = {
    "text": _text,
    "choice": _choice,
    "count": _count,
    "duration": lambda key, value, spec: validate.duration(
        value, field=key, least=spec.least, most=spec.most, error=ConfigurationError
    ),
    "flag": lambda key, value, spec: validate.flag(
        value, field=key, error=ConfigurationError, words=True
    ),
    "queues": _sized(_queues),
    "patterns": _sized(_patterns),
    "networks": _sized(_networks),
    "regexes": _sized(_regexes),
    "retention": _sized(_retention),
    "modules": _sized(_module_names),
}


def _clean(key: str, value: object) -> Any:
    """``value`` checked and normalised per its key's kind, within its bounds."""
    spec = SPECS[key]
    if value is None and spec.optional:
        return None
    return _CLEANERS[spec.kind](key, value, spec)


_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _env_duration(value: str) -> float:
    """A duration from a variable: a number of seconds, or "250ms", "5m", "3d"."""
    seconds: object = value
    if _SECONDS.fullmatch(value.strip()):  # float() also reads "٣" and "1_0"
        seconds = float(value)
    return parse_duration(seconds, field="environment")


def _env_count(value: str) -> int:
    """A whole number from a variable, in ASCII digits (int() would read "٣")."""
    if not validate.DIGITS.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is not a whole number")
    return int(value.strip())


def _env_queues(value: str) -> Any:
    """QUEUES from a variable: names separated by commas, or Q1's mapping as JSON
    ('{"reports": {"database": "jobs_b"}}')."""
    if value.lstrip().startswith("{"):
        return json.loads(value)
    return value.split(",")


def _env_bool(value: str) -> bool:
    """Strict: a word that is not a boolean is an error, never False."""
    word = value.strip().lower()
    if word not in validate.TRUE_WORDS | validate.FALSE_WORDS:
        raise ValueError(f"{value!r} is not true or false")
    return word in validate.TRUE_WORDS


# The cast of a ULTIMATE_JOBS_<KEY> variable per kind (django-environ's scheme); the
# value then passes the same checks as a setting.
_ENV_CASTS: dict[Kind, Callable[[str], Any]] = {
    "text": str,
    "choice": str,
    "count": _env_count,
    "duration": _env_duration,
    "flag": _env_bool,
    "queues": _env_queues,
    "patterns": list,
    "networks": list,
    "regexes": json.loads,  # a JSON list: a pattern may hold a comma
    "retention": json.loads,
    "modules": list,
}
ENV_SCHEMA: dict[str, Callable[[str], Any]] = {
    name: _ENV_CASTS[spec.kind] for name, spec in SPECS.items()
}
_ENV_EXAMPLES = {
    json.loads: 'JSON, e.g. \'{"done": {"days": 1}}\'',
    _env_queues: 'names like "mail,reports" or JSON like \'{"reports": {"database": "b"}}\'',
    _env_count: "a whole number",
}


def _reader(environ_: Mapping[str, str]) -> environ.Env:
    """A django-environ reader of the ULTIMATE_JOBS_ variables in ``environ_`` (not
    always os.environ), casting each per ENV_SCHEMA."""
    env = environ.Env(**{ENV_PREFIX + key: cast for key, cast in ENV_SCHEMA.items()})
    env.ENVIRON = environ_
    env.prefix = ENV_PREFIX
    return env


def _from_environment(env: environ.Env, key: str, raw: str) -> Any:
    try:
        return env(key)
    except (ValueError, TypeError, JobsError) as exc:
        cast = ENV_SCHEMA[key]
        expected = _ENV_EXAMPLES.get(cast, "a valid value")
        raise ConfigurationError(
            key, raw, f"{ENV_PREFIX}{key} is not {expected}: {exc}"
        ) from None


def closest_setting(name: str) -> str:
    """The known key closest to a misspelt or renamed one ('' when none is close)."""
    if name.upper() in RENAMED:
        return RENAMED[name.upper()]
    close = difflib.get_close_matches(name.upper(), setting_names(), n=1, cutoff=0.6)
    return close[0] if close else ""


def unknown_variables(
    environ_: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """``ULTIMATE_JOBS_<KEY>`` variables that name no setting, each with the closest
    known variable ('' when none is close): a misspelt variable is otherwise silently
    ignored."""
    environ_ = os.environ if environ_ is None else environ_
    known = setting_names()
    found = []
    for name in sorted(environ_):
        key = name[len(ENV_PREFIX) :]
        if name.startswith(ENV_PREFIX) and key not in known:
            # Compared without the prefix, which every variable shares.
            close = closest_setting(key)
            found.append((name, ENV_PREFIX + close if close else ""))
    return found


def misnamed_settings(names: Iterable[str]) -> list[tuple[str, str]]:
    """Django settings that look like ``ULTIMATE_JOBS`` but are not it (``ULTIMATE_JOB``,
    ``ULTIMATEJOBS``, a variable's name ``ULTIMATE_JOBS_LEASE`` written as a setting),
    each with what was meant ('' when nothing is close): they are otherwise silently
    ignored."""
    found = []
    for name in sorted(names):
        if name == "ULTIMATE_JOBS" or not name.isupper():
            continue
        if name.startswith(ENV_PREFIX):  # a variable's name written as a setting
            key = closest_setting(name[len(ENV_PREFIX) :])
            found.append((name, f"ULTIMATE_JOBS = {{{key!r}: ...}}" if key else ""))
        elif difflib.SequenceMatcher(None, name, "ULTIMATE_JOBS").ratio() >= 0.8:
            found.append((name, "ULTIMATE_JOBS"))
    return found


def load_settings(
    values: Mapping[str, Any], environ_: Mapping[str, str] | None = None
) -> JobsSettings:
    """Build validated settings from a ULTIMATE_JOBS dict and an environment."""
    environ_ = os.environ if environ_ is None else environ_
    if not isinstance(values, Mapping):
        raise ConfigurationError(
            "ULTIMATE_JOBS",
            values,
            "expected a dict of settings, e.g. {'LEASE': '30s'}",
        )
    for old, new in RENAMED.items():  # loud: an old name would be ignored otherwise
        for key, source in ((old, values), (ENV_PREFIX + old, environ_)):
            if key in source:
                raise ConfigurationError(
                    key, source[key], f"renamed: set {key.replace(old, new)} instead"
                )
    if unknown := sorted(set(values) - SPECS.keys(), key=str):
        key = unknown[0]
        raise UnknownSetting(
            str(key), values[key], closest_setting(str(key)), sorted(SPECS)
        )
    merged: dict[str, Any] = dict(values)
    env = _reader(environ_)
    for name in SPECS:
        if ENV_PREFIX + name in environ_:
            merged[name] = _from_environment(env, name, environ_[ENV_PREFIX + name])
    cleaned = {key: _clean(key, value) for key, value in merged.items()}
    home = cleaned.get("DATABASE", JobsSettings.DATABASE)
    cleaned["ROUTES"] = _routes("QUEUES", merged.get("QUEUES"), home)
    result = JobsSettings(**cleaned)
    if result.heartbeat_seconds >= result.LEASE:
        raise ConfigurationError(
            "HEARTBEAT",
            merged.get("HEARTBEAT"),
            "the heartbeat must be shorter than LEASE",
        )
    if result.POLL_INTERVAL > result.IDLE_POLL_MAX:
        raise ConfigurationError(
            "POLL_INTERVAL",
            merged.get("POLL_INTERVAL"),
            "must not exceed IDLE_POLL_MAX",
        )
    return result


@functools.cache
def _loaded() -> JobsSettings:
    return load_settings(getattr(settings, "ULTIMATE_JOBS", {}))


# Q1: the alias an operator surface reads and moves jobs on (``jobs --database``).
_READING: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ultimate_jobs_reading", default=None
)


def get_settings() -> JobsSettings:
    """Answer the effective settings, validated; cached until ULTIMATE_JOBS changes.
    Inside ``on_alias(alias)`` their DATABASE is that alias."""
    loaded = _loaded()
    alias = _READING.get()
    if alias is None or alias == loaded.DATABASE:
        return loaded
    return dataclasses.replace(loaded, DATABASE=alias)


@contextlib.contextmanager
def on_alias(alias: str) -> Iterator[None]:
    """Run the operator reads and verbs inside on ``alias``'s jobs tables (Q1): an
    alias of DATABASES that holds jobs tables (``aliases``), else X_CONFIGURATION."""
    if alias not in _loaded().aliases:
        raise ConfigurationError(
            "--database",
            alias,
            f"not an alias that holds jobs tables (known: {', '.join(_loaded().aliases)})",
        )
    token = _READING.set(alias)
    try:
        yield
    finally:
        _READING.reset(token)


def queue_alias(queue: str) -> str:
    """The alias a verb on ``queue`` acts on (Q1): the one ``on_alias`` chose, else
    the queue's route."""
    chosen = _READING.get()
    return chosen if chosen is not None else _loaded().database_for(queue)


def reading_aliases() -> tuple[str, ...]:
    """The aliases a read or verb over every queue spans (Q1): the one ``on_alias``
    chose, else every alias that holds jobs tables."""
    chosen = _READING.get()
    return (chosen,) if chosen is not None else _loaded().aliases


@receiver(setting_changed)
def _forget_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "ULTIMATE_JOBS":
        _loaded.cache_clear()
