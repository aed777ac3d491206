"""An export across real worker processes (F4, B3): a worker SIGKILLed after a part's
bytes landed and before the page's checkpoint; the next worker resumes AT that page,
rewrites its part, and the parts still concatenate into one valid CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.conftest import deadline, wait_for
from tests.testapp.factory_jobs import records_export
from tests.testapp.models import Record
from ultimate_jobs.models import Job, JobStep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def test_a_worker_killed_mid_export_is_resumed_at_its_page(
    start_worker, tmp_path, monkeypatch
):
    monkeypatch.setenv("UJ_EXPORT_ROOT", str(tmp_path))
    rows = [
        Record.objects.create(key="killed", event=f"row-{n}", attempt=n)
        for n in range(11)
    ]  # batch 3: pages of 3, 3, 3, 2
    hold = tmp_path / "hold" / "part-00002.csv"
    hold.parent.mkdir()
    hold.touch()
    folder = tmp_path / "exports" / "killed"

    answer = records_export.enqueue(tag="killed")
    first = start_worker("--concurrency", "1", LEASE="2s")
    wait_for(lambda: Path(f"{hold}.reached").exists())
    # Part 2's bytes are on disk; its checkpoint is not: pages 0 and 1 are recorded.
    assert sorted(
        JobStep.objects.filter(job_id=answer.id).values_list("name", flat=True)
    ) == ["page:0", "page:1"]
    assert (
        (folder / "part-00002.csv")
        .read_bytes()
        .startswith(f"{rows[6].pk},row-6,6\r\n".encode())
    )
    Record.objects.filter(pk=rows[6].pk).update(event="row-6-edited")
    first.kill()
    hold.unlink()

    start_worker("--concurrency", "1", LEASE="2s")
    wait_for(
        lambda: Job.objects.get(pk=answer.id).state == "done",
        timeout=deadline(lease=2, work=10),
        message="the export to finish on the second worker",
    )
    assert sorted(p.name for p in folder.iterdir()) == [
        "manifest.json",
        "part-00000.csv",
        "part-00001.csv",
        "part-00002.csv",
        "part-00003.csv",
    ]  # the rerun page replaced its part: no renamed sibling, no duplicate
    whole = b"".join(
        (folder / f"part-0000{i}.csv").read_bytes() for i in range(4)
    ).decode()
    expected = [["id", "event", "n"]] + [
        [str(r.pk), "row-6-edited" if r.pk == rows[6].pk else r.event, str(r.attempt)]
        for r in rows
    ]
    assert list(csv.reader(io.StringIO(whole))) == expected

    attempts = dict(
        JobStep.objects.filter(job_id=answer.id).values_list("name", "attempt")
    )
    assert attempts == {
        "page:0": 1,
        "page:1": 1,
        "page:2": 2,
        "page:3": 2,
        "manifest": 2,
    }
    # Which process read which rows: the second started AT page 2, read nothing twice.
    readers: dict[str, list[int]] = {}
    for line in (tmp_path / "rows.log").read_text().splitlines():
        pid, pk = line.split()
        readers.setdefault(pid, []).append(int(pk))
    first_pid, second_pid = (
        str(first.pid),
        next(p for p in readers if p != str(first.pid)),
    )
    assert readers[first_pid] == [r.pk for r in rows[:9]]
    assert readers[second_pid] == [r.pk for r in rows[6:]]
