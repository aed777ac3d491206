"""Whether this thread ever connected through Django's ORM (N2, issue 26).

A handler thread closes Django's unusable or obsolete connections around each body
(``close_old_connections()``, as Django does around a request). That call walks every
alias through asgiref's thread-local storage, ~5 µs a job twice, even on a thread that
never opened a Django connection, where it closes nothing. Django announces each new
connection (``connection_created``, sent from ``connect()`` in the connecting thread):
a thread that never heard one has no connection to close, so the executor skips the
call there. Once a body connected, every later job on the thread calls it as before.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db.backends.signals import connection_created


class _Seen(threading.local):
    # A class default, not getattr(local, name, False): a thread-local's missing
    # attribute raises AttributeError inside getattr, 0.9 µs against 0.09 for this
    # read, asked twice a job (N2).
    connected = False


_seen = _Seen()


def _connected(sender: Any, **kwargs: Any) -> None:
    _seen.connected = True


connection_created.connect(_connected, dispatch_uid="ultimate_jobs.orm_use")


def connected_here() -> bool:
    """Whether a Django connection was ever opened in the calling thread."""
    return _seen.connected
