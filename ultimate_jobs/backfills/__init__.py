"""Backfills (F1, F2): backfill() over @job, its ledger, and the operator verbs behind
manage.py db_backfill."""

from __future__ import annotations
