"""Cells of the job and archive lists that keep a row on one line (issue 30 item 7).

A cell shows what fits and keeps the whole value in its ``title`` (the tooltip); the
console's style sheet (templates/admin/ultimate_jobs/console_style.html) cuts a
``uj-cut`` cell with an ellipsis. Nothing here reads a row beyond the value it is
given.
"""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html

ID_HEAD, ID_TAIL = 8, 8  # a UUIDv7 begins with its time and ends with random bits


def short_id(pk: Any) -> str:
    """The id as its first and last hex digits, the whole id in the title, with a
    button that copies the whole id."""
    whole = str(pk)
    return format_html(
        '<code class="uj-id" title="{}">{}…{}</code> <button type="button" '
        'class="uj-copy" title="copy the id" aria-label="copy the id" '
        'data-id="{}">⧉</button>',
        whole,
        whole[:ID_HEAD],
        whole[-ID_TAIL:],
        whole,
    )


def cut(value: str | None, empty: str = "—") -> str:
    """``value`` in a span the style sheet cuts with an ellipsis; whole in its title."""
    if not value:
        return empty
    return format_html('<span class="uj-cut" title="{}">{}</span>', value, value)
