"""Every module logs on a logger named after itself (STYLE 8.2, issue 25 item 3): an
operator who sets ``ultimate_jobs.runtime.settle`` to DEBUG gets the settle lines, not
the executor's. Two loggers are named on purpose: ``ultimate_jobs.run`` (what a body
writes through ``run.logger``, docs/jobs.md) and the package's root ``ultimate_jobs``,
which the worker commands configure (observability/logs.py)."""

from __future__ import annotations

import re

from tests.unit.test_architecture import MODULES

NAMED = re.compile(r"getLogger\(([^)]*)\)")
ON_PURPOSE = {
    ("ultimate_jobs.declaration.run", '"ultimate_jobs.run"'),
    ("ultimate_jobs.observability.logs", '"ultimate_jobs"'),
    ("ultimate_jobs.observability.logs", ""),  # the root logger, to see if it is set
}


def test_every_module_logger_is_named_after_its_module():
    misnamed = [
        (module, argument)
        for module, path in MODULES.items()
        for argument in NAMED.findall(path.read_text())
        if argument != "__name__" and (module, argument) not in ON_PURPOSE
    ]
    assert misnamed == []
