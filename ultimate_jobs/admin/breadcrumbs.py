"""The breadcrumbs of the app's own pages (dashboard, manifest) in the markup of the
installed admin (issue 30): Django 6.1 styles ``<ol class="breadcrumbs">`` and no longer
a ``<div class="breadcrumbs">``, which earlier versions style."""

from __future__ import annotations

import functools

from django.template.loader import get_template


@functools.cache
def ordered() -> bool:
    """Whether the admin draws its breadcrumbs as an ordered list."""
    template = get_template("admin/change_list.html")
    source = getattr(getattr(template, "template", None), "source", "")
    return '<ol class="breadcrumbs">' in source
