"""Limits (L1-L3): fleet-wide slots held as lease rows, the claim's cap parameters, and
per-process budgets."""

from __future__ import annotations
