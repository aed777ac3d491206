"""The operator verbs as agent tools (P9): names, schemas, permissions, one call.

Each tool is a verb of ``manage.py jobs``: its arguments are that verb's options by
name (``--from-step`` is ``from_step``), read from the command's own parser, so the
two cannot drift; its answer is the verb's ``--json`` document (inputs redacted, B5).
A tool that changes anything needs the Django permission of the admin action that
does the same (``change_job``; ``delete_job`` to remove), checked for the user the
agent acts as; without it the call is refused in words and nothing changes. A change
is recorded with that user and ``mcp`` as the surface (the jobs' action history, P2).
Reads are bounded like the command's: a page holds at most 200 jobs, a bulk verb
moves at most 1,000.
"""

from __future__ import annotations

import argparse
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ultimate_jobs import api
from ultimate_jobs.api import reads
from ultimate_jobs.ground.exceptions import InvalidArgument
from ultimate_jobs.management.commands.jobs import Command as JobsCommand

logger = logging.getLogger(__name__)

VIEW = "ultimate_jobs.view_job"
CHANGE = "ultimate_jobs.change_job"
DELETE = "ultimate_jobs.delete_job"
SOURCE = "mcp"
MAX_TEXT = 1000  # any one string argument (a reason is cut to this by the verb too)


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: its verb, what it tells an agent, and the permission it needs."""

    name: str
    verb: str
    description: str
    permission: str  # VIEW for a read
    action: str  # the admin action it mirrors, for the refusal's words

    @property
    def changes(self) -> bool:
        return self.permission != VIEW


TOOLS: tuple[Tool, ...] = (
    Tool(
        "jobs_list",
        "list",
        "One page of jobs, newest first, with their state, attempt and queue. Filter "
        "by state (ready, delayed, running, suspended, done, failed, dead, cancelled), "
        "queue, name, tenant, key, id_prefix or created_from/created_to (ISO 8601). "
        "At most 200 jobs a page (limit, default 100); pass the answer's 'next' as "
        "'after' for older jobs. Start here to find what failed.",
        VIEW,
        "the job list",
    ),
    Tool(
        "jobs_show",
        "show",
        "One job in full: input (redacted), state, last error with traceback, every "
        "attempt, steps, logs and progress. 'id' is the job's UUID or its first 8+ "
        "hex digits. Use it to see why a job failed before retrying it.",
        VIEW,
        "the job page",
    ),
    Tool(
        "jobs_retry",
        "retry",
        "Requeue a finished job (done, failed, dead, cancelled) as a fresh run, by "
        "'id' (with 'from_step' to run that step and every later one again), or up "
        "to 1,000 jobs of a 'queue' in a 'state' (usually dead); call again while "
        "'remaining' is above 0. Needs the change_job permission.",
        CHANGE,
        "Retry",
    ),
    Tool(
        "jobs_cancel",
        "cancel",
        "Cancel a live job: a queued one at once, a running one at its next "
        "heartbeat. By 'id', or by 'name' and 'key' (its idempotency key). 'reason' "
        "is recorded. Needs the change_job permission.",
        CHANGE,
        "Cancel",
    ),
    Tool(
        "jobs_remove",
        "remove",
        "Delete a job that is not running (cancel a running one first). The removal "
        "is recorded; the job is gone. Needs the delete_job permission.",
        DELETE,
        "Remove",
    ),
    Tool(
        "jobs_promote",
        "promote",
        "Make a delayed (or suspended) job due now. Needs the change_job permission.",
        CHANGE,
        "Run now (promote)",
    ),
    Tool(
        "jobs_pause",
        "pause",
        "Pause a queue: workers stop claiming from it, enqueues still land. Answers "
        "whether it was paused already. Needs the change_job permission.",
        CHANGE,
        "Pause (queues page)",
    ),
    Tool(
        "jobs_resume",
        "resume",
        "Resume a paused queue; its workers are woken. Needs the change_job permission.",
        CHANGE,
        "Resume (queues page)",
    ),
    Tool(
        "jobs_bulk",
        "bulk",
        "Apply 'action' (retry, cancel, remove, promote) to at most 1,000 jobs in "
        "'state', narrowed by queue, name or tenant. Answers 'affected' and "
        "'remaining': call again while 'remaining' is above 0. Needs change_job "
        "(delete_job for remove).",
        CHANGE,
        "the bulk action",
    ),
    Tool(
        "jobs_workers",
        "workers",
        "The live workers: their queues, slots, the jobs in flight, last heartbeat.",
        VIEW,
        "the workers page",
    ),
    Tool(
        "jobs_stats",
        "stats",
        "Per queue: how many jobs in each state, and whether it is paused. Start "
        "here to see which queue is backed up.",
        VIEW,
        "the queues page",
    ),
    Tool(
        "jobs_manifest",
        "manifest",
        "Every job and cron task this deploy declares: queue, retry policy, input "
        "parameters, next run of each task.",
        VIEW,
        "the manifest page",
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}
_SKIPPED = {"help", "json", "actor"}


class ToolRefusedError(Exception):
    """The user lacks the permission a tool needs; nothing was done."""


@cache
def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = JobsCommand().create_parser("manage.py", "jobs")
    verbs: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            verbs = dict(action.choices)
    return parser, verbs


def _options(tool: Tool) -> list[argparse.Action]:
    top, verbs = _parsers()
    wanted = [a for a in verbs[tool.verb]._actions if a.dest not in _SKIPPED]
    wanted += [a for a in top._actions if a.dest == "database"]
    return wanted


def _property(action: argparse.Action) -> dict[str, Any]:
    if isinstance(action, argparse._StoreTrueAction):
        prop: dict[str, Any] = {"type": "boolean"}
    elif action.type is int:
        prop = {"type": "integer"}
        if action.dest == "limit":
            prop.update(minimum=1, maximum=reads.MAX_PAGE)
    else:
        prop = {"type": "string", "maxLength": MAX_TEXT}
    if action.choices is not None:
        prop["enum"] = list(action.choices)
    if action.help:
        prop["description"] = action.help
    if action.default is not None and action.default is not argparse.SUPPRESS:
        prop["default"] = action.default
    return prop


def _required(action: argparse.Action) -> bool:
    return action.required and action.nargs != "?"


def input_schema(tool: Tool) -> dict[str, Any]:
    """The tool's JSON schema: the verb's options by name, typed from its parser."""
    actions = _options(tool)
    return {
        "type": "object",
        "properties": {action.dest: _property(action) for action in actions},
        "required": [action.dest for action in actions if _required(action)],
        "additionalProperties": False,
    }


def _checked(tool: Tool, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The verb's options from the tool's arguments; a bad one is InvalidArgument
    naming the field and the value, before anything is read or changed."""
    given = dict(arguments or {})
    actions = {action.dest: action for action in _options(tool)}
    for field in given:
        if field not in actions:
            raise InvalidArgument(
                field,
                given[field],
                f"{tool.name} takes no such argument (it takes: "
                f"{', '.join(sorted(actions)) or 'none'})",
            )
    options: dict[str, Any] = {}
    for field, action in actions.items():
        value = given.get(field, action.default)
        if field not in given or value is None:
            if _required(action):
                raise InvalidArgument(field, None, f"{tool.name} requires it")
            options[field] = None if action.default is argparse.SUPPRESS else value
            continue
        kind = _property(action)["type"]
        if kind == "boolean" and not isinstance(value, bool):
            raise InvalidArgument(field, value, "true or false")
        if kind == "integer" and (
            isinstance(value, bool) or not isinstance(value, int)
        ):
            raise InvalidArgument(field, value, "a whole number")
        if kind == "string" and (not isinstance(value, str) or len(value) > MAX_TEXT):
            raise InvalidArgument(
                field, value, f"a string of at most {MAX_TEXT} characters"
            )
        if action.choices is not None and value not in action.choices:
            raise InvalidArgument(field, value, f"one of {', '.join(action.choices)}")
        options[field] = value
    return options


def permission_for(tool: Tool, options: Mapping[str, Any]) -> str:
    """The permission a call needs: the tool's, and delete_job for a bulk remove."""
    if tool.verb == "bulk" and options.get("action") == "remove":
        return DELETE
    return tool.permission


def operator(user: Any) -> api.Operator:
    """The user as the recorded actor, with ``mcp`` as the surface."""
    found = api.operator_of(user)
    return api.Operator(found.id, found.name, SOURCE)


def call(name: str, arguments: Mapping[str, Any] | None, user: Any) -> Any:
    """Run one tool as ``user``; answers the verb's ``--json`` document.

    An unknown tool or a bad argument is InvalidArgument; a user without the
    permission is ToolRefusedError (words an agent can relay); a refused verb raises its
    coded JobsError, as the command does. Nothing is changed in any of these cases.
    """
    tool = BY_NAME.get(name)
    if tool is None:
        raise InvalidArgument("tool", name, f"one of {', '.join(BY_NAME)}")
    options = _checked(tool, arguments)
    needed = permission_for(tool, options)
    username = user.get_username()
    if not user.is_active or not user.has_perm(needed):
        logger.warning(
            "jobs.mcp.refused",
            extra={"user": username, "tool": name, "permission": needed},
        )
        raise ToolRefusedError(
            f"refused: user {username!r} lacks the permission {needed!r} that "
            f"{tool.action} needs in the admin; nothing was changed"
            if tool.changes
            else f"refused: user {username!r} lacks the permission {needed!r} to "
            f"read jobs ({tool.action})"
        )
    options["operator"] = operator(user)
    options["paused_by"] = f"{username} ({SOURCE})"
    options["verb"] = tool.verb
    command = JobsCommand(stdout=io.StringIO(), stderr=io.StringIO())
    answer = command.answer(tool.verb, options)
    if tool.changes:
        logger.info(
            "jobs.mcp.changed",
            extra={
                "user": username,
                "tool": name,
                "arguments": {
                    k: v for k, v in (arguments or {}).items() if k != "reason"
                },
            },
        )
    return answer
