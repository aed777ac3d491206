"""The package's layers, checked from its source (docs/architecture.md).

Every import between modules of ``ultimate_jobs`` is read with ``ast``: module-level
ones, the ones inside functions, those under ``try`` or ``if``, and the type checker's
``if TYPE_CHECKING:`` blocks too (a type-level knot is a knot: issue 25). Two rules:

* no import cycle between modules, whatever the depth of the import;
* imports point down the layers: a module imports modules of its own layer or below.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import ultimate_jobs

PACKAGE = Path(ultimate_jobs.__file__).parent
ROOT = "ultimate_jobs"

# Bottom to top; a name is the module or package right under ultimate_jobs.
LAYERS: list[set[str]] = [
    {"ground"},  # exceptions, signals, keyset, ids, context, bounds, durations, cancel
    {"declaration"},  # what a job is: no database, no settings
    {"conf"},
    {"sql", "db", "models", "migrations"},  # storage: the one door
    {"observability"},
    {"limits"},
    {"enqueue"},
    {"durable"},
    {"runtime"},
    {"maintenance"},  # the leader's chores and lease
    {"scheduling"},
    {"retention", "webhooks", "backfills", "exports"},  # features built on jobs
    # tenancy: the tenant guard app models opt into (B7), beside the middleware
    {"api", "backend", "health", "views", "middleware", "jobs", "testing", "tenancy"},
    {"admin", "management", "agents"},  # operator surfaces
    {"__init__", "apps", "checks", "urls"},  # the face
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def imports_of(name: str) -> Iterator[tuple[str, int]]:
    """The package modules ``name`` imports, with the line of each import."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join([*here, base] if base else here)
            if base.split(".")[0] != ROOT:
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield (candidate if candidate in MODULES else base), node.lineno


def graph() -> dict[str, dict[str, int]]:
    edges: dict[str, dict[str, int]] = {}
    for name in MODULES:
        for target, line in imports_of(name):
            if target in MODULES and target != name:
                edges.setdefault(name, {}).setdefault(target, line)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    nodes = set(edges) | {target for targets in edges.values() for target in targets}
    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_checker_sees_imports_inside_functions_and_relative_ones():
    # A TYPE_CHECKING import counts: the type checker's knots are knots too.
    assert "ultimate_jobs.sql.rows" in dict(
        imports_of("ultimate_jobs.observability.tracing")
    )
    imports = dict(imports_of("ultimate_jobs.scheduling.schedules"))
    assert "ultimate_jobs.models" in imports  # read inside functions (apps not ready)
    assert "ultimate_jobs.models" not in {
        target for target, _ in imports_of("ultimate_jobs.scheduling.tasks")
    }
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == [["a", "b", "c"]]


def test_no_import_cycle_between_modules():
    assert cycles(graph()) == []


def test_every_module_belongs_to_a_layer():
    assert {layer(module) for module in MODULES} <= RANK.keys()


def test_imports_point_down_the_layers():
    upward = [
        f"{source}:{line} imports {target} ({layer(source)} -> {layer(target)})"
        for source, targets in graph().items()
        for target, line in targets.items()
        if RANK[layer(target)] > RANK[layer(source)]
    ]
    assert upward == []


DOC = PACKAGE.parent / "docs" / "architecture.md"


def documented() -> dict[str, set[str]]:
    """The modules docs/architecture.md lists under each package, from its layer
    diagram: ``pkg/   a, b, c`` and the indented lines that continue it."""
    block = DOC.read_text().split("```")[1]
    listed: dict[str, set[str]] = {}
    current: str | None = None
    for line in block.splitlines():
        found = re.search(r"\s([a-z_]+(?:/[a-z_]+)*)/\s{2,}(\S.*)$", line)
        if found:
            current, names = found.group(1), found.group(2)
        elif current is not None and re.match(r"^\s{30,}[a-z_]", line):
            names = line
        else:
            current = None
            continue
        names = re.sub(r"\([^)]*\)", "", names)
        listed.setdefault(current, set()).update(
            name.strip() for name in names.split(",") if name.strip()
        )
    return listed


def test_the_architecture_page_names_every_module_and_only_modules():
    """docs/architecture.md: every module it lists exists, and every module of every
    package is listed (issue 25)."""
    actual: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if len(parts) < 2 or parts[0] == "migrations" or parts[-1] == "__init__":
            continue
        actual.setdefault("/".join(parts[:-1]), set()).add(parts[-1])
    assert documented() == actual
    block = DOC.read_text().split("```")[1]
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert {name for name in top if not re.search(rf"\b{name}\b", block)} == set()
