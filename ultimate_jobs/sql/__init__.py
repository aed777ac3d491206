"""Named SQL statements, parsed once from the *.sql files in this package.

Each statement sits under a header ``-- name: <query_name> :one|:many|:exec`` followed by
``--`` lines that say what it guarantees. ``manage.py jobs_sql`` lists, shows, renders and
EXPLAINs them, so an operator can run the exact statement a worker runs.

Each statement is also kept with PostgreSQL's own placeholders (``$1``, ``$2``, …,
``Query.native``), rendered once here: the client sends that text as it is, instead of
scanning the whole statement for ``%(name)s`` at every call (the claim is 15 KB, past
the size psycopg caches its scan for).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, cast

Returns = Literal["one", "many", "exec"]
_HEADER = re.compile(r"^-- name: (\w+) :(one|many|exec)\n((?:--.*\n)*)", re.MULTILINE)
_PARAM = re.compile(r"%\((\w+)\)s")


@dataclass(frozen=True, slots=True)
class Query:
    name: str
    returns: Returns
    doc: str
    text: str
    params: frozenset[str]
    source: str  # file name, for messages and `jobs_sql --show`
    native: str  # the text with $1, $2, … in place of %(name)s
    order: tuple[str, ...]  # the parameter behind $1, $2, … (params, in order)

    def positional(self, params: dict[str, Any]) -> list[Any]:
        """The values for ``native``, in placeholder order."""
        return [params[name] for name in self.order]


def to_native(text: str) -> tuple[str, tuple[str, ...]]:
    """Answer ``text`` with numbered placeholders and the names they stand for.

    A name used twice is one placeholder. The statements hold no literal ``%``
    (``%%``), which the loader refuses rather than translating.
    """
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    native = _PARAM.sub(number, text)
    if "%" in native:
        raise ValueError("a named statement may hold no literal '%'")
    return native, tuple(order)


def parse(source: str, content: str) -> list[Query]:
    """Split one .sql file into its named statements."""
    headers = list(_HEADER.finditer(content))
    queries = []
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        name, returns, doc = header.groups()
        text = content[header.end() : following.start() if following else None].strip()
        native, order = to_native(text)
        queries.append(
            Query(
                name=name,
                returns=cast(Returns, returns),
                doc=" ".join(
                    line.lstrip("- ").strip() for line in doc.splitlines()
                ).strip(),
                text=text,
                params=frozenset(order),
                source=source,
                native=native,
                order=order,
            )
        )
    return queries


def load() -> dict[str, Query]:
    """Parse every .sql file shipped here; a name may be defined only once."""
    queries: dict[str, Query] = {}
    for entry in sorted(resources.files(__name__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for query in parse(entry.name, entry.read_text("utf-8")):
                if query.name in queries:
                    raise ValueError(f"{query.name!r} defined twice ({entry.name})")
                queries[query.name] = query
    return queries


QUERIES = load()
