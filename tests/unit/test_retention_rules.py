"""Retention rules (F6) and purge declarations (F3), without a database: the defaults,
the RETENTION setting checked like a declaration, the statements' parameters."""

from __future__ import annotations

import pytest

from ultimate_jobs import (
    NO_TENANT,
    ConfigurationError,
    JobDeclarationInvalid,
    Registry,
    job,
    purge,
    registry,
)
from ultimate_jobs.conf import load_settings
from ultimate_jobs.retention.jobs import DAY, Rule, default_rules, plan, rules_for
from ultimate_jobs.retention.purge import Target


def test_the_defaults_keep_done_a_day_cancelled_a_week_failed_and_dead_a_month():
    rules = default_rules(load_settings({}))
    assert rules == {
        "done": Rule(days=1.0),
        "failed": Rule(days=30.0),
        "dead": Rule(days=30.0),
        "cancelled": Rule(days=7.0),
    }


def test_the_retention_setting_replaces_the_default_of_each_state_it_names():
    settings = load_settings(
        {"RETENTION": {"done": {"last": 100}, "cancelled": False, "dead": {"days": 90}}}
    )
    rules = default_rules(settings)
    assert rules["done"] == Rule(last=100)  # no age limit left: replaced whole
    assert rules["cancelled"] == Rule(days=0.0)
    assert rules["cancelled"].describe() is False
    assert rules["dead"] == Rule(days=90.0)
    assert rules["failed"] == Rule(days=30.0)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ([("done", 1)], "expected a mapping"),
        ({"archived": {"days": 1}}, "RETENTION.archived"),
        ({"done": {"days": -1}}, "RETENTION.done.days=-1"),
        ({"done": {"last": 0}}, "RETENTION.done.last=0"),
        ({"done": {"weeks": 1}}, "RETENTION.done="),
        ({"done": True}, "RETENTION.done=True"),
    ],
)
def test_a_bad_retention_setting_is_a_configuration_error_naming_it(value, named):
    with pytest.raises(ConfigurationError) as refused:
        load_settings({"RETENTION": value})
    assert refused.value.key == "RETENTION"
    assert named in str(refused.value)


def test_retention_and_the_purge_budget_from_the_environment():
    settings = load_settings(
        {},
        {
            "ULTIMATE_JOBS_RETENTION": '{"done": {"days": 2}, "dead": false}',
            "ULTIMATE_JOBS_PURGE_BATCH": "500",
            "ULTIMATE_JOBS_PURGE_MAX_BATCHES": "20",
            "ULTIMATE_JOBS_OUTBOX_RETENTION": "3d",
        },
    )
    assert settings.RETENTION == {"done": {"days": 2}, "dead": False}
    assert (settings.PURGE_BATCH, settings.PURGE_MAX_BATCHES) == (500, 20)
    assert settings.OUTBOX_RETENTION == 3 * DAY
    for key in ("PURGE_BATCH", "PURGE_MAX_BATCHES"):
        with pytest.raises(ConfigurationError, match=key):
            load_settings({key: 0})


def test_a_declaration_beats_the_setting_and_undeclared_names_keep_the_defaults():
    jobs = Registry()

    def body(run):
        """Declared for its retention only."""

    handle = job(
        name="r.declared",
        idempotency_key=lambda p: "k",
        tenant=NO_TENANT,
        retention={"done": {"last": 7}, "dead": {"days": 3, "last": 2}},
    )(body)
    registry.unregister(handle.name)  # kept in a registry of its own
    jobs.register(handle)
    defaults = default_rules(load_settings({"RETENTION": {"done": {"days": 2}}}))
    declared = rules_for("r.declared", jobs=jobs, defaults=defaults)
    assert declared["done"] == Rule(last=7)
    assert declared["dead"] == Rule(days=3.0, last=2)
    assert declared["failed"] == Rule(days=30.0)
    assert rules_for("r.renamed", jobs=jobs, defaults=defaults)["done"] == Rule(
        days=2.0
    )
    statements = plan(["r.declared", "r.renamed"], jobs=jobs, defaults=defaults)
    # every days rule, of every name, in one statement's arrays
    assert list(
        zip(statements.names, statements.states, statements.keep_seconds, strict=True)
    ) == [
        ("r.declared", "failed", 30 * DAY),
        ("r.declared", "dead", 3 * DAY),
        ("r.declared", "cancelled", 7 * DAY),
        ("r.renamed", "done", 2 * DAY),
        ("r.renamed", "failed", 30 * DAY),
        ("r.renamed", "dead", 30 * DAY),
        ("r.renamed", "cancelled", 7 * DAY),
    ]
    # each last rule on its own (name, state)
    assert statements.last == [("r.declared", "done", 7), ("r.declared", "dead", 2)]


def test_purge_is_a_job_keyed_by_its_name_and_refuses_a_captured_list():
    sweep = purge("r.sweep", lambda: [Target("t", lambda now: 0)])
    try:
        assert registry.get("r.sweep") is sweep
        described = sweep.describe()
        assert (described["name"], described["tenant"], described["input"]) == (
            "r.sweep",
            "none",
            {},
        )
        assert sweep.definition.idempotency_key({}) == "r.sweep"
        # the same purge declared again in the same module is one registration
        assert purge("r.sweep", list) is sweep
    finally:
        registry.unregister("r.sweep")
    with pytest.raises(JobDeclarationInvalid, match="targets"):
        purge("r.eager", [Target("t", lambda now: 0)])  # type: ignore[arg-type]
    with pytest.raises(JobDeclarationInvalid, match="name"):
        purge("", list)
    assert "r.eager" not in registry
