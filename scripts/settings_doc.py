"""Write the settings table of docs/settings.md from the fields of JobsSettings.

    .venv/bin/python scripts/settings_doc.py          # rewrite the table
    .venv/bin/python scripts/settings_doc.py --check  # exit 1 when it is stale

Each row comes from one field and its ``Setting`` metadata (ultimate_jobs/conf.py):
the default, the kind with its bounds, the one-line doc. The table sits between two
markers in the page; tests/unit/test_settings_doc.py fails when it differs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "settings.md"
BEGIN = "<!-- settings table: scripts/settings_doc.py writes it -->"
END = "<!-- end of the settings table -->"


def seconds(value: float) -> str:
    """A duration as the docs write it: 250ms, 30s, 5m, 2h, 7d."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if value >= size and value % size == 0:
            return f"{value / size:g}{unit}"
    if value < 1:
        return f"{value * 1000:g}ms"
    return f"{value:g}s"


def shown_default(value: Any) -> str:
    if isinstance(value, bool | int):
        return f"`{value}`"
    if isinstance(value, float):
        return f"`{seconds(value)}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if not value:
        return f"`{value!r}`" if isinstance(value, dict) else "none"
    return f"`{', '.join(value)}`"


def values(spec: Any) -> str:
    """The "unit / values" column: the kind, then its bounds."""
    kind, least, most = spec.kind, spec.least, spec.most
    if kind == "flag":
        return "bool"
    if kind == "choice":
        return ", ".join(f"`{choice}`" for choice in spec.choices)
    if kind == "duration":
        return f"duration, {seconds(least)} to {seconds(most)}"
    if kind == "count":
        return f"{spec.values}, {int(least):,} to {int(most):,}"
    if kind == "text":
        return f"{spec.values or 'string'}, {least} to {most} characters"
    return f"{spec.values}; at most {int(most):,} entries"


def render() -> str:
    """The markdown table, one row per key, in declaration order."""
    from ultimate_jobs.conf import defaults, specs

    default = defaults()
    rows = [
        "| key | default | unit / values | meaning |",
        "|---|---|---|---|",
    ]
    for name, spec in specs().items():
        shown = spec.shown or shown_default(default[name])
        rows.append(f"| `{name}` | {shown} | {values(spec)} | {spec.doc} |")
    return "\n".join(rows)


def written(page: str) -> str:
    """``page`` with its table replaced by the rendered one."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{render()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    page = PAGE.read_text()
    if BEGIN not in page or END not in page:
        print(f"{PAGE}: the table markers are missing", file=sys.stderr)
        return 2
    fresh = written(page)
    if "--check" in argv:
        if fresh != page:
            print(f"{PAGE} is stale: run scripts/settings_doc.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
