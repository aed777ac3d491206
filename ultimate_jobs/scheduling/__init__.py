"""Cron (C1-C9): cron expressions in a time zone, @task, runtime schedules, and the
scheduler that fires them under a leader lease."""

from __future__ import annotations
