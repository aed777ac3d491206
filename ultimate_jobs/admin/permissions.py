"""Permission mixins the app's admin pages share: rows only the library writes."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from ultimate_jobs.admin.guard import InputGuard


class NoAddOrDelete(InputGuard):
    """Rows the library creates and removes; a page may still allow some change."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnly(NoAddOrDelete):
    """Rows only the library writes: no add, change or delete from the admin."""

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
