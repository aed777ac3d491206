"""Durable steps (S1-S9): what run.step, run.atomic_step, run.sleep, run.wait_for_event,
run.reschedule and run.progress write, and the deadlines of an attempt."""

from __future__ import annotations
