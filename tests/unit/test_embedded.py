"""testproject/embedded.py forgets the pids of dead processes (issue 16, item 3).

pgserver stops the embedded server when the last pid in ``.handle_pids.json`` lets go;
a process killed without its exit handlers left its pid there, and the server then ran
forever. Every start, and the demo's stop, first drop the pids that no longer exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from testproject.embedded import HANDLES, forget_dead_handles, holders


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_dead_pids_are_forgotten_and_live_ones_kept(tmp_path):
    gone = dead_pid()
    (tmp_path / HANDLES).write_text(json.dumps([gone, os.getpid()]))
    assert forget_dead_handles(tmp_path) == [gone]
    assert json.loads((tmp_path / HANDLES).read_text()) == [os.getpid()]
    assert forget_dead_handles(tmp_path) == []
    assert holders(tmp_path) == [os.getpid()]


def test_no_handle_file_is_no_holder(tmp_path):
    assert forget_dead_handles(tmp_path) == []
    assert holders(tmp_path) == []
