"""Settings, in order: defaults, settings.ULTIMATE_JOBS, then ULTIMATE_JOBS_<KEY> variables.

No other module reads django.conf.settings or os.environ for these keys. Every variable
is read by django-environ through one schema, ``ENV_SCHEMA`` (a cast per key: durations
through the declarations' own duration parser, so ``ULTIMATE_JOBS_LEASE=2s`` means
what ``@job(timeout="2s")`` means), from the environment ``load_settings`` is given.
Durations accept what declarations accept (seconds, timedelta, "250ms", "5m"); every
value is checked here and a bad one is a ConfigurationError naming the key and the
value, which checks.py reports as ultimate_jobs.E002 at `manage.py check`.
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import environ
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from ultimate_jobs.declaration.queues import validate_queue
from ultimate_jobs.declaration.redaction import DEFAULT_PATTERNS
from ultimate_jobs.declaration.retention import check_retention
from ultimate_jobs.ground.bounds import (
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_MAX_INPUT_DEPTH,
)
from ultimate_jobs.ground.durations import parse_duration
from ultimate_jobs.ground.exceptions import (
    ConfigurationError,
    InvalidArgument,
    JobsError,
)

ENV_PREFIX = "ULTIMATE_JOBS_"
# Settings renamed since a release: the old name is refused, naming the new one.
RENAMED = {"HISTORY_AFTER": "ARCHIVE_AFTER"}  # issue 25: "history" is P6 only
OUTBOX_MODES = ("auto", "required", "off")
LOG_FORMATS = ("text", "json")


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobsSettings:
    """The effective configuration; durations are held in seconds."""

    DATABASE: str = "default"  # the alias that holds the jobs tables
    QUEUES: tuple[
        str, ...
    ] = ()  # served by a worker without --queues; () = every declared queue
    # Q1: the queues QUEUES routes to another alias than DATABASE (its mapping form,
    # {"reports": {"database": "jobs_b"}}); derived from QUEUES, not a key of its own.
    ROUTES: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata={"derived": True}
    )
    CONCURRENCY: int = 8  # handler threads per worker process
    # Connections a worker process's handler threads share for what their jobs write
    # (steps, retries, failures, slot releases); at most CONCURRENCY are opened.
    POOL_SIZE: int = 4
    POLL_INTERVAL: float = 0.25  # seconds between claims while there is work
    IDLE_POLL_MAX: float = (
        2.0  # ceiling (seconds) of the idle poll backoff without a proven wake
    )
    WOKEN_IDLE_POLL_MAX: float = 5.0  # the ceiling once LISTEN/NOTIFY is proven to work
    LEASE: float = 30.0  # visibility timeout (seconds): a claim lapses unless renewed
    HEARTBEAT: float | None = None  # renewal period (seconds); None = a third of LEASE
    DRAIN_TIMEOUT: float = 25.0  # seconds a SIGTERM waits for in-flight jobs
    OUTBOX: str = "auto"  # "auto" | "required" | "off"
    RELAY_INTERVAL: float = 0.2  # seconds between outbox relay passes while busy
    SCHEDULER_TICK: float = 1.0  # seconds between scheduler rounds
    SCHEDULER_LEASE: float = 30.0  # leader lease TTL (seconds), renewed every third
    RETENTION: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    ENVIRONMENT: str = (
        "production"  # where this deployment runs (backfill environments)
    )
    APP_VERSION: str = ""  # the deployed app's version, stamped on each backfill pass
    WAKE: bool = True  # LISTEN/NOTIFY wake-up; False for transaction-pooling proxies
    # Prepare the named statements (once per connection). False behind a
    # transaction-pooling proxy that cannot hold prepared statements.
    PREPARED_STATEMENTS: bool = True
    LOG_FORMAT: str = "text"  # the worker commands' default log lines: "text" | "json"
    EVENT_RETENTION: float = 7 * 86400.0  # seconds a published event stays matchable
    OUTBOX_RETENTION: float = 7 * 86400.0  # seconds a published outbox row is kept
    PURGE_BATCH: int = 1000  # rows one purge statement deletes at most
    # Q2: how long a finished job stays in the hot table before the scheduler leader
    # moves it to the partitioned archive.
    ARCHIVE_AFTER: float = 60.0
    PURGE_MAX_BATCHES: int = 100  # statements per purge target per pass, at most
    MAX_INPUT_BYTES: int = DEFAULT_MAX_INPUT_BYTES  # an input's JSON, in bytes (B4)
    MAX_INPUT_DEPTH: int = DEFAULT_MAX_INPUT_DEPTH  # how deep an input may nest (B4)
    # Key patterns whose values every surface shows as "[redacted]" (B5): a key
    # matches when it contains a pattern, ignoring case.
    REDACT: tuple[str, ...] = DEFAULT_PATTERNS
    # Networks (CIDR) webhook deliveries may reach although they are not public (B6).
    WEBHOOK_ALLOWED_NETWORKS: tuple[str, ...] = ()
    # Log records a body writes through run.logger kept per attempt (0: none kept).
    RUN_LOG_MAX_ENTRIES: int = 200
    # The JSON a store_result=True body may return, in bytes (P8); larger fails the job.
    MAX_RESULT_BYTES: int = 64 * 1024
    # The modules of every installed app imported at start-up to declare their jobs and
    # tasks: ``jobs`` and the ``tasks`` of Celery, Procrastinate and django.tasks habits.
    AUTODISCOVER: tuple[str, ...] = ("jobs", "tasks")

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


_DURATIONS = (
    "POLL_INTERVAL",
    "IDLE_POLL_MAX",
    "WOKEN_IDLE_POLL_MAX",
    "LEASE",
    "HEARTBEAT",
    "DRAIN_TIMEOUT",
    "RELAY_INTERVAL",
    "SCHEDULER_TICK",
    "EVENT_RETENTION",
    "OUTBOX_RETENTION",
    "SCHEDULER_LEASE",
    "ARCHIVE_AFTER",
)


def _duration(key: str, value: object) -> float:
    try:
        return parse_duration(value, field=key)
    except JobsError as exc:
        raise ConfigurationError(
            key, value, "expected a positive duration: 2, '250ms', '5m'"
        ) from exc


def _whole(key: str, value: object, *, least: int) -> int:
    """A whole number of at least ``least`` (an int, or its digits in a string)."""
    expected = f"expected a whole number of at least {least}"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigurationError(key, value, expected)
    try:
        number = int(value)
    except ValueError:
        raise ConfigurationError(key, value, expected) from None
    if number < least:
        raise ConfigurationError(key, value, expected)
    return number


def setting_names() -> list[str]:
    """The keys a user sets (ULTIMATE_JOBS, ULTIMATE_JOBS_<KEY>): every field but the
    derived ones."""
    return [
        field.name
        for field in dataclasses.fields(JobsSettings)
        if not field.metadata.get("derived")
    ]


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


def _bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {
        "1",
        "true",
        "yes",
        "on",
        "0",
        "false",
        "no",
        "off",
    }:
        return value.lower() in {"1", "true", "yes", "on"}
    raise ConfigurationError(key, value, "expected true or false")


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


def _module_names(key: str, value: object) -> tuple[str, ...]:
    names = _strings(key, value)
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise ConfigurationError(
                key, value, f"{name!r} is not a module name like 'jobs' or 'tasks'"
            )
    return names


def _clean(key: str, value: object) -> Any:  # noqa: C901 - one branch per kind of key
    if key in _DURATIONS:
        return None if (key == "HEARTBEAT" and value is None) else _duration(key, value)
    if key in {
        "CONCURRENCY",
        "POOL_SIZE",
        "PURGE_BATCH",
        "PURGE_MAX_BATCHES",
        "MAX_INPUT_BYTES",
        "MAX_INPUT_DEPTH",
        "MAX_RESULT_BYTES",
    }:
        return _whole(key, value, least=1)
    if key == "REDACT":
        return _patterns(key, value)
    if key == "WEBHOOK_ALLOWED_NETWORKS":
        return _networks(key, value)
    if key == "AUTODISCOVER":
        return _module_names(key, value)
    if key == "RUN_LOG_MAX_ENTRIES":  # 0 keeps no run logs
        return _whole(key, value, least=0)
    if key == "QUEUES":
        return _queues(key, value)
    if key == "OUTBOX":
        if value not in OUTBOX_MODES:
            raise ConfigurationError(
                key, value, f"expected one of {', '.join(OUTBOX_MODES)}"
            )
        return value
    if key in {"WAKE", "PREPARED_STATEMENTS"}:
        return _bool(key, value)
    if key == "LOG_FORMAT":
        if value not in LOG_FORMATS:
            raise ConfigurationError(
                key, value, f"expected one of {', '.join(LOG_FORMATS)}"
            )
        return value
    if key in {"DATABASE", "ENVIRONMENT"}:
        if not isinstance(value, str) or not value:
            raise ConfigurationError(key, value, "expected a non-empty string")
        return value
    if key == "APP_VERSION":
        if not isinstance(value, str) or len(value) > 200:
            raise ConfigurationError(
                key, value, "expected a string of at most 200 characters"
            )
        return value
    if key == "RETENTION":
        return _retention(key, value)
    raise ConfigurationError(
        key, value, "unknown key"
    )  # pragma: no cover - guarded by caller


def _env_duration(value: str) -> float:
    """A duration from a variable: a number of seconds, or "250ms", "5m", "3d"."""
    try:
        seconds: object = float(value)
    except ValueError:
        seconds = value
    return parse_duration(seconds, field="environment")


def _env_queues(value: str) -> Any:
    """QUEUES from a variable: names separated by commas, or Q1's mapping as JSON
    ('{"reports": {"database": "jobs_b"}}')."""
    if value.lstrip().startswith("{"):
        return json.loads(value)
    return value.split(",")


def _env_bool(value: str) -> bool:
    """Strict: a word that is not a boolean is an error, never False."""
    words = {"1": True, "true": True, "yes": True, "on": True}
    words |= {"0": False, "false": False, "no": False, "off": False}
    if value.strip().lower() not in words:
        raise ValueError(f"{value!r} is not true or false")
    return words[value.strip().lower()]


# The cast of every ULTIMATE_JOBS_<KEY> variable (django-environ's scheme): one entry
# per setting, checked by a test. The values then pass the same checks as settings.
ENV_SCHEMA: dict[str, Callable[[str], Any]] = {
    **dict.fromkeys(_DURATIONS, _env_duration),
    **dict.fromkeys(
        (
            "CONCURRENCY",
            "POOL_SIZE",
            "PURGE_BATCH",
            "PURGE_MAX_BATCHES",
            "MAX_INPUT_BYTES",
            "MAX_INPUT_DEPTH",
            "MAX_RESULT_BYTES",
            "RUN_LOG_MAX_ENTRIES",
        ),
        int,
    ),
    "QUEUES": _env_queues,
    **dict.fromkeys(("REDACT", "WEBHOOK_ALLOWED_NETWORKS", "AUTODISCOVER"), list),
    **dict.fromkeys(("WAKE", "PREPARED_STATEMENTS"), _env_bool),
    **dict.fromkeys(
        ("DATABASE", "OUTBOX", "ENVIRONMENT", "APP_VERSION", "LOG_FORMAT"), str
    ),
    "RETENTION": json.loads,
}
_ENV_EXAMPLES = {
    json.loads: 'JSON, e.g. \'{"done": {"days": 1}}\'',
    _env_queues: 'names like "mail,reports" or JSON like \'{"reports": {"database": "b"}}\'',
    int: "a whole number",
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
            close = difflib.get_close_matches(key.upper(), known, n=1, cutoff=0.6)
            found.append((name, ENV_PREFIX + close[0] if close else ""))
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
    fields = set(setting_names())
    if unknown := sorted(set(values) - fields):
        raise ConfigurationError(
            unknown[0],
            values[unknown[0]],
            f"unknown ULTIMATE_JOBS key (known: {', '.join(sorted(fields))})",
        )
    merged: dict[str, Any] = dict(values)
    env = _reader(environ_)
    for name in fields:
        if ENV_PREFIX + name in environ_:
            merged[name] = _from_environment(env, name, environ_[ENV_PREFIX + name])
    cleaned = {key: _clean(key, value) for key, value in merged.items()}
    home = cleaned.get("DATABASE", JobsSettings.DATABASE)
    cleaned["ROUTES"] = _routes("QUEUES", merged.get("QUEUES"), home)
    result = JobsSettings(**cleaned)
    if result.LEASE < 1:
        raise ConfigurationError(
            "LEASE", merged.get("LEASE"), "the lease is at least 1 second"
        )
    if result.heartbeat_seconds >= result.LEASE:
        raise ConfigurationError(
            "HEARTBEAT",
            merged.get("HEARTBEAT"),
            "the heartbeat must be shorter than LEASE",
        )
    if result.SCHEDULER_LEASE < 1:
        raise ConfigurationError(
            "SCHEDULER_LEASE",
            merged.get("SCHEDULER_LEASE"),
            "the scheduler lease is at least 1 second",
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
