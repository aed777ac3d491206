"""Named SQL statements, parsed once from the *.sql files in this package.

Each statement sits under a header ``-- name: <query_name> :one|:many|:exec`` followed by
``--`` lines that say what it guarantees. ``manage.py jobs_sql`` lists, shows, renders and
EXPLAINs them, so an operator can run the exact statement a worker runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Literal, cast

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


def parse(source: str, content: str) -> list[Query]:
    """Split one .sql file into its named statements."""
    headers = list(_HEADER.finditer(content))
    queries = []
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        name, returns, doc = header.groups()
        text = content[header.end() : following.start() if following else None].strip()
        queries.append(
            Query(
                name=name,
                returns=cast(Returns, returns),
                doc=" ".join(
                    line.lstrip("- ").strip() for line in doc.splitlines()
                ).strip(),
                text=text,
                params=frozenset(_PARAM.findall(text)),
                source=source,
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
