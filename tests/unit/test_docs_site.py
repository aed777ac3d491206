"""The documentation site (scripts/package builds it with warnings as errors in CI):
every page of docs/ is in the site's table of contents, so a new page fails here, in a
second, rather than in CI's Sphinx build (issue 30)."""

from __future__ import annotations

import re

from tests.conftest import REPO

DOCS = REPO / "docs"


def test_every_page_is_in_the_table_of_contents():
    index = (DOCS / "index.md").read_text()
    listed = set()
    for block in re.findall(r"```\{toctree\}\n(.*?)```", index, re.DOTALL):
        listed |= {
            line.strip()
            for line in block.splitlines()
            if line.strip() and not line.startswith(":")
        }
    pages = {path.stem for path in DOCS.glob("*.md")} - {"index"}
    assert pages - listed == set(), "add them to docs/index.md"
    assert listed - pages == set(), "docs/index.md names pages that do not exist"
