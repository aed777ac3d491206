"""The stored result of a ``store_result=True`` job (P8): checked, bounded, written.

The body's return value is encoded as JSON and refused past ``MAX_RESULT_BYTES`` with
``ResultTooLarge`` (terminal: the attempt fails and the job with it); a value JSON
cannot hold fails the attempt with the encoder's error. The write is fenced on the
claim (sql/results.sql), before the completion is settled.
"""

from __future__ import annotations

import json
from typing import Any

from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import Database
from ultimate_jobs.ground.exceptions import ResultTooLarge
from ultimate_jobs.sql.rows import JOB_RESULT_KEEP, Fence


def keep_result(db: Database, job: Fence, name: str, value: Any) -> bool:
    """Store ``value`` on the job's row; answers whether this claim still held it."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    limit = get_settings().MAX_RESULT_BYTES
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ResultTooLarge(name, size, limit)
    rows = db.run(
        JOB_RESULT_KEEP, id=job["id"], lease_owner=job["lease_owner"], result=text
    )
    return bool(rows)
