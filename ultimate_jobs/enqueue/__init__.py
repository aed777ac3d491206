"""Putting jobs on the queue: @job and its handle, the checked rows, the direct write
and the outbox staging in the caller's transaction (H1-H5, O1, O4)."""

from __future__ import annotations
