"""The manifest page's cells as people read them (issue 30: raw dicts before)."""

from __future__ import annotations

from ultimate_jobs.admin.manifest import concurrency_text, retention_text


def test_retention_rules_read_as_text():
    rules = {"done": {"days": 1.0}, "dead": {"last": 100}, "failed": False}
    assert retention_text(rules) == "done 1d · dead last 100 · failed kept"
    assert retention_text({}) == ""


def test_concurrency_reads_as_text():
    assert concurrency_text(None) == "—"
    assert concurrency_text(2) == "2"
    keyed = {"limit": 1, "when_busy": "fail", "keyed": True}
    assert concurrency_text(keyed) == "1 per key (fail)"
