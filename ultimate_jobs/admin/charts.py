"""Charts drawn on the server as SVG (P7): no JavaScript, no build step.

Each chart is a row of stacked bars, one per hour: completed attempts below, failed
ones (retried, dropped, refused, dead-lettered) above, each bar with a tooltip. The
numbers are formatted here, never taken from input, and every text is escaped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

DONE_COLOUR = "#3a7d44"
FAILED_COLOUR = "#b3261e"


def hourly_bars(
    series: list[dict[str, int]],
    hours: list[str],
    *,
    width: int = 288,
    height: int = 48,
    label: str = "",
) -> SafeString:
    """A stacked bar per hour of ``series`` ({"done", "failed"}), scaled to its peak."""
    peak = max((p["done"] + p["failed"] for p in series), default=0) or 1
    slot = width / max(len(series), 1)
    bars = []
    for index, (point, hour) in enumerate(zip(series, hours, strict=True)):
        x = index * slot
        done_h = point["done"] / peak * (height - 2)
        failed_h = point["failed"] / peak * (height - 2)
        start = datetime.fromisoformat(hour).strftime("%H:00")
        tip = escape(
            f"{start} UTC: {point['done']} completed, {point['failed']} failed"
        )
        bars.append(
            f"<g><title>{tip}</title>"
            f'<rect x="{x + 1:.1f}" y="{height - done_h:.1f}" width="{slot - 2:.1f}" '
            f'height="{done_h:.1f}" fill="{DONE_COLOUR}"/>'
            f'<rect x="{x + 1:.1f}" y="{height - done_h - failed_h:.1f}" '
            f'width="{slot - 2:.1f}" height="{failed_h:.1f}" fill="{FAILED_COLOUR}"/></g>'
        )
    svg = (
        f'<svg class="uj-chart" role="img" aria-label="{escape(label)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<line x1="0" y1="{height - 0.5}" x2="{width}" y2="{height - 0.5}" '
        f'stroke="#999" stroke-width="1"/>{"".join(bars)}</svg>'
    )
    return mark_safe(svg)  # noqa: S308 - built from numbers and escaped text only


def totals(queues: list[dict[str, Any]]) -> list[dict[str, int]]:
    """The per-hour sum of every queue's series."""
    if not queues:
        return []
    length = len(queues[0]["series"])
    return [
        {
            "done": sum(q["series"][i]["done"] for q in queues),
            "failed": sum(q["series"][i]["failed"] for q in queues),
        }
        for i in range(length)
    ]


def age(seconds: float | None) -> str:
    """A wait as people read it: 0s, 42s, 3m 5s, 2h 10m, 3d 4h."""
    if not seconds:
        return "0s"
    whole = int(seconds)
    for unit, size, smaller, small_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "m", 60),
        ("m", 60, "s", 1),
    ):
        if whole >= size:
            rest = (whole % size) // small_size
            return (
                f"{whole // size}{unit} {rest}{smaller}"
                if rest
                else f"{whole // size}{unit}"
            )
    return f"{whole}s"


def percent(rate: float | None) -> str:
    return "—" if rate is None else format_html("{}%", f"{rate * 100:.1f}")
