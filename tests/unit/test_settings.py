"""Settings (T): defaults, settings.ULTIMATE_JOBS, ULTIMATE_JOBS_* variables, checks."""

from __future__ import annotations

import pytest

from ultimate_jobs import ConfigurationError
from ultimate_jobs.checks import check_settings
from ultimate_jobs.conf import get_settings, load_settings


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
        ({"LEASE": "0.5s"}, {}, "LEASE"),
        ({}, {"ULTIMATE_JOBS_LEASE": "forever"}, "LEASE"),
        ({"OUTBOX": "sometimes"}, {}, "OUTBOX"),
        ({"QUEUES": ["UPPER"]}, {}, "QUEUES"),
        ({"HEARTBEAT": "40s"}, {}, "HEARTBEAT"),
        ({"WAKE": "perhaps"}, {}, "WAKE"),
        ({"ENVIRONMENT": ""}, {}, "ENVIRONMENT"),
        ({"APP_VERSION": 3}, {}, "APP_VERSION"),
        ({}, {"ULTIMATE_JOBS_APP_VERSION": "v" * 201}, "APP_VERSION"),
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
