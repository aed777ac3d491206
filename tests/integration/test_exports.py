"""Exports (F4, B2) on real PostgreSQL into a real FileSystemStorage: one part per keyset
page plus a manifest, parts that concatenate into one valid file, a rerun page that
rewrites its part, spreadsheet formulas neutralised, unknown columns refused."""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.files.storage import FileSystemStorage

from tests.testapp.models import Record
from ultimate_jobs import (
    NO_TENANT,
    ExportInvalid,
    JobDeclarationInvalid,
    Retry,
    export_part_key,
    export_rows,
)
from ultimate_jobs.models import Job, JobStep

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_registry")]


def record_row(r):
    return {"id": r.pk, "key": r.key, "event": r.event, "attempt": r.attempt}


def declare(root: Path, **options):
    calls = options.pop("calls", None)
    store = options.pop("store", None)

    def storage():
        if calls is not None:
            calls.append(1)
        return store or FileSystemStorage(location=root)

    options.setdefault("columns", ["id", "key", "event", "attempt"])
    options.setdefault("row", record_row)
    options.setdefault("retry", Retry(attempts=3, delay="1s", jitter=False))
    return export_rows(
        f"tests.export.{uuid.uuid4().hex[:8]}",
        input={"tag": str},
        tenant=NO_TENANT,
        prefix=lambda p: f"exports/{p['tag']}",
        source=lambda p: Record.objects.filter(key=p["tag"]),
        storage=storage,
        **options,
    )


def records(tag, events):
    return [
        Record.objects.create(key=tag, event=event, attempt=n)
        for n, event in enumerate(events)
    ]


def files(root: Path, tag: str) -> list[str]:
    folder = root / "exports" / tag
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def read(root: Path, tag: str, name: str) -> str:
    return (root / "exports" / tag / name).read_bytes().decode("utf-8")


def concatenated(root: Path, tag: str, fmt: str = "csv") -> str:
    """`cat part-*`: the parts in name order."""
    return "".join(
        read(root, tag, name) for name in files(root, tag) if name.startswith("part-")
    )


def test_a_csv_export_writes_one_part_per_page_and_a_manifest(jobs, tmp_path):
    """F4: keyset pages of 3; header in part 0 only; every line newline-terminated;
    the manifest counts the parts and lists none."""
    rows = records("csv", ["a", "b", "c", "d", "e", "f", "g"])
    export = declare(tmp_path, batch=3)
    answer = export.enqueue(tag="csv")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert files(tmp_path, "csv") == [
        "manifest.json",
        "part-00000.csv",
        "part-00001.csv",
        "part-00002.csv",
    ]

    def line(r):
        return f"{r.pk},csv,{r.event},{r.attempt}\r\n"

    assert read(
        tmp_path, "csv", "part-00000.csv"
    ) == "id,key,event,attempt\r\n" + "".join(line(r) for r in rows[:3])
    assert read(tmp_path, "csv", "part-00001.csv") == "".join(
        line(r) for r in rows[3:6]
    )
    assert read(tmp_path, "csv", "part-00002.csv") == line(rows[6])
    whole = concatenated(tmp_path, "csv")
    assert list(csv.reader(io.StringIO(whole))) == [
        ["id", "key", "event", "attempt"],
        *([str(r.pk), "csv", r.event, str(r.attempt)] for r in rows),
    ]
    manifest = read(tmp_path, "csv", "manifest.json")
    assert json.loads(manifest) == {
        "bytes": len(whole.encode()),
        "columns": ["id", "key", "event", "attempt"],
        "format": "csv",
        "job_id": str(answer.id),
        "name": export.name,
        "parts": 3,
        "rows": 7,
        "version": 1,
    }
    assert manifest.endswith("}\n")
    assert export_part_key("exports/csv", 2, "csv") == "exports/csv/part-00002.csv"


def test_each_page_checkpoints_the_cursor_and_counters_never_the_rows(jobs, tmp_path):
    """F4: the step output of a page is its cursor and two counters."""
    rows = records("steps", ["a", "b", "c", "d", "e"])
    answer = declare(tmp_path, batch=2).enqueue(tag="steps")
    jobs.run()
    steps = dict(JobStep.objects.filter(job_id=answer.id).values_list("name", "output"))
    sizes = [
        len(read(tmp_path, "steps", f"part-0000{i}.csv").encode()) for i in range(3)
    ]
    assert steps == {
        "page:0": {"cursor": rows[1].pk, "rows": 2, "bytes": sizes[0], "more": True},
        "page:1": {
            "cursor": rows[3].pk,
            "rows": 4,
            "bytes": sum(sizes[:2]),
            "more": True,
        },
        "page:2": {"cursor": rows[4].pk, "rows": 5, "bytes": sum(sizes), "more": False},
        "manifest": 0,
    }


def test_a_jsonl_export_is_one_object_per_line(jobs, tmp_path):
    rows = records("jsonl", ["=x", "ü", "", "-1"])
    declare(tmp_path, batch=3, format="jsonl").enqueue(tag="jsonl")
    [attempt] = jobs.run()
    assert attempt.outcome == "completed"
    assert files(tmp_path, "jsonl") == [
        "manifest.json",
        "part-00000.jsonl",
        "part-00001.jsonl",
    ]
    whole = concatenated(tmp_path, "jsonl")
    assert whole.endswith("\n")
    assert [json.loads(line) for line in whole.splitlines()] == [
        {"id": r.pk, "key": "jsonl", "event": r.event, "attempt": r.attempt}
        for r in rows
    ]  # JSON is not a spreadsheet: strings are kept as they are
    assert '"event":"ü"' in read(tmp_path, "jsonl", "part-00000.jsonl")


def test_an_empty_source_and_an_exact_multiple_of_the_batch(jobs, tmp_path):
    """F4: an empty export is one part holding the header; a source of exactly two
    pages is two parts (the page reads one row more to know), never an empty third."""
    records("even", ["a", "b", "c", "d"])
    declare(tmp_path, batch=2).enqueue(tag="empty")
    declare(tmp_path, batch=2).enqueue(tag="even")
    jobs.run()
    assert files(tmp_path, "empty") == ["manifest.json", "part-00000.csv"]
    assert read(tmp_path, "empty", "part-00000.csv") == "id,key,event,attempt\r\n"
    assert json.loads(read(tmp_path, "empty", "manifest.json"))["parts"] == 1
    assert files(tmp_path, "even") == [
        "manifest.json",
        "part-00000.csv",
        "part-00001.csv",
    ]


class CrashAfterWrite(FileSystemStorage):
    """Writes a part, then fails once: a worker that died after the bytes landed and
    before the step was checkpointed."""

    crashed: set[str] = set()

    def __init__(self, *args, crash_on: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.crash_on = crash_on

    def _save(self, name, content):
        saved = super()._save(name, content)  # type: ignore[misc]
        if name.endswith(self.crash_on) and name not in self.crashed:
            self.crashed.add(name)
            raise RuntimeError("killed after the write")
        return saved


def test_a_rerun_page_rewrites_its_own_part(jobs, tmp_path):
    """F4: the part key is the page index, so the page that ran twice rewrites its
    part (with the rows as they are now): no second copy, no renamed sibling."""
    rows = records("rerun", ["a", "b", "c", "d", "e"])
    store = CrashAfterWrite(location=tmp_path, crash_on="part-00001.csv")
    answer = declare(tmp_path, batch=2, store=store).enqueue(tag="rerun")
    [first] = jobs.run()
    assert first.outcome == "retried"
    stale = read(tmp_path, "rerun", "part-00001.csv")
    assert f"{rows[2].pk},rerun,c," in stale
    Record.objects.filter(pk=rows[2].pk).update(event="c2")
    jobs.travel(seconds=2)
    [second] = jobs.run()
    assert second.outcome == "completed"
    assert files(tmp_path, "rerun") == [
        "manifest.json",
        "part-00000.csv",
        "part-00001.csv",
        "part-00002.csv",
    ]
    assert read(tmp_path, "rerun", "part-00001.csv") == (
        f"{rows[2].pk},rerun,c2,2\r\n{rows[3].pk},rerun,d,3\r\n"
    )
    attempts = dict(
        JobStep.objects.filter(job_id=answer.id).values_list("name", "attempt")
    )
    assert attempts == {"page:0": 1, "page:1": 2, "page:2": 2, "manifest": 2}


def test_a_later_shorter_export_to_the_same_prefix_leaves_no_stale_part(jobs, tmp_path):
    """F4: `cat part-*` stays one file when a prefix is exported again with fewer
    pages: parts past the new count are deleted before the manifest is written."""
    rows = records("again", ["a", "b", "c", "d", "e"])
    export = declare(tmp_path, batch=2)
    export.enqueue(tag="again")
    jobs.run()
    assert len(files(tmp_path, "again")) == 4
    Record.objects.filter(pk__in=[r.pk for r in rows[2:]]).delete()
    export.enqueue(tag="again")
    jobs.run()
    assert files(tmp_path, "again") == ["manifest.json", "part-00000.csv"]
    assert json.loads(read(tmp_path, "again", "manifest.json"))["rows"] == 2


def test_csv_cells_that_spreadsheets_evaluate_are_neutralised(jobs, tmp_path):
    """F4, B2: strings starting with = + - @ TAB CR get a leading quote; numbers,
    negative ones included, stay numbers."""
    events = ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "a=b", "plain", ""]
    rows = records("formula", events)

    def row(r):
        return {
            "event": r.event,
            "negative": -r.attempt - 1,
            "money": Decimal("-1.50"),
            "ratio": -0.25,
            "flag": r.attempt % 2 == 0,
            "nothing": None,
        }

    export = declare(
        tmp_path,
        batch=100,
        row=row,
        columns=["event", "negative", "money", "ratio", "flag", "nothing"],
    )
    export.enqueue(tag="formula")
    jobs.run()
    parsed = list(csv.reader(io.StringIO(read(tmp_path, "formula", "part-00000.csv"))))
    assert [line[0] for line in parsed[1:]] == [
        "'=1+1",
        "'+1",
        "'-1",
        "'@SUM(A1)",
        "'\tx",
        "'\rx",
        "a=b",
        "plain",
        "",
    ]
    assert parsed[1][1:] == ["-1", "-1.50", "-0.25", "true", ""]
    assert parsed[2][1:] == ["-2", "-1.50", "-0.25", "false", ""]
    assert len(parsed) == len(rows) + 1


def test_a_row_key_outside_the_columns_is_refused(jobs, tmp_path):
    """F4: an encoder would drop it in silence; the export dead-letters instead."""
    records("unknown", ["a", "b", "c"])

    def row(r):
        out = record_row(r)
        if r.event == "c":
            out["password_hash"] = "x"
        return out

    answer = declare(tmp_path, batch=2, row=row).enqueue(tag="unknown")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    job = Job.objects.get(pk=answer.id)
    assert (job.error_code, job.attempt) == ("X_EXPORT_UNKNOWN_COLUMN", 1)
    assert "row()='password_hash'" in job.last_error
    assert files(tmp_path, "unknown") == ["part-00000.csv"]  # page 1 never written


def test_a_page_over_max_part_bytes_names_the_batch_to_lower(jobs, tmp_path):
    records("big", ["x" * 40] * 4)
    answer = declare(tmp_path, batch=4, max_part_bytes=150).enqueue(tag="big")
    [attempt] = jobs.run()
    assert attempt.outcome == "dead-lettered"
    job = Job.objects.get(pk=answer.id)
    assert job.error_code == "X_EXPORT_PART_TOO_LARGE"
    assert "batch=4" in job.last_error
    assert "max_part_bytes=150" in job.last_error
    assert files(tmp_path, "big") == []


def test_storage_is_read_per_write_and_never_at_declaration(jobs, tmp_path):
    calls: list[int] = []
    records("lazy", ["a", "b", "c"])
    export = declare(tmp_path, batch=2, calls=calls)
    assert calls == []
    export.enqueue(tag="lazy")
    assert calls == []
    jobs.run()
    assert len(calls) == 3  # two parts and the manifest step


def test_bad_declarations_and_prefixes_are_refused_and_write_nothing(tmp_path):
    with pytest.raises(JobDeclarationInvalid, match="columns="):
        declare(tmp_path, columns=["id", "id"])
    with pytest.raises(JobDeclarationInvalid, match="columns="):
        declare(tmp_path, columns="id")
    with pytest.raises(JobDeclarationInvalid, match="format='xlsx'"):
        declare(tmp_path, format="xlsx")
    with pytest.raises(JobDeclarationInvalid, match="batch=0"):
        declare(tmp_path, batch=0)
    with pytest.raises(JobDeclarationInvalid, match="max_part_bytes=-1"):
        declare(tmp_path, max_part_bytes=-1)
    with pytest.raises(JobDeclarationInvalid, match="storage="):
        export_rows(
            "tests.export.bad",
            tenant=NO_TENANT,
            prefix=lambda p: "x",
            source=lambda p: Record.objects.all(),
            columns=["id"],
            row=record_row,
            storage=FileSystemStorage(location=tmp_path),  # type: ignore[arg-type]
        )
    export = declare(tmp_path)
    for tag in ("../escape", "a//b", " "):
        with pytest.raises(ExportInvalid, match="prefix="):
            export.enqueue(tag=tag)
    assert Job.objects.filter(name=export.name).count() == 0


def test_a_sliced_or_values_source_and_a_naive_datetime_are_refused(jobs, tmp_path):
    records("bad", ["a"])
    sliced = export_rows(
        "tests.export.sliced",
        tenant=NO_TENANT,
        prefix=lambda p: "exports/sliced",
        source=lambda p: Record.objects.all()[:10],
        columns=["id"],
        row=lambda r: {"id": r.pk},
        storage=lambda: FileSystemStorage(location=tmp_path),
    )
    naive = declare(
        tmp_path,
        columns=["at"],
        row=lambda r: {"at": r.at.replace(tzinfo=None)},
    )
    dicts = export_rows(
        "tests.export.dicts",
        tenant=NO_TENANT,
        prefix=lambda p: "exports/dicts",
        source=lambda p: Record.objects.values("id"),
        columns=["id"],
        row=lambda r: {"id": r.pk},
        storage=lambda: FileSystemStorage(location=tmp_path),
    )
    first, second = sliced.enqueue(), naive.enqueue(tag="bad")
    third = dicts.enqueue()
    jobs.run()
    for answer, text in (
        (first, "filter the QuerySet"),
        (second, "naive datetime"),
        (third, "not values()"),
    ):
        job = Job.objects.get(pk=answer.id)
        assert (job.state, job.error_code) == ("dead", "X_EXPORT_INVALID")
        assert text in job.last_error


def test_one_live_export_per_prefix(jobs, tmp_path):
    export = declare(tmp_path)
    first = export.enqueue(tag="once")
    second = export.enqueue(tag="once")
    assert (second.id, second.deduped) == (first.id, True)


def test_rate_paces_a_large_export_in_rows_per_second(jobs, tmp_path):
    """F4: ``rate`` (rows per second) spreads the pages out: 6 rows in pages of 2 at
    10 rows/s wait 0.2 s after each page but the last, inside the page's step."""
    records("paced", ["a", "b", "c", "d", "e", "f"])
    export = declare(tmp_path, batch=2, rate=10)
    export.enqueue(tag="paced")
    started = time.monotonic()
    [attempt] = jobs.run()
    took = time.monotonic() - started
    assert attempt.outcome == "completed"
    assert files(tmp_path, "paced") == [
        "manifest.json",
        "part-00000.csv",
        "part-00001.csv",
        "part-00002.csv",
    ]
    assert took >= 0.4, f"two pauses of 0.2 s each, took {took:.3f} s"


@pytest.mark.parametrize("rate", [0, -1, float("inf"), "fast", True])
def test_a_bad_rate_is_refused_at_declaration(tmp_path, rate):
    with pytest.raises(JobDeclarationInvalid) as refused:
        declare(tmp_path, rate=rate)
    assert refused.value.field == "rate"
