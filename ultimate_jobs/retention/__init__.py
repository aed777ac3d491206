"""Retention and purge (F3, F6): purge() over @job, the rules that keep finished jobs,
and the hourly purge of the app's own tables."""

from __future__ import annotations
