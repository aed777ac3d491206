"""Outbound webhooks (F5): webhook() over @job, the signature format, and the ledger of
every delivery attempt."""

from __future__ import annotations
