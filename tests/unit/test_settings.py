"""Settings (T): defaults, settings.ULTIMATE_JOBS, ULTIMATE_JOBS_* variables, checks."""

from __future__ import annotations

import pytest

from ultimate_jobs import ConfigurationError
from ultimate_jobs.checks import check_settings
from ultimate_jobs.conf import get_settings, load_settings, setting_names


def test_defaults():
    s = load_settings({}, {})
    assert (s.CONCURRENCY, s.POLL_INTERVAL, s.IDLE_POLL_MAX, s.LEASE) == (
        8,
        0.25,
        2.0,
        30.0,
    )
    assert s.heartbeat_seconds == 10.0
    assert s.OUTBOX == "auto"
    assert s.DATABASE == "default"
    assert s.POOL_SIZE == 4  # docs/settings.md, docs/scaling.md
    assert s.PREFETCH is None  # CONCURRENCY, at most 16 (runtime/worker.py)


def test_settings_then_environment_win_in_order():
    s = load_settings(
        {"CONCURRENCY": 4, "LEASE": "10s", "QUEUES": ["a", "b"]},
        {"ULTIMATE_JOBS_CONCURRENCY": "16", "ULTIMATE_JOBS_QUEUES": "c, d"},
    )
    assert s.CONCURRENCY == 16
    assert s.LEASE == 10.0
    assert s.QUEUES == ("c", "d")


@pytest.mark.parametrize(
    ("values", "env", "key"),
    [
        ({"CONCURENCY": 4}, {}, "CONCURENCY"),
        ({"CONCURRENCY": 0}, {}, "CONCURRENCY"),
        ({}, {"ULTIMATE_JOBS_CONCURRENCY": "many"}, "CONCURRENCY"),
        ({"POOL_SIZE": 0}, {}, "POOL_SIZE"),
        ({}, {"ULTIMATE_JOBS_POOL_SIZE": "lots"}, "POOL_SIZE"),
        ({"PREFETCH": -1}, {}, "PREFETCH"),  # issue 26: 0 turns it off, never less
        ({"PREFETCH": 257}, {}, "PREFETCH"),  # past MAX_THREADS
        ({"PREFETCH": 2.5}, {}, "PREFETCH"),
        ({}, {"ULTIMATE_JOBS_PREFETCH": "some"}, "PREFETCH"),
        ({"LEASE": "0.5s"}, {}, "LEASE"),
        ({}, {"ULTIMATE_JOBS_LEASE": "forever"}, "LEASE"),
        ({"OUTBOX": "sometimes"}, {}, "OUTBOX"),
        ({"QUEUES": ["UPPER"]}, {}, "QUEUES"),
        ({"HEARTBEAT": "40s"}, {}, "HEARTBEAT"),
        ({"WAKE": "perhaps"}, {}, "WAKE"),
        ({"ENVIRONMENT": ""}, {}, "ENVIRONMENT"),
        ({"APP_VERSION": 3}, {}, "APP_VERSION"),
        ({}, {"ULTIMATE_JOBS_APP_VERSION": "v" * 201}, "APP_VERSION"),
        ({"WEBHOOK_SECRET_PATTERNS": ["/in/(unclosed"]}, {}, "WEBHOOK_SECRET_PATTERNS"),
    ],
)
def test_bad_values_name_the_key_and_the_value(values, env, key):
    with pytest.raises(ConfigurationError) as info:
        load_settings(values, env)
    assert info.value.key == key
    assert key in str(info.value)


def test_environment_and_app_version_feed_the_backfill_ledger():
    assert (load_settings({}, {}).ENVIRONMENT, load_settings({}, {}).APP_VERSION) == (
        "production",
        "",
    )
    s = load_settings(
        {"ENVIRONMENT": "staging"}, {"ULTIMATE_JOBS_APP_VERSION": "2026.11.3"}
    )
    assert (s.ENVIRONMENT, s.APP_VERSION) == ("staging", "2026.11.3")


def test_the_lease_accepts_duration_strings_down_to_one_second():
    assert load_settings({}, {"ULTIMATE_JOBS_LEASE": "2s"}).LEASE == 2.0
    assert load_settings({"LEASE": 1}, {}).LEASE == 1.0


def test_system_check_reports_unknown_keys_and_bad_values(settings):
    settings.ULTIMATE_JOBS = {"CONCURENCY": 4}
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E001"
    assert "CONCURENCY" in error.msg
    settings.ULTIMATE_JOBS = {"LEASE": "-1s"}
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E002"
    assert "'-1s'" in error.msg


def test_system_check_refuses_a_database_that_is_not_postgresql(settings, monkeypatch):
    from django.conf import settings as django_settings

    lite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    monkeypatch.setitem(django_settings.DATABASES, "lite", lite)
    settings.ULTIMATE_JOBS = {"DATABASE": "lite"}
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E003"
    assert "PostgreSQL" in error.msg


def test_get_settings_follows_setting_changes(settings):
    settings.ULTIMATE_JOBS = {"CONCURRENCY": 3}
    assert get_settings().CONCURRENCY == 3
    settings.ULTIMATE_JOBS = {}
    assert get_settings().CONCURRENCY == 8


def test_retention_is_read_from_the_injected_environment(monkeypatch):
    """T: every key, RETENTION included, is read from the environment it is given."""
    monkeypatch.delenv("ULTIMATE_JOBS_RETENTION", raising=False)
    env = {"ULTIMATE_JOBS_RETENTION": '{"done": {"days": 2}}'}
    assert load_settings({}, env).RETENTION == {"done": {"days": 2}}
    monkeypatch.setenv("ULTIMATE_JOBS_RETENTION", '{"dead": {"days": 9}}')
    assert load_settings({}, {}).RETENTION == {}


def test_every_key_is_read_from_the_environment_through_django_environ():
    """T: one schema, a django-environ cast per key; an injected environment sets
    every setting, each to its type."""
    from ultimate_jobs.conf import ENV_SCHEMA, JobsSettings

    keys = set(setting_names())
    assert set(ENV_SCHEMA) == keys  # a new setting must say how it is read
    env = {
        "ULTIMATE_JOBS_DATABASE": "jobs",
        "ULTIMATE_JOBS_QUEUES": "mail,reports",
        "ULTIMATE_JOBS_CONCURRENCY": "16",
        "ULTIMATE_JOBS_PREFETCH": "0",
        "ULTIMATE_JOBS_POOL_SIZE": "6",
        "ULTIMATE_JOBS_POLL_INTERVAL": "100ms",
        "ULTIMATE_JOBS_IDLE_POLL_MAX": "3s",
        "ULTIMATE_JOBS_WOKEN_IDLE_POLL_MAX": "10s",
        "ULTIMATE_JOBS_LEASE": "2s",
        "ULTIMATE_JOBS_HEARTBEAT": "500ms",
        "ULTIMATE_JOBS_DRAIN_TIMEOUT": "1m",
        "ULTIMATE_JOBS_OUTBOX": "required",
        "ULTIMATE_JOBS_RELAY_INTERVAL": "50ms",
        "ULTIMATE_JOBS_SCHEDULER_TICK": "2",
        "ULTIMATE_JOBS_SCHEDULER_LEASE": "1m",
        "ULTIMATE_JOBS_RETENTION": '{"dead": {"days": 3}}',
        "ULTIMATE_JOBS_ENVIRONMENT": "staging",
        "ULTIMATE_JOBS_APP_VERSION": "1.2.3",
        "ULTIMATE_JOBS_WAKE": "off",
        "ULTIMATE_JOBS_PREPARED_STATEMENTS": "no",
        "ULTIMATE_JOBS_LOG_FORMAT": "json",
        "ULTIMATE_JOBS_EVENT_RETENTION": "1d",
        "ULTIMATE_JOBS_OUTBOX_RETENTION": "2d",
        "ULTIMATE_JOBS_ARCHIVE_AFTER": "10m",
        "ULTIMATE_JOBS_PURGE_BATCH": "500",
        "ULTIMATE_JOBS_PURGE_MAX_BATCHES": "7",
        "ULTIMATE_JOBS_MAX_INPUT_BYTES": "4096",
        "ULTIMATE_JOBS_MAX_INPUT_DEPTH": "8",
        "ULTIMATE_JOBS_REDACT": "Password,pin",
        "ULTIMATE_JOBS_WEBHOOK_ALLOWED_NETWORKS": "10.0.0.0/8,::1/128",
        "ULTIMATE_JOBS_WEBHOOK_SECRET_PATTERNS": '["/in/([^/]{2,})", "/k/(.+)"]',
        "ULTIMATE_JOBS_RUN_LOG_MAX_ENTRIES": "0",
        "ULTIMATE_JOBS_MAX_RESULT_BYTES": "1024",
        "ULTIMATE_JOBS_AUTODISCOVER": "jobs,workers.background",
    }
    assert {name.removeprefix("ULTIMATE_JOBS_") for name in env} == keys
    read = load_settings({"CONCURRENCY": 2, "LEASE": 30}, env)
    assert read == JobsSettings(
        DATABASE="jobs",
        QUEUES=("mail", "reports"),
        CONCURRENCY=16,
        PREFETCH=0,
        POOL_SIZE=6,
        POLL_INTERVAL=0.1,
        IDLE_POLL_MAX=3.0,
        WOKEN_IDLE_POLL_MAX=10.0,
        LEASE=2.0,
        HEARTBEAT=0.5,
        DRAIN_TIMEOUT=60.0,
        OUTBOX="required",
        RELAY_INTERVAL=0.05,
        SCHEDULER_TICK=2.0,
        SCHEDULER_LEASE=60.0,
        RETENTION={"dead": {"days": 3}},
        ENVIRONMENT="staging",
        APP_VERSION="1.2.3",
        WAKE=False,
        PREPARED_STATEMENTS=False,
        LOG_FORMAT="json",
        EVENT_RETENTION=86400.0,
        OUTBOX_RETENTION=172800.0,
        ARCHIVE_AFTER=600.0,
        PURGE_BATCH=500,
        PURGE_MAX_BATCHES=7,
        MAX_INPUT_BYTES=4096,
        MAX_INPUT_DEPTH=8,
        REDACT=("password", "pin"),
        WEBHOOK_ALLOWED_NETWORKS=("10.0.0.0/8", "::1/128"),
        WEBHOOK_SECRET_PATTERNS=("/in/([^/]{2,})", "/k/(.+)"),
        RUN_LOG_MAX_ENTRIES=0,
        MAX_RESULT_BYTES=1024,
        AUTODISCOVER=("jobs", "workers.background"),
    )


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("ULTIMATE_JOBS_WAKE", "treu", "not true or false"),
        ("ULTIMATE_JOBS_CONCURRENCY", "many", "a whole number"),
        ("ULTIMATE_JOBS_LEASE", "soon", "LEASE"),
        ("ULTIMATE_JOBS_RETENTION", "{done: 1}", "JSON"),
    ],
)
def test_a_bad_variable_names_itself_and_its_value(variable, value, says):
    with pytest.raises(ConfigurationError) as refused:
        load_settings({}, {variable: value})
    assert says in str(refused.value) and value in str(refused.value)


def test_queues_mapping_routes_queues_to_aliases():
    """Q1: QUEUES' mapping form routes a queue to a DATABASES alias; the names are
    still the queues a worker serves by default, and an unrouted queue stays on
    DATABASE."""
    s = load_settings(
        {"QUEUES": {"reports": {"database": "jobs_b"}, "mail": {}, "default": None}},
        {},
    )
    assert s.QUEUES == ("reports", "mail", "default")
    assert s.ROUTES == {"reports": "jobs_b"}
    assert s.database_for("reports") == "jobs_b"
    assert s.database_for("mail") == "default"
    assert s.database_for("never-configured") == "default"
    assert s.aliases == ("default", "jobs_b")
    assert s.queues_by_alias(["mail", "reports", "other"]) == {
        "default": ["mail", "other"],
        "jobs_b": ["reports"],
    }
    # A route to DATABASE itself is no route; the list form routes nothing.
    home = load_settings({"QUEUES": {"a": {"database": "default"}}}, {})
    assert (home.ROUTES, home.aliases) == ({}, ("default",))
    assert load_settings({"QUEUES": ["a"]}, {}).ROUTES == {}


@pytest.mark.parametrize(
    ("queues", "key", "value"),
    [
        (
            {"reports": {"database": "nowhere"}},
            "QUEUES['reports']['database']",
            "nowhere",
        ),
        ({"reports": {"database": 3}}, "QUEUES['reports']['database']", 3),
        (
            {"reports": {"databse": "jobs_b"}},
            "QUEUES['reports']",
            {"databse": "jobs_b"},
        ),
        ({"reports": "jobs_b"}, "QUEUES['reports']", "jobs_b"),
        (
            {"UPPER": {"database": "jobs_b"}},
            "QUEUES",
            {"UPPER": {"database": "jobs_b"}},
        ),
    ],
)
def test_queue_routes_refuse_unknown_aliases_and_keys(queues, key, value):
    """Q1: an unknown alias or route key is a coded ConfigurationError naming the key
    and the value."""
    with pytest.raises(ConfigurationError) as info:
        load_settings({"QUEUES": queues}, {})
    assert info.value.code == "X_CONFIGURATION"
    assert (info.value.key, info.value.value) == (key, value)
    assert "ROUTES" not in setting_names()


@pytest.mark.parametrize(
    ("values", "environ", "key"),
    [
        ({"HISTORY_AFTER": "10s"}, {}, "HISTORY_AFTER"),
        ({}, {"ULTIMATE_JOBS_HISTORY_AFTER": "10s"}, "ULTIMATE_JOBS_HISTORY_AFTER"),
    ],
)
def test_a_renamed_setting_is_refused_naming_its_new_name(values, environ, key):
    """Issue 25: HISTORY_AFTER is ARCHIVE_AFTER now; the old name, as a key or as a
    variable, is refused loudly rather than silently ignored."""
    with pytest.raises(ConfigurationError) as info:
        load_settings(values, environ)
    assert info.value.key == key
    assert "ARCHIVE_AFTER" in str(info.value)
    assert load_settings({}, {"ULTIMATE_JOBS_ARCHIVE_AFTER": "10s"}).ARCHIVE_AFTER == 10
