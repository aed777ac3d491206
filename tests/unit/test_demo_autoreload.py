"""The demo's web server autoreloads (issue 16 item 9): a code change, a newly declared
job or task included, is served without restarting the demo; the stop signal reaches
the reloader's server process too (its process group)."""

from __future__ import annotations

from testproject.demo.runner import Demo


def test_the_demo_web_server_runs_with_autoreload_and_is_signalled_as_a_group():
    demo = Demo(8123)
    assert demo.web.argv[-2:] == ["runserver", "127.0.0.1:8123"]
    assert "--noreload" not in demo.web.argv
    assert demo.web.group is True
    assert demo.worker.group is False  # the worker drains on its own SIGTERM
