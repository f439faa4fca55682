"""The layers of the house, checked from the import graph (docs/design.md, "Layers").

The graph holds every import of a module: at module level, inside functions, under
``if TYPE_CHECKING:`` (a type-only import still ties the two modules' design), and every
string naming one of our modules (``"pyedmcl.cli.edm_cmd"``, ``"pkg.mod:attr"``): the
registries loaded with ``import_module``. Only a module's ``if __name__ == "__main__":``
block is left out (it runs as a script, never on import). A module's import of its own
package (``from . import x``) is implied by Python and no edge, except the root
``pyedmcl``: that is the public facade, a layer of its own.

Checked: (a) no module takes part in an import cycle, package ``__init__`` modules
included; (b) no cycle among pyedmcl's subpackages and root modules; (c) every edge
between two of them goes down the layer table :data:`LAYERS` (or is one of the few
sideways edges :data:`SIDEWAYS` allows; the base layer's helpers import one another).
Also: (d) no function of ``clkernels`` or ``pyedmcl`` (outside ``pyedmcl/compat``, the
pyEDM-compatible facade) is longer than :data:`MAX_FUNCTION_LINES` (docs/design.md:
small named steps; a long function is split into steps that pass a typed spec down).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("clkernels", "pyedmcl")

#: lowest first; a unit is a subpackage of pyedmcl, a root module (``pyedmcl.io``), the
#: facade ``pyedmcl`` (its __init__) or ``clkernels``. Root modules not named here are
#: helpers of the base layer; a new subpackage must be given a layer here.
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("runtime", frozenset({"clkernels"})),
    ("base", frozenset({"pyedmcl.data"})),  # + every root module (validation, io, ...)
    ("kernels", frozenset({"pyedmcl.kernels"})),
    ("primitives", frozenset({"pyedmcl.primitives"})),
    ("analyses", frozenset({"pyedmcl.neighbors", "pyedmcl.edm", "pyedmcl.rqa",
                            "pyedmcl.xmap"})),
    ("significance", frozenset({"pyedmcl.significance", "pyedmcl.network"})),
    ("facade", frozenset({"pyedmcl"})),
    ("interfaces", frozenset({"pyedmcl.cli", "pyedmcl.report", "pyedmcl.compat"})),
]
#: the base layer: its helpers import one another freely (cycles are still refused)
BASE = 1
#: edges allowed between two units of one layer (the order inside it)
SIDEWAYS = frozenset({
    ("pyedmcl.edm", "pyedmcl.neighbors"),         # knn_method= of simplex/ccm
    ("pyedmcl.xmap", "pyedmcl.edm"),              # the all-to-all null reuses CCM's
    ("pyedmcl.network", "pyedmcl.significance"),  # the network's pairwise FDR step
    ("pyedmcl.cli", "pyedmcl.report"),            # `pyedmcl demo` runs the report
})

_MODULE_STRING = re.compile(r"^((?:clkernels|pyedmcl)(?:\.\w+)+)(?::\w+)?$")


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


def _is_main_block(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__"
                    for c in node.test.comparators))


def _import_nodes(tree: ast.AST):
    """Every node of ``tree`` but those of an ``if __name__ == "__main__":`` block."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if _is_main_block(child):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def _targets(node: ast.AST, mod: str, is_pkg: bool, mods: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = (_resolve(mod, is_pkg, node.level, node.module) if node.level
                else node.module or "")
        # ``from pkg import sub`` imports the submodule; ``from pkg import name`` the package
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                for a in node.names]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        m = _MODULE_STRING.match(node.value)
        return [m.group(1)] if m else []
    return []


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (see the module docstring for what counts)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in _import_nodes(ast.parse(path.read_text(), str(path))):
            is_string = isinstance(node, ast.Constant)
            for t in _targets(node, mod, is_pkg, mods):
                if is_string and t not in mods:
                    continue  # a string that only looks like a module path
                # the deepest known module the name refers to (a submodule or its package)
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod and (t == "pyedmcl" or not mod.startswith(t + ".")):
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
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
        for w in graph.get(v, ()):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def unit(mod: str) -> str:
    """The layer unit of a module: ``clkernels``, the facade ``pyedmcl``, or
    ``pyedmcl.<subpackage or root module>``."""
    if mod.split(".")[0] == "clkernels":
        return "clkernels"
    return ".".join(mod.split(".")[:2])


def layer_of(u: str) -> int | None:
    for i, (_, units) in enumerate(LAYERS):
        if u in units:
            return i
    if u.startswith("pyedmcl.") and (ROOT / Path(*u.split("."))).with_suffix(".py").is_file():
        return BASE  # a helper module at the package root
    return None


def _unit_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for a, bs in graph.items():
        for b in bs:
            if unit(a) != unit(b):
                edges.setdefault((unit(a), unit(b)), []).append((a, b))
    return edges


def test_no_module_cycles():
    cycles = _cycles(import_graph())
    assert not cycles, "modules in an import cycle:\n" + "\n".join(map(str, cycles))


def test_no_package_cycles():
    edges = _unit_edges(import_graph())
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    cycles = _cycles(graph)
    assert not cycles, "packages in an import cycle:\n" + "\n".join(
        f"{a} -> {b}: {sorted(edges[a, b])[:3]}" for c in cycles for a, b in sorted(edges)
        if a in c and b in c)


def test_every_unit_has_a_layer():
    units = {unit(m) for m in import_graph()}
    missing = sorted(u for u in units if layer_of(u) is None)
    assert not missing, f"give these a layer in LAYERS: {missing}"


def test_layers_are_imported_downward_only():
    bad = []
    for (a, b), mods in sorted(_unit_edges(import_graph()).items()):
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None or la > lb or (a, b) in SIDEWAYS or la == lb == BASE:
            continue
        why = "upward" if la < lb else "sideways"
        bad += [f"{m} -> {t} ({why}: {LAYERS[la][0]} -> {LAYERS[lb][0]})"
                for m, t in sorted(mods)]
    assert not bad, "imports against the layers (docs/design.md):\n" + "\n".join(bad)


#: the longest a function may be: its ``def`` line to its last statement (docstring,
#: comments and nested functions included; decorators not)
MAX_FUNCTION_LINES = 120


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """``(name, first line, lines)`` of every function or method in ``source`` (nested
    ones too) longer than ``limit`` lines."""
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > limit]


def test_long_functions_counts_def_to_last_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(118))
    src = (f"@staticmethod\ndef fits():\n{body}\n    return 0\n\n\n"
           f"async def over():\n{body}\n    y = 1\n    return y\n")
    assert long_functions(src) == [("over", 124, 121)]


def test_no_function_over_the_limit():
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("pyedmcl", "compat"):
                continue
            found += [f"{rel}:{line} {name} ({n} lines)"
                      for name, line, n in long_functions(path.read_text(encoding="utf-8"))]
    assert not found, (f"functions over {MAX_FUNCTION_LINES} lines (split them into named "
                       "steps):\n" + "\n".join(found))
