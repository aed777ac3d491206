"""The one table the realistic app's bodies write a row to (through the ORM)."""

from __future__ import annotations

from django.db import models


class Visit(models.Model):
    n = models.BigIntegerField()
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"visit {self.n}"
