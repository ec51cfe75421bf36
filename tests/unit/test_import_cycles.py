"""No import cycle inside ``lakesink`` (issue #27): the module graph, read with ``ast`` (nothing imported), counting
imports inside functions and ``TYPE_CHECKING`` blocks too, has no strongly connected component of two or more
modules. (A cycle hidden in a function still ties the modules together: neither can be understood or moved alone.)"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lakesink"


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    modules = {_name(p): p for p in PACKAGE.rglob("*.py")}

    def known(name: str) -> str:
        while name and name not in modules:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name

    edges: dict[str, set[str]] = {}
    for mod, path in modules.items():
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out |= {known(a.name) for a in node.names if a.name.startswith("lakesink")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                    base = ".".join(package[: len(package) - (node.level - 1)] + ([node.module] if node.module else []))
                if base.startswith("lakesink"):
                    out |= {known(f"{base}.{a.name}") for a in node.names}  # a submodule, else the module itself
        edges[mod] = out - {mod, ""}
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_checker_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lakesink_has_no_import_cycle() -> None:
    edges = _graph()
    assert "lakesink.executor.results" in edges["lakesink.executor.progress"]  # the graph is read, not empty
    assert _cycles(edges) == []
