"""Settings declared once (T, issue 25 item 5; issue 31 "bounds on every size"; issue 30
item 8): each field carries its kind, bounds and doc; the cleaning, ENV_SCHEMA, the
duration list and docs/settings.md derive from them; every count and size has an upper
bound; a misspelt key or settings name says what was meant."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import REPO
from ultimate_jobs import ConfigurationError, UnknownSetting
from ultimate_jobs.checks import check_setting_names, check_settings
from ultimate_jobs.conf import (
    _DURATIONS,
    ENV_SCHEMA,
    MAX_DEPTH,
    SPECS,
    JobsSettings,
    defaults,
    load_settings,
    misnamed_settings,
    unknown_variables,
)
from ultimate_jobs.declaration import payload


def settings_doc():
    spec = importlib.util.spec_from_file_location(
        "settings_doc", REPO / "scripts" / "settings_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_doc_table_is_the_fields_table():
    """docs/settings.md's table is what scripts/settings_doc.py renders from the
    fields: a new key, a changed default, bound or doc fails here until it is run."""
    doc = settings_doc()
    page = (REPO / "docs" / "settings.md").read_text()
    assert doc.written(page) == page, "run: .venv/bin/python scripts/settings_doc.py"
    table = page.split(doc.BEGIN)[1].split(doc.END)[0]
    for name in SPECS:
        assert f"| `{name}` |" in table


def test_the_doc_check_fails_on_a_stale_table(tmp_path, monkeypatch):
    doc = settings_doc()
    page = (REPO / "docs" / "settings.md").read_text()
    stale = tmp_path / "settings.md"
    stale.write_text(page.replace("| `CONCURRENCY` | `8` |", "| `CONCURRENCY` | `9` |"))
    monkeypatch.setattr(doc, "PAGE", stale)
    assert doc.main(["--check"]) == 1
    assert doc.main([]) == 0
    assert stale.read_text() == page


def test_every_key_declares_its_kind_doc_and_bounds():
    assert set(SPECS) == {
        name for name in JobsSettings.__dataclass_fields__ if name != "ROUTES"
    }
    for name, spec in SPECS.items():
        assert spec.doc and "\n" not in spec.doc, name
        if spec.kind in ("choice", "flag"):
            continue  # bounded by their values
        assert spec.least is not None and spec.most is not None, name
        assert spec.least <= spec.most, name
        default = defaults()[name]
        if spec.kind in ("count", "duration") and default is not None:
            assert spec.least <= default <= spec.most, name


def test_the_schema_and_the_durations_derive_from_the_kinds():
    assert _DURATIONS == tuple(n for n, s in SPECS.items() if s.kind == "duration")
    assert "HEARTBEAT" in _DURATIONS and "LEASE" in _DURATIONS
    assert ENV_SCHEMA["CONCURRENCY"] is ENV_SCHEMA["POOL_SIZE"]
    assert ENV_SCHEMA["RETENTION"] is json.loads
    assert set(ENV_SCHEMA) == set(SPECS)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("CONCURRENCY", 100_000),
        ("CONCURRENCY", 257),
        ("POOL_SIZE", 257),
        ("MAX_INPUT_DEPTH", MAX_DEPTH + 1),
        ("MAX_INPUT_DEPTH", 5000),
        ("MAX_INPUT_BYTES", 2**40),
        ("MAX_RESULT_BYTES", 2**40),
        ("PURGE_BATCH", 100_001),
        ("PURGE_MAX_BATCHES", 10_001),
        ("RUN_LOG_MAX_ENTRIES", 10_001),
        ("RUN_LOG_MAX_ENTRIES", -1),
        ("LEASE", "2d"),
        ("POLL_INTERVAL", "2h"),
        ("DATABASE", "x" * 201),
        ("ENVIRONMENT", "prod\x00"),
        ("REDACT", [f"p{n}" for n in range(201)]),
        ("QUEUES", [f"q{n}" for n in range(1001)]),
    ],
)
def test_every_count_and_size_has_an_upper_bound(key, value):
    """Issue 31: a large value stops at the settings, naming the key and the value."""
    with pytest.raises(ConfigurationError) as refused:
        load_settings({key: value}, {})
    assert (refused.value.key, refused.value.value) == (key, value)
    assert refused.value.code == "X_CONFIGURATION"


def test_the_bounds_themselves_are_accepted():
    edge = load_settings(
        {
            "CONCURRENCY": 256,
            "POOL_SIZE": 256,
            "MAX_INPUT_DEPTH": MAX_DEPTH,
            "RUN_LOG_MAX_ENTRIES": 0,
            "LEASE": "1d",
        },
        {"ULTIMATE_JOBS_PURGE_BATCH": "100000"},
    )
    assert (edge.CONCURRENCY, edge.POOL_SIZE, edge.MAX_INPUT_DEPTH) == (
        256,
        256,
        MAX_DEPTH,
    )
    assert (edge.PURGE_BATCH, edge.LEASE) == (100_000, 86400.0)
    for variable in ("257", "\u0663", "1e3"):  # too many; an Arabic-Indic 3; a float
        with pytest.raises(ConfigurationError) as refused:
            load_settings({}, {"ULTIMATE_JOBS_CONCURRENCY": variable})
        assert (refused.value.key, str(refused.value.value)) == (
            "CONCURRENCY",
            variable,
        )


def test_the_deepest_input_the_bound_allows_never_reaches_recursion():
    """Issue 31: MAX_INPUT_DEPTH had no upper bound, and a large one let an input reach
    RecursionError. At the bound, an input as deep as allowed encodes and decodes even
    from a stack already hundreds of frames deep (a body's, under Django)."""
    value: object = "leaf"
    for _ in range(MAX_DEPTH - 1):  # the input object is level 1
        value = [value]
    signature = payload.Signature((), accepts_any=True)

    def deep(frames: int) -> dict[str, object]:
        if frames:
            return deep(frames - 1)
        stored = payload.encode("j", signature, {"data": value}, max_depth=MAX_DEPTH)
        return payload.decode("j", signature, stored, max_depth=MAX_DEPTH)

    assert deep(500) == {"data": value}


def test_an_unknown_key_says_which_one_was_meant(settings):
    """Issue 30 item 8: ULTIMATE_JOBS = {"CONCURENCY": 16} names CONCURRENCY."""
    with pytest.raises(UnknownSetting) as refused:
        load_settings({"CONCURENCY": 16}, {})
    assert (refused.value.key, refused.value.closest) == ("CONCURENCY", "CONCURRENCY")
    assert "did you mean 'CONCURRENCY'?" in str(refused.value)
    # A renamed key is refused by load_settings naming the new one (test_settings.py);
    # the W001 check of variables names it too.
    assert unknown_variables({"ULTIMATE_JOBS_HISTORY_AFTER": "1m"}) == [
        ("ULTIMATE_JOBS_HISTORY_AFTER", "ULTIMATE_JOBS_ARCHIVE_AFTER")
    ]
    with pytest.raises(UnknownSetting) as nothing_close:
        load_settings({"ZZZ": 1}, {})
    assert nothing_close.value.closest == ""
    settings.ULTIMATE_JOBS = {"LEAS": "30s"}
    [error] = check_settings()
    assert error.id == "ultimate_jobs.E001"
    assert "did you mean 'LEASE'?" in error.msg


def test_a_settings_name_near_ultimate_jobs_is_a_loud_warning(settings):
    """Issue 30 item 8: ULTIMATE_JOB = {...} was silent."""
    assert misnamed_settings(
        [
            "ULTIMATE_JOBS",
            "ULTIMATE_JOB",
            "ULTIMATEJOBS",
            "ULTIMATE_JOBS_LEASE",
            "DEBUG",
            "ULTIMATE_JOBS_CONCURENCY",
            "ULTIMATE_JOBS_WHATEVER",
            "ULTIMATELY",
        ]
    ) == [
        ("ULTIMATEJOBS", "ULTIMATE_JOBS"),
        ("ULTIMATE_JOB", "ULTIMATE_JOBS"),
        ("ULTIMATE_JOBS_CONCURENCY", "ULTIMATE_JOBS = {'CONCURRENCY': ...}"),
        ("ULTIMATE_JOBS_LEASE", "ULTIMATE_JOBS = {'LEASE': ...}"),
        ("ULTIMATE_JOBS_WHATEVER", ""),
    ]
    assert check_setting_names() == []
    settings.ULTIMATE_JOB = {"CONCURRENCY": 16}
    [warning] = check_setting_names()
    assert warning.id == "ultimate_jobs.W005"
    assert (
        "ULTIMATE_JOB " in warning.msg and "did you mean ULTIMATE_JOBS?" in warning.msg
    )


def test_a_count_or_size_cannot_be_declared_without_both_bounds():
    from ultimate_jobs.conf import Setting

    for kind in ("count", "duration", "text", "queues"):
        with pytest.raises(TypeError):
            Setting(kind=kind, doc="d", least=1)
        with pytest.raises(TypeError):
            Setting(kind=kind, doc="d", most=1)
    assert Setting(kind="flag", doc="d").least is None


@pytest.mark.parametrize("written", ["\u0663s", "\u0663", "1_0", "\uff15s"])
def test_a_duration_reads_ascii_digits_only(written):
    """B4: int(), float() and \\d also read other scripts' digits and underscores."""
    with pytest.raises(ConfigurationError) as refused:
        load_settings({}, {"ULTIMATE_JOBS_LEASE": written})
    assert refused.value.key == "LEASE"
    assert load_settings({}, {"ULTIMATE_JOBS_LEASE": "45"}).LEASE == 45.0
    assert load_settings({}, {"ULTIMATE_JOBS_LEASE": "2.5"}).LEASE == 2.5
    assert load_settings({}, {"ULTIMATE_JOBS_LEASE": "1e2"}).LEASE == 100.0
