"""The layout keeps its arrows pointing down (DESIGN.md, the layout): read from the source.

Every import counts, the deferred ones inside functions and the type-only ones under
``TYPE_CHECKING`` too: a circle held together by a late import is still a circle, and a
type-only import of a higher layer still ties the lower one to it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "relaystate"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "model", "scope", "inputs", "failpoints", "render", "version", "specs"),  # leaves
    ("task",),
    ("actions",),
    ("store",),
    ("runtime",),
    ("workers", "conversation", "memory", "llm"),
    ("server", "client", "cli", "demo", "testing"),
    ("__init__",),  # the public face: names everything, loads each on first use
)
"""Lowest first. A module may import its own layer or a lower one, never a higher one."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    for rank, names in enumerate(LAYERS):
        if top in names:
            return rank
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The modules of this package that one import statement names."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names if a.name in MODULES)
        return
    if node.level:
        base = module.split(".")
        if MODULES[module].name != "__init__.py":
            base.pop()
        base = base[: len(base) - node.level + 1]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    for alias in node.names:
        if f"{target}.{alias.name}" in MODULES:
            yield f"{target}.{alias.name}"  # a module imported by name
        elif target in MODULES:
            yield target


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports, wherever the import stands."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = {
            name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for name in _imported(module, node)
        }
        graph[module] = found - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_import_graph_reads_every_kind_of_import() -> None:
    """The reader itself: deferred, type-only and module-by-name imports are all seen."""
    graph = import_graph()
    assert "relaystate.task.edits" in graph["relaystate.runtime.runtime"]  # from ..task.edits
    assert "relaystate.runtime.runtime" in graph["relaystate.workers.presence"]
    assert "relaystate.failpoints" in graph["relaystate.cli"]  # inside a function
    assert "relaystate.runtime.runtime" in graph["relaystate"]  # under TYPE_CHECKING
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    assert circles(import_graph()) == []


def test_no_layer_imports_a_higher_one() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in import_graph().items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_every_package_init_is_empty_or_lazy() -> None:
    """A folder costs no start-up: its ``__init__`` imports nothing of the package at once
    (``relaystate say`` must not load layers it does not use)."""
    eager = []
    for module, path in MODULES.items():
        if path.name != "__init__.py" or module in ("relaystate", *_FACES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        eager += [f"{module}: line {node.lineno}" for node in tree.body if _imports_package(node)]
    assert eager == []


_FACES = (
    "relaystate.cli",
    "relaystate.client",
    "relaystate.conversation",
    "relaystate.demo",
    "relaystate.llm",
    "relaystate.server",
    "relaystate.store",
    "relaystate.store.schema",
    "relaystate.testing",
)
"""Packages whose ``__init__`` is their public surface, imported by whoever uses them; every
other folder only groups its modules."""


def _imports_package(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").startswith("relaystate")
    if isinstance(node, ast.Import):
        return any(a.name.startswith("relaystate") for a in node.names)
    return False


def test_callers_above_the_runtime_never_touch_the_store_or_the_writer() -> None:
    """conversation/, cli/ and demo/ go through the runtime (DESIGN.md: arrows point down)."""
    src = PACKAGE
    reach_in = re.compile(
        r"stores\.(tasks|sessions|coordination|schema|commit|read_turn|write)|_writer|TaskWriter"
    )
    offenders = [
        f"{path.relative_to(src)}: {match.group(0)}"
        for folder in ("conversation", "cli", "demo", "llm")
        for path in (src / folder).rglob("*.py")
        for match in reach_in.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
