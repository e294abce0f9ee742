"""The import rule of docs/architecture.md, checked over the source tree (AST, nothing imported).

Layers, lowest first: the core `clawsdk` (its engine, then its applications, then its CLI);
`clawsdk_tools` and `clawsdk_skills` (MCP servers over the core); `clawsdk_plugins` (everything
registered through the hooks); `clawsdk_tui` (a leaf only the CLI starts). A layer imports only
layers below it. The core reaches its plugins only through the registry, by the module names in
`clawsdk.plugins.DEFAULT_PLUGINS` (strings, not imports).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    "clawsdk": REPO / "clawsdk",
    "clawsdk_tools": REPO / "tools" / "clawsdk_tools",
    "clawsdk_skills": REPO / "skills" / "clawsdk_skills",
    "clawsdk_plugins": REPO / "plugins" / "clawsdk_plugins",
    "clawsdk_tui": REPO / "tui" / "clawsdk_tui",
}
#: top-level package -> the packages it may import (itself always)
MAY_IMPORT = {
    "clawsdk": set(),
    "clawsdk_tools": {"clawsdk"},
    "clawsdk_skills": {"clawsdk"},
    "clawsdk_plugins": {"clawsdk", "clawsdk_tools", "clawsdk_skills"},
    "clawsdk_tui": {"clawsdk"},
}
#: the one sanctioned upward edge: `clawsdk watch` starts the TUI (textual loads there and nowhere else)
UPWARD_EXCEPTIONS = {("clawsdk.cli.watch_cmd", "clawsdk_tui")}
#: the core's folders as layers, lowest first: a module imports only its own layer and those below it
#: (at import time or inside a function alike). The engine, then the applications built on it, then the CLI.
CORE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("clawsdk", "errors", "hookspecs", "_lazy", "_text", "_http", "_version", "rematch"),  # leaves (the root is lazy)
    ("plugins",),   # the registry
    ("tasks",),     # the task model, its files and formats
    ("store",),     # the SQLite store, its writer and the recorder that feeds it
    ("sandbox",),   # isolation and the tool runtime inside it
    ("models",),    # model backends' shared parts
    ("mcp",),       # the tool session client, the tool host, tool authoring
    ("verify",),    # verdicts and checks
    ("runtime",),   # agents, rollouts, the runner, probes, control
    ("proxy",),     # the recording model proxy
    ("serve",),     # hosting tools for an outside agent (starts the proxy)
    ("train",),     # the trainer contract
    ("synth", "bench"),  # applications: task synthesis, benchmarks
    ("data",),      # trajectories, selection, exports (selection leaves benchmark tasks out)
    ("testing",),   # the conformance kits
    ("cli", "__main__"),
)
LAYER = {name: i for i, names in enumerate(CORE_LAYERS) for name in names}
#: the engine: everything below the applications
ENGINE = {name for names in CORE_LAYERS[:LAYER["train"] + 1] for name in names}
#: imported by everything, so they import nothing of clawsdk
CORE_LEAVES = ("clawsdk.errors", "clawsdk.hookspecs")


def _module_name(pkg: str, root: Path, path: Path) -> str:
    parts = [pkg, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class Imports(ast.NodeVisitor):
    """Every import of a module: (target, at import time?). Imports inside functions run later."""

    def __init__(self, module: str, is_package: bool):
        self.module, self.is_package = module, is_package
        self.found: list[tuple[str, bool, int]] = []
        self.depth = 0

    def _add(self, target: str, line: int) -> None:
        self.found.append((target, self.depth == 0, line))

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node):
        if _is_type_checking(node):
            return  # annotations only; never imported at run time
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):
        base = node.module or ""
        if node.level:
            parts = self.module.split(".")
            keep = len(parts) - node.level + (1 if self.is_package else 0)
            base = ".".join(parts[:keep] + ([base] if base else []))
        self._add(base, node.lineno)
        for alias in node.names:  # `from pkg import module` imports pkg.module
            self._add(f"{base}.{alias.name}", node.lineno)


def _graph() -> dict[str, list[tuple[str, bool, int]]]:
    graph = {}
    for pkg, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            name = _module_name(pkg, root, path)
            visitor = Imports(name, path.name == "__init__.py")
            visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
            graph[name] = visitor.found
    return graph


GRAPH = _graph()
MODULES = set(GRAPH)


def _edges(import_time_only: bool = False):
    for module, found in GRAPH.items():
        for target, at_import, line in found:
            if target in MODULES and target != module and (at_import or not import_time_only):
                yield module, target, line


def test_the_tree_is_read():
    assert {"clawsdk.cli", "clawsdk.plugins", "clawsdk_plugins.agents.builtin", "clawsdk_tools.plugin",
            "clawsdk_tui.app"} <= MODULES
    assert len(list(_edges())) > 300


def _between_packages(edges) -> list[str]:
    """Imports against the package rule (MAY_IMPORT)."""
    wrong = []
    for module, target, line in edges:
        src, dst = module.split(".")[0], target.split(".")[0]
        if dst == src or dst in MAY_IMPORT[src] or (module, dst) in UPWARD_EXCEPTIONS:
            continue
        wrong.append(f"{module}:{line} imports {target} ({src} may import {sorted(MAY_IMPORT[src]) or 'only itself'})")
    return wrong


def _core_layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _upward(edges) -> list[str]:
    """Imports inside the core from a layer up to a higher one (CORE_LAYERS), at import time or deferred."""
    wrong = []
    for module, target, line in edges:
        if module.split(".")[0] != "clawsdk" or target.split(".")[0] != "clawsdk":
            continue
        src, dst = _core_layer(module), _core_layer(target)
        if src not in LAYER or dst not in LAYER:
            wrong.append(f"{module}:{line}: {src if src not in LAYER else dst} is in no layer of CORE_LAYERS")
        elif LAYER[dst] > LAYER[src]:
            wrong.append(f"{module}:{line} imports {target}: {src} (layer {LAYER[src]}) is below {dst} "
                         f"(layer {LAYER[dst]})")
    return wrong


def test_packages_import_only_downward():
    wrong = _between_packages(_edges())
    assert not wrong, "imports against the layer rule (docs/architecture.md):\n" + "\n".join(wrong)


def test_core_folders_are_layers():
    """Every folder of the core is in a layer, and none imports a layer above its own: the engine never reaches
    the applications, and nothing but the CLI imports the CLI."""
    folders = {p.name for p in PACKAGES["clawsdk"].iterdir() if p.name != "__pycache__" and (
        p.is_dir() or p.suffix == ".py")}
    assert {f.removesuffix(".py") for f in folders} - {"__init__"} <= set(LAYER), "a folder in no layer"
    wrong = _upward(_edges())
    assert not wrong, "imports against the core's layers (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_leaves_import_nothing_of_clawsdk():
    wrong = [f"{m}:{line} imports {t}" for m, t, line in _edges() if m in CORE_LEAVES]
    assert not wrong, "\n".join(wrong)


def _cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    succ = defaultdict(set)
    for a, b, _ in edges:
        succ[a].add(b)
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(succ[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        n = stack.pop()
                        on_stack.discard(n)
                        comp.append(n)
                        if n == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _without_parent_packages(edges):
    """A package's __init__ imported by its own submodules is how Python loads them, not a cycle."""
    for a, b, line in edges:
        if not a.startswith(b + ".") and not b.startswith(a + "."):
            yield a, b, line


def test_no_import_cycles():
    """No two modules import each other, at import time or inside a function: a circle makes import order
    matter, and a deferred import that closes one is a knot hidden, not undone."""
    cycles = _cycles(_without_parent_packages(_edges()))
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_cycles_between_top_level_packages():
    pkg_edges = {(a.split(".")[0], b.split(".")[0], 0) for a, b, _ in _edges() if a.split(".")[0] != b.split(".")[0]}
    pkg_edges -= {(m.split(".")[0], dst, 0) for m, dst in UPWARD_EXCEPTIONS}
    assert not _cycles(pkg_edges)


@pytest.mark.parametrize("broken", ["package", "layer", "cycle"])
def test_the_checks_catch_a_violation(broken):
    """Each check above fails on this tree with one planted import (guards against a check that cannot fail)."""
    edges = list(_edges())
    if broken == "package":
        planted = ("clawsdk.data.export", "clawsdk_plugins.agents.toolloop", 1)
        assert not _between_packages(edges) and _between_packages([*edges, planted])
    elif broken == "layer":  # the task model reaching up to the runner
        planted = ("clawsdk.tasks.model", "clawsdk.runtime.runner", 1)
        assert not _upward(edges)
        assert _upward([*edges, planted]) == ["clawsdk.tasks.model:1 imports clawsdk.runtime.runner: tasks "
                                              f"(layer {LAYER['tasks']}) is below runtime (layer {LAYER['runtime']})"]
    else:  # a deferred import from the store back to the recorder that imports it
        planted = ("clawsdk.store.store", "clawsdk.store.recorder", 1)
        assert ("clawsdk.store.recorder", "clawsdk.store.store") in {(a, b) for a, b, _ in edges}
        assert not _cycles(_without_parent_packages(edges))
        assert ["clawsdk.store.recorder", "clawsdk.store.store"] in _cycles(_without_parent_packages(
            [*edges, planted]))
