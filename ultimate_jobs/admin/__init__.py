"""The Django admin as the operator surface (P1, P2): one module per group of pages.

Django's admin autodiscovery imports this package; importing it registers every page.
"""

from __future__ import annotations

from ultimate_jobs.admin import (
    agents,
    archive,
    dashboard,
    jobs,
    manifest,
    scheduling,
    webhooks,
    workers,
)

__all__ = [
    "agents",
    "archive",
    "dashboard",
    "jobs",
    "manifest",
    "scheduling",
    "webhooks",
    "workers",
]
