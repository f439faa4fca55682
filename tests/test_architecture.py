"""The layers of the house, checked from the import graph (module- and function-level
imports alike): clkernels never imports pyedmcl; the kernel families (pyedmcl.kernels)
never import the algorithms built on them; no module takes part in an import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("clkernels", "pyedmcl")
ALGORITHMS = ("pyedmcl.edm", "pyedmcl.rqa", "pyedmcl.xmap", "pyedmcl.neighbors",
              "pyedmcl.cli", "pyedmcl.compat", "pyedmcl.report")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _resolve(mod: str, is_pkg: bool, level: int, name: str | None) -> str:
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (type-only imports)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.If) and isinstance(child.test, ast.Name)
                    and child.test.id == "TYPE_CHECKING"):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (_resolve(mod, is_pkg, node.level, node.module) if node.level
                        else node.module or "")
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for t in targets:
                # the deepest known module the name refers to (a submodule or its package)
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod and not mod.startswith(t + "."):
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _is_package_init(mod: str) -> bool:
    return (ROOT / Path(*mod.split(".")) / "__init__.py").is_file()


def test_no_import_cycles():
    graph = import_graph()
    # a package's __init__ re-exporting its submodules is no cycle of the code's layers
    graph = {m: {t for t in ts if not (_is_package_init(t) and m.startswith(t + "."))}
             for m, ts in graph.items() if not _is_package_init(m)}
    graph = {m: {t for t in ts if t in graph} for m, ts in graph.items()}
    assert _cycles(graph) == []


def test_clkernels_does_not_import_pyedmcl():
    bad = {m: sorted(t for t in ts if t.startswith("pyedmcl"))
           for m, ts in import_graph().items() if m.startswith("clkernels")}
    assert {m: ts for m, ts in bad.items() if ts} == {}


def test_kernel_families_do_not_import_algorithms():
    bad = {m: sorted(t for t in ts if t.startswith(ALGORITHMS))
           for m, ts in import_graph().items() if m.startswith("pyedmcl.kernels")}
    assert {m: ts for m, ts in bad.items() if ts} == {}
