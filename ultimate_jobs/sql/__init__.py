"""Named SQL statements, parsed once from the *.sql files in this package.

Each statement sits under a header ``-- name: <query_name> :one|:many|:exec`` followed by
``--`` lines that say what it guarantees. ``manage.py jobs_sql`` lists, shows, renders and
EXPLAINs them, so an operator can run the exact statement a worker runs.

Each statement is also kept with PostgreSQL's own placeholders (``$1``, ``$2``, …,
``Query.native``), rendered once here: the client sends that text as it is, instead of
scanning the whole statement for ``%(name)s`` at every call (the claim is 15 KB, past
the size psycopg caches its scan for).

A part several statements share is written once, as a fragment under
``-- fragment: <name>``, and a statement includes it with ``{{name}}``: the job row's
column list (``job_input``, ``job_insert``) is one text however many statements write
job rows. A fragment may include others (``bury_lapsed`` answers ``job_claimed``). ``jobs_sql --show`` prints the statement with its fragments in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Generic, Literal, TypeVar, cast

Returns = Literal["one", "many", "exec"]
RowT = TypeVar("RowT")
_HEADER = re.compile(
    r"^-- (?:name: (\w+) :(one|many|exec)|fragment: (\w+))\n((?:--.*\n)*)", re.MULTILINE
)
_PARAM = re.compile(r"%\((\w+)\)s")
_INCLUDE = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True, slots=True)
class Query(Generic[RowT]):
    """One named statement; ``RowT`` is the type of the rows it answers (sql/rows.py
    declares it for the statements of the hot path; the others answer dicts)."""

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


def _doc(lines: str) -> str:
    return " ".join(line.lstrip("- ").strip() for line in lines.splitlines()).strip()


def split(content: str) -> tuple[list[tuple[str, str, str, str]], dict[str, str]]:
    """Split one .sql file into its statements (name, returns, doc, text) and fragments."""
    headers = list(_HEADER.finditer(content))
    statements: list[tuple[str, str, str, str]] = []
    fragments: dict[str, str] = {}
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        name, returns, fragment, doc = header.groups()
        text = content[header.end() : following.start() if following else None].strip()
        if fragment is not None:
            if fragment in fragments:
                raise ValueError(f"fragment {fragment!r} defined twice")
            fragments[fragment] = text.rstrip(";")
        else:
            statements.append((name, returns, _doc(doc), text))
    return statements, fragments


def expand(
    name: str, text: str, fragments: dict[str, str], within: tuple[str, ...] = ()
) -> str:
    """Put each ``{{fragment}}`` of ``text`` in place, a fragment's own includes too;
    an unknown name, or a fragment that includes itself, is an error."""

    def include(match: re.Match[str]) -> str:
        part = match.group(1)
        if part in within:
            raise ValueError(f"{name}: fragment {part!r} includes itself")
        try:
            found = fragments[part]
        except KeyError:
            raise ValueError(f"{name}: unknown fragment {part!r}") from None
        return expand(name, found, fragments, (*within, part))

    return _INCLUDE.sub(include, text)


def build(
    source: str, statement: tuple[str, str, str, str], fragments: dict[str, str]
) -> Query[Any]:
    name, returns, doc, text = statement
    text = expand(name, text, fragments)
    native, order = to_native(text)
    return Query(
        name=name,
        returns=cast(Returns, returns),
        doc=doc,
        text=text,
        params=frozenset(order),
        source=source,
        native=native,
        order=order,
    )


def parse(source: str, content: str) -> list[Query[Any]]:
    """Split one .sql file into its named statements, fragments in place."""
    statements, fragments = split(content)
    return [build(source, statement, fragments) for statement in statements]


def load() -> dict[str, Query[Any]]:
    """Parse every .sql file shipped here; a name may be defined only once.

    Fragments are shared across files (a statement of scheduler.sql includes the job
    row of jobs.sql).
    """
    files = sorted(
        (entry for entry in resources.files(__name__).iterdir()),
        key=lambda entry: entry.name,
    )
    parts: list[tuple[str, tuple[str, str, str, str]]] = []
    fragments: dict[str, str] = {}
    for entry in files:
        if entry.name.endswith(".sql"):
            statements, found = split(entry.read_text("utf-8"))
            if twice := fragments.keys() & found.keys():
                raise ValueError(f"fragment {sorted(twice)[0]!r} defined twice")
            fragments.update(found)
            parts.extend((entry.name, statement) for statement in statements)
    queries: dict[str, Query[Any]] = {}
    for source, statement in parts:
        query = build(source, statement, fragments)
        if query.name in queries:
            raise ValueError(f"{query.name!r} defined twice ({source})")
        queries[query.name] = query
    return queries


QUERIES = load()
