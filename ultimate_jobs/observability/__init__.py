"""Observability (M1-M3, P5): metrics and their exposition, structured logs, queue
stats and per-job counters."""

from __future__ import annotations
