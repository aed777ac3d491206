"""The package as pip builds it (issue 16, item 10): no warning from the build backend.

setuptools >= 77 reads ``license = "MIT"`` as an SPDX expression (PEP 639); the TOML
table it replaced printed a ``BuildBackendWarning`` at every install. The build runs in
pip's isolated environment with the newest setuptools, as a user's install does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.processes


def test_the_package_builds_without_a_backend_warning(tmp_path):
    """Item 10: setuptools >= 77 reads ``license = "MIT"`` (an SPDX expression); the
    old TOML table printed a BuildBackendWarning at every install."""
    source = tmp_path / "source"  # a copy: the build writes build/ and *.egg-info
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "ultimate_jobs",
        source / "ultimate_jobs",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(wheels),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    output = build.stdout + build.stderr
    assert "BuildBackendWarning" not in output
    assert "DeprecationWarning" not in output
    [wheel] = wheels.glob("ultimate_jobs-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith("/METADATA")]
        assert "License-Expression: MIT" in archive.read(metadata).decode().splitlines()
        [license_text] = [
            n for n in archive.namelist() if n.endswith("/licenses/LICENSE")
        ]
        assert archive.read(license_text).decode().startswith("MIT License")
