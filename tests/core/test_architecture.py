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
#: inside the core: the engine never imports the applications or the CLI built on it
CORE_ENGINE = ("tasks", "models", "store", "sandbox", "mcp", "runtime", "serve", "proxy", "verify", "train", "plugins",
               "errors", "hookspecs")
#: built on the engine: synthesis, data, benchmarks, the conformance kits, the CLI
CORE_APPLICATIONS = ("data", "synth", "bench", "testing", "cli")
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

    def visit_FunctionDef(self, node):  # noqa: N802
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_If(self, node):  # noqa: N802
        if _is_type_checking(node):
            return  # annotations only; never imported at run time
        self.generic_visit(node)

    def visit_Import(self, node):  # noqa: N802
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):  # noqa: N802
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
    assert {"clawsdk.cli", "clawsdk.plugins", "clawsdk_plugins.agents", "clawsdk_tools.plugin",
            "clawsdk_tui.app"} <= MODULES
    assert len(list(_edges())) > 300


def test_layers_import_only_downward():
    wrong = []
    for module, target, line in _edges():
        src, dst = module.split(".")[0], target.split(".")[0]
        if dst == src or dst in MAY_IMPORT[src] or (module, dst) in UPWARD_EXCEPTIONS:
            continue
        wrong.append(f"{module}:{line} imports {target} ({src} may import {sorted(MAY_IMPORT[src]) or 'only itself'})")
    assert not wrong, "imports against the layer rule (docs/architecture.md):\n" + "\n".join(wrong)


def test_core_engine_never_imports_its_applications():
    wrong = []
    for module, target, line in _edges():
        parts, tparts = module.split("."), target.split(".")
        if parts[0] != "clawsdk" or tparts[0] != "clawsdk" or len(parts) < 2 or len(tparts) < 2:
            continue
        if parts[1] in CORE_ENGINE and tparts[1] in CORE_APPLICATIONS:
            wrong.append(f"{module}:{line} imports {target}")
        if parts[1] != "cli" and module != "clawsdk.__main__" and tparts[1] == "cli":
            wrong.append(f"{module}:{line} imports the CLI ({target})")
    assert not wrong, "\n".join(wrong)


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


def test_no_import_cycles_at_import_time():
    """Imports that run when a module loads form no cycle (one would make import order matter).
    Imports inside functions are how a module defers a heavy or upward dependency; they may close a
    loop inside one package, never across the layers (the layer test)."""
    cycles = _cycles(_without_parent_packages(_edges(import_time_only=True)))
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_cycles_between_top_level_packages():
    pkg_edges = {(a.split(".")[0], b.split(".")[0], 0) for a, b, _ in _edges() if a.split(".")[0] != b.split(".")[0]}
    pkg_edges -= {(m.split(".")[0], dst, 0) for m, dst in UPWARD_EXCEPTIONS}
    assert not _cycles(pkg_edges)


@pytest.mark.parametrize("broken", ["layer", "cycle"])
def test_the_checks_catch_a_violation(broken):
    """The checks above fail on a tree that breaks the rule (guards against a check that cannot fail)."""
    if broken == "layer":
        edges = [("clawsdk.data.export", "clawsdk_plugins.agent_toolloop", 1)]
        wrong = [e for e in edges if e[1].split(".")[0] not in MAY_IMPORT["clawsdk"] | {"clawsdk"}]
        assert wrong
    else:
        edges = [("clawsdk.tasks.convert", "clawsdk_plugins.clawgym", 1),
                 ("clawsdk_plugins.clawgym", "clawsdk.tasks.convert", 2)]
        assert _cycles(edges) == [["clawsdk.tasks.convert", "clawsdk_plugins.clawgym"]]
