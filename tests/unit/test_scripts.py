"""scripts/_venv.sh, which scripts/demo and scripts/test source (issue 16, items 1-2):
which Python it picks, the step lines it prints while pip installs, and README saying
the same as pyproject.toml and the scripts."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

VENV_SH = REPO / "scripts" / "_venv.sh"
BASH = shutil.which("bash") or "/bin/bash"


def sourced(
    function: str, *, path: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run one function of _venv.sh in a bash whose PATH is ``path`` only."""
    return subprocess.run(
        [BASH, "-c", f'set -euo pipefail; source "{VENV_SH}"; {function}'],
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": path, "HOME": "/nonexistent"},
        timeout=30,
        check=False,
    )


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH with the tools _venv.sh uses and no Python: tests add fake ones."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for tool in ("seq", "ls", "grep", "sort", "tr", "wc", "cat"):
        found = shutil.which(tool)
        assert found, tool
        (directory / tool).symlink_to(found)
    return directory


def fake_python(directory: Path, name: str, version: str) -> Path:
    """An interpreter that answers ``version`` to the version question."""
    path = directory / name
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_it_prefers_python_3_12_and_newer(bin_dir):
    fake_python(bin_dir, "python3.11", "3.11")
    newest = fake_python(bin_dir, "python3.13", "3.13")
    found = sourced("find_python", path=str(bin_dir))
    assert (found.returncode, found.stdout, found.stderr) == (0, f"{newest}\n", "")


def test_python3_counts_when_it_is_3_12_or_newer(bin_dir):
    fake_python(bin_dir, "python3.11", "3.11")
    python3 = fake_python(bin_dir, "python3", "3.12")
    found = sourced("find_python", path=str(bin_dir))
    assert (found.returncode, found.stdout) == (0, f"{python3}\n")


def test_with_only_3_11_it_uses_3_11_and_says_django_5_2(bin_dir):
    fake_python(bin_dir, "python3", "3.10")
    py311 = fake_python(bin_dir, "python3.11", "3.11")
    found = sourced("find_python", path=str(bin_dir))
    assert (found.returncode, found.stdout) == (0, f"{py311}\n")
    assert found.stderr == (
        "==> no Python 3.12+ found: using 3.11, with Django 5.2 LTS "
        "(Django 6 needs 3.12+)\n"
    )


def test_with_no_3_11_or_newer_it_says_what_to_set(bin_dir):
    fake_python(bin_dir, "python3", "3.10")
    found = sourced("find_python", path=str(bin_dir))
    assert found.returncode == 1
    assert found.stdout == ""
    assert found.stderr == (
        "No Python 3.11+ found on PATH or in pyenv (3.12+ preferred); "
        "set UJ_PYTHON=/path/to/python3.12\n"
    )


PIP_OUTPUT = """\
Looking in indexes: https://pypi.org/simple
Obtaining file:///repo
  Installing build dependencies: started
  Installing build dependencies: finished with status 'done'
Collecting Django<7,>=5.2 (from ultimate-jobs==0.1.0)
  Downloading django-6.1.3-py3-none-any.whl (8.4 MB)
     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 8.4/8.4 MB 338.3 MB/s  0:00:00
Collecting psycopg[binary]>=3.2 (from ultimate-jobs==0.1.0)
Processing /opt/wheels/psutil-7.2.2-cp36-abi3-manylinux2010_x86_64.whl (from pgserver)
Requirement already satisfied: tzdata in ./.venv/lib/python3.12/site-packages (2026.6)
Building wheels for collected packages: ultimate-jobs
  Building editable for ultimate-jobs (pyproject.toml): started
  Building editable for ultimate-jobs (pyproject.toml): finished with status 'done'
Installing collected packages: psutil, psycopg, Django, ultimate-jobs
Successfully installed Django-6.1.3 psutil-7.2.2 psycopg-3.3.9 ultimate-jobs-0.1.0
"""


def test_pip_steps_says_each_step_of_an_install():
    """Item 1: pip's output goes to the install log; these lines are what a person sees
    (one per step when stderr is not a terminal, one rewritten line when it is)."""
    shown = sourced("pip_steps", path="/usr/bin:/bin", stdin=PIP_OUTPUT)
    assert shown.returncode == 0
    assert shown.stdout == ""
    assert shown.stderr.splitlines() == [
        "    installing build dependencies",
        "    collecting Django",
        "    collecting psycopg",
        "    collecting psutil",
        "    building ultimate-jobs",
        "    installing 4 package(s)",
        "    installed",
    ]


def test_readme_pyproject_and_scripts_say_one_thing_about_python():
    """Item 2: 3.11+ supported (Django 5.2 on 3.11, Django 6 on 3.12+), 3.12+ preferred."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"] == ">=3.11"
    readme = (REPO / "README.md").read_text()
    assert "Python 3.11+ (3.12+ preferred" in readme
    assert "3.12+ only" not in readme and "only Python 3.12+" not in readme
    script = VENV_SH.read_text()
    assert "supports Python 3.11 (with Django 5.2 LTS) and 3.12+ (with Django 6)" in (
        " ".join(script.split())
    )


def test_readme_documents_every_variable_of_the_demo():
    readme = (REPO / "README.md").read_text()
    demo = (REPO / "scripts" / "demo").read_text()
    variables = set(re.findall(r"^#\s+([A-Z_]+)\s", demo, re.MULTILINE))
    assert {"DEMO_PORT", "UJ_PGDATA"} <= variables
    assert [v for v in sorted(variables) if f"`{v}" not in readme] == []
