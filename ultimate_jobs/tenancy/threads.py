"""The tenant guard follows a job body into the threads it starts (B7).

Context variables (the running job, its tenant, a ``cross_tenant`` block) do not
cross into a new thread on Python 3.12: a thread a body starts would run as if outside
any job, where the guard is a plain manager, and see every tenant. Once a model
declares ``TenantScopedManager``, ``follow_job_scope()`` wraps, once per process:

* ``threading.Thread.start``: a thread started inside a job body runs its ``run()``
  under the body's scope (job, tenant, crossing) as it was at ``start()``;
* ``concurrent.futures.ThreadPoolExecutor.submit``: each submitted call runs under
  the scope of the code that submitted it (a pool thread started by one job serves
  the next job's calls under that job's scope, and a call submitted outside any job
  runs outside any job).

A thread started outside job bodies is untouched. The wrappers cost one tuple of
three context-variable reads per ``start()`` or ``submit()``.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ultimate_jobs.ground.context import guard_scope, restored_guard_scope

_installed = False
_lock = threading.Lock()


def follow_job_scope() -> None:
    """Install the two wrappers (idempotent)."""
    global _installed  # once per process, under the lock
    with _lock:
        if _installed:
            return
        _wrap_thread_start()
        _wrap_pool_submit()
        _installed = True


def _wrap_thread_start() -> None:
    start = threading.Thread.start

    @functools.wraps(start)
    def scoped_start(self: threading.Thread) -> None:
        taken = guard_scope()
        if taken[0] is not None:  # started inside a job body
            run = self.run

            def run_in_scope() -> None:
                with restored_guard_scope(taken):
                    run()

            self.run = run_in_scope  # type: ignore[method-assign]
        start(self)

    threading.Thread.start = scoped_start  # type: ignore[method-assign]


def _wrap_pool_submit() -> None:
    submit: Any = ThreadPoolExecutor.submit

    def scoped_submit(
        self: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any
    ) -> Future[Any]:
        taken = guard_scope()

        def call_in_scope() -> Any:
            with restored_guard_scope(taken):
                return fn(*args, **kwargs)

        future: Future[Any] = submit(self, call_in_scope)
        return future

    scoped_submit.__doc__ = submit.__doc__
    ThreadPoolExecutor.submit = scoped_submit  # type: ignore[method-assign,assignment]
