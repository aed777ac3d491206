"""Jobs that try to walk around the tenant guard (issue 27, B7): each records what
happened as ``Record(key, event)``; ``event`` is the error code or what it saw."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connection, transaction

from ultimate_jobs import (
    NO_TENANT,
    JobsError,
    Retry,
    Run,
    cross_tenant,
    job,
)

from .models import Document, Note, Record


def by_key(p: dict[str, Any]) -> str:
    return str(p["key"])


def _outcome(key: str, attempt: Any) -> None:
    """Run ``attempt`` in its own transaction (a refused delete raises inside
    Django's), and record its error code, or "ok"."""
    try:
        with transaction.atomic():
            attempt()
    except JobsError as exc:
        Record.objects.create(key=key, event=exc.code)
        return
    Record.objects.create(key=key, event="ok")


def _foreign() -> Document:
    """Another tenant's document, read around the guard (a second manager)."""
    return Document._base_manager.filter(tenant_id="globex").order_by("id")[0]


def _save_moved() -> None:
    with cross_tenant(reason="test: fetch an acme row to move it"):
        document = Document.objects.filter(tenant_id="acme").first()
    assert document is not None
    document.tenant_id = "globex"
    document.save()


def _save_over_foreign() -> None:
    Document(pk=_foreign().pk, tenant_id="acme", title="hijacked").save()


def _delete_foreign_instance() -> None:
    _foreign().delete()


def _bulk_update_moves() -> None:
    documents = list(Document.objects.all())
    for document in documents:
        document.tenant_id = "globex"
    Document.objects.bulk_update(documents, ["tenant_id"])


def _bulk_update_foreign() -> None:
    foreign = _foreign()
    foreign.title = "overwritten"
    Document.objects.bulk_update([foreign], ["title"])


def _bulk_create_over_foreign() -> None:
    Document.objects.bulk_create(
        [Document(pk=_foreign().pk, tenant_id="acme", title="overwritten")],
        update_conflicts=True,
        unique_fields=["id"],
        update_fields=["title"],
    )


WRITES = {
    "update": lambda: Document.objects.filter(title="a-plan").update(
        tenant_id="globex"
    ),
    "save": _save_moved,
    "save_over_foreign": _save_over_foreign,
    "delete_foreign_instance": _delete_foreign_instance,
    "bulk_update": _bulk_update_moves,
    "bulk_update_foreign": _bulk_update_foreign,
    "bulk_create_conflict": _bulk_create_over_foreign,
    "update_own": lambda: Document.objects.filter(title="a-plan").update(title="kept"),
}


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def tries_write(run: Run, key: str, tenant: str, how: str) -> None:
    """One write that would move a row to another tenant or touch another's."""
    _outcome(key, WRITES[how])


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def reads_in_threads(run: Run, key: str, tenant: str) -> None:
    """Reads from a thread it starts and from a pool it submits to."""
    seen: list[str] = []

    def read() -> None:
        try:
            titles = Document.objects.values_list("title", flat=True)
            seen.append(",".join(sorted(titles)))
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(read).result()
    Record.objects.create(key=key, event=f"thread:{seen[0]}"[:50])
    Record.objects.create(key=key, event=f"pool:{seen[1]}"[:50])


KEPT: list[Any] = []  # a queryset a body builds, evaluated elsewhere later


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def builds_queryset(run: Run, key: str, tenant: str) -> None:
    """Builds a queryset and keeps it (as a module first imported in a body would)."""
    KEPT.append(Document.objects.filter(title__contains="").order_by("title"))


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def evaluates_kept(run: Run, key: str, tenant: str) -> None:
    """Evaluates the queryset another tenant's job built."""
    titles = ",".join(d.title for d in KEPT[-1])
    Record.objects.create(key=key, event=f"saw:{titles}"[:50])


# -- row-level security (Note has TenantScopedManager(rls=True) and a policy) -----


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def reads_notes_raw(run: Run, key: str, tenant: str) -> None:
    """Raw SQL, which the manager never sees: the database holds it to the tenant."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM testapp_note ORDER BY body")
        raw = ",".join(row[0] for row in cursor.fetchall())
    orm = ",".join(Note._base_manager.order_by("body").values_list("body", flat=True))
    Record.objects.create(key=key, event=f"raw:{raw}"[:50])
    Record.objects.create(key=key, event=f"orm:{orm}"[:50])
    with transaction.atomic():  # an app's own transaction: still the tenant
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM testapp_note")
            Record.objects.create(key=key, event=f"atomic:{cursor.fetchone()[0]}")

    def count_in_step() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM testapp_note")
            return int(cursor.fetchone()[0])

    # A step's transaction (S9: the step's writes and its checkpoint commit together).
    Record.objects.create(
        key=key, event=f"step:{run.atomic_step('count', count_in_step)}"
    )


@job(idempotency_key=by_key, tenant=lambda p: p["tenant"], retry=Retry(attempts=1))
def writes_notes_raw(run: Run, key: str, tenant: str) -> None:
    """Raw writes across tenants: none reaches another tenant's row."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE testapp_note SET body = body || '!' ")
        Record.objects.create(key=key, event=f"updated:{cursor.rowcount}")
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO testapp_note (tenant_id, body) VALUES ('globex', 'smuggled')"
            )
    except Exception as exc:  # the policy's WITH CHECK refuses it: 42501
        sqlstate = getattr(exc.__cause__, "sqlstate", None)
        Record.objects.create(key=key, event=f"refused:{sqlstate}")


@job(idempotency_key=by_key, tenant=NO_TENANT, retry=Retry(attempts=1))
def counts_notes(run: Run, key: str, cross: bool) -> None:
    """A body without a tenant: no rows, unless inside cross_tenant."""

    def count() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM testapp_note")
            return int(cursor.fetchone()[0])

    if cross:
        with cross_tenant(reason="test: count every tenant's notes"):
            Record.objects.create(key=key, event=f"cross:{count()}")
    Record.objects.create(key=key, event=f"none:{count()}")


def retitle(documents: list[Document], token: Any) -> None:
    Document.objects.filter(pk__in=[d.pk for d in documents]).update(title="swept")
