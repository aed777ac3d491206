"""Sphinx configuration of the documentation site (``scripts/package`` builds it in CI
with warnings as errors: ``sphinx-build -W --keep-going docs docs/_build/html``).

Why Sphinx with furo and MyST rather than MkDocs Material: the pages stay the Markdown
GitHub renders (MyST reads it, tables and relative ``page.md#anchor`` links included,
and a broken link or anchor is a warning, so an error here); the API reference comes
from the docstrings through autodoc, as Django's own documentation does; and Sphinx is
actively released, where MkDocs itself has had no release since 2024.
"""

from __future__ import annotations

from typing import Any

import django
from django.conf import settings

# autodoc imports the package: a Django with its app and a PostgreSQL alias it never
# connects to.
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.contenttypes",
        "django.contrib.auth",
        "ultimate_jobs",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "docs"}},
    USE_TZ=True,
)
django.setup()

project = "ultimate_jobs"
author = "The ultimate_jobs authors"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "README.md"]
myst_heading_anchors = 4  # GitHub's anchors for "page.md#a-heading" links
myst_enable_extensions = ["colon_fence"]
html_theme = "furo"
html_title = "ultimate_jobs"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}


def _drop_module_trees(
    app: Any, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """ultimate_jobs.ground.exceptions opens with a class tree drawn for a terminal; the
    reference lists the classes themselves (and errors.md their codes)."""
    if what == "module" and name == "ultimate_jobs.ground.exceptions":
        lines[:] = ["Everything ultimate_jobs raises; the codes are in :doc:`errors`."]


def setup(app: Any) -> None:
    app.connect("autodoc-process-docstring", _drop_module_trees)
