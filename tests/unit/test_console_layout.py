"""The console's layout helpers (issue 30 item 7): the job page's sections and the
manifest in words. The pages themselves are checked in Chromium (tests/browser/)."""

from __future__ import annotations

from typing import Any

from ultimate_jobs.admin.cells import cut, short_id
from ultimate_jobs.admin.job_page import fieldsets
from ultimate_jobs.admin.manifest import readable


def test_the_job_page_puts_a_summary_first_and_attempts_and_steps_second():
    shown = ["pretty_input", "step_trace", "id", "state", "attempt_history", "zzz"]
    sets = fieldsets(shown)
    assert [(title, spec["classes"], spec["fields"]) for title, spec in sets] == [
        (None, ("uj-summary",), ["id", "state"]),
        (
            "Attempts and steps",
            ("uj-attempts-and-steps",),
            ["attempt_history", "step_trace"],
        ),
        ("Input, output and logs", ("uj-io",), ["pretty_input"]),
        # a field no section names (one another module adds) is not lost
        ("Operators and relations", ("uj-more",), ["zzz"]),
    ]


def test_a_cut_cell_keeps_the_whole_value_in_its_title_and_escapes_it():
    assert cut("a<b") == '<span class="uj-cut" title="a&lt;b">a&lt;b</span>'
    assert cut(None) == cut("") == "—"
    whole = "01a24301-43df-7005-9bd7-761837c13435"
    html = short_id(whole)
    assert f'<code class="uj-id" title="{whole}">01a24301…37c13435</code>' in html
    assert f'data-id="{whole}"' in html


def test_the_manifest_says_retry_retention_and_concurrency_in_words():
    retry: dict[str, Any] = {
        "attempts": 5,
        "backoff": "exponential",
        "delay": 1.0,
        "jitter": True,
        "max_delay": 300.0,
    }
    row: dict[str, Any] = {
        "name": "a.b",
        "retry": retry,
        "retention": {"done": {"days": 1.0}, "dead": {"days": 30.0, "last": 100}},
        "concurrency": {"limit": 2, "when_busy": "wait", "keyed": True},
        "input": {"key": {}, "tenant": {}},
    }
    once = row | {
        "retry": retry | {"attempts": 1},
        "retention": {"failed": False},
        "concurrency": None,
        "input": {},
    }
    jobs = readable({"jobs": [row, once], "tasks": []})["jobs"]
    assert [
        (j["retry_words"], j["retention_words"], j["concurrency_words"], j["inputs"])
        for j in jobs
    ] == [
        (
            "5 attempts, exponential from 1 s up to 300 s, jittered",
            ["done 1 d", "dead 30 d, last 100"],
            "2 per key, wait when busy",
            "key, tenant",
        ),
        ("1 attempt", ["failed not kept"], "—", ""),
    ]
