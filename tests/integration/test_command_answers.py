"""What the operator commands answer a newcomer (issue 16, item 8): ``db_backfill``
says "no backfills declared" instead of nothing, every option of the app's commands has
help text, and ``jobs pause --json`` answers the shape docs/operations.md documents
(P3, F2)."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator

import pytest
from django.core.management import call_command, load_command_class

from tests.testapp.models import Record
from ultimate_jobs import backfill, registered_backfills, registry

pytestmark = pytest.mark.django_db

COMMANDS = [
    "db_backfill",
    "jobs",
    "jobs_mcp",
    "jobs_relay",
    "jobs_scheduler",
    "jobs_sql",
    "jobs_worker",
]


def run(command: str, *args: str) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command(command, *args, stdout=out)
    except SystemExit as exc:
        return out.getvalue(), int(exc.code or 0)
    return out.getvalue(), 0


@pytest.fixture
def no_backfills() -> Iterator[None]:
    """Hide the backfills the test app declares, as in a project that has none."""
    hidden = [registry.get(b.name) for b in registered_backfills()]
    for handle in hidden:
        registry.unregister(handle.name)
    try:
        yield
    finally:
        for handle in hidden:
            registry.register(handle)


@pytest.mark.usefixtures("no_backfills")
@pytest.mark.parametrize(
    "args", [(), ("--list",), ("--pending",), ("--all",), ("--all", "--write")]
)
def test_db_backfill_says_when_no_backfill_is_declared(args):
    assert run("db_backfill", *args) == ("no backfills declared\n", 0)
    assert run("db_backfill", *args, "--json") == ("[]\n", 0)


@pytest.mark.usefixtures("no_backfills", "clean_registry")
def test_db_backfill_list_says_when_no_pass_is_recorded():
    backfill(
        "tests.answers.sweep", lambda: Record.objects.all(), lambda rows, token: None
    )
    assert run("db_backfill", "--list") == ("no passes recorded\n", 0)
    assert run("db_backfill", "--list", "--json") == ("[]\n", 0)
    assert run("db_backfill") == ("pending   tests.answers.sweep\n", 0)


def options_without_help(parser: argparse.ArgumentParser, where: str) -> list[str]:
    missing = []
    for action in parser._actions:
        name = f"{where} {'/'.join(action.option_strings) or action.dest}"
        if not action.help or action.help == argparse.SUPPRESS:
            missing.append(name)
        if isinstance(action, argparse._SubParsersAction):
            missing += [
                f"{where} {verb.dest}"
                for verb in action._choices_actions
                if not verb.help
            ]
            for verb, sub in action.choices.items():
                missing += options_without_help(sub, f"{where} {verb}")
    return missing


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_the_commands_has_help(command):
    parser = load_command_class("ultimate_jobs", command).create_parser(
        "manage.py", command
    )
    assert options_without_help(parser, command) == []


def test_jobs_pause_and_resume_answer_the_documented_json():
    """docs/operations.md: pause/resume answer {"queue", "paused", "was_paused"}."""

    def answer(*args: str) -> dict[str, object]:
        out, status = run("jobs", *args, "--json")
        assert status == 0
        return json.loads(out)

    paused = {"queue": "mail", "paused": True}
    assert answer("pause", "mail") == {**paused, "was_paused": False}
    assert answer("pause", "mail") == {**paused, "was_paused": True}
    resumed = {"queue": "mail", "paused": False}
    assert answer("resume", "mail") == {**resumed, "was_paused": True}
    assert answer("resume", "mail") == {**resumed, "was_paused": False}
