"""The public surface: what `import clawsdk` offers users and plugin authors, and that the docs import nothing
else (docs/architecture.md, "Public surface")."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import clawsdk
from clawsdk import Agent, AgentContext, RunOptions, Store, Task, VerifierSpec, hookimpl, register_plugin, run_sync
from clawsdk.runtime.runner import RunConflict

REPO = Path(__file__).resolve().parents[2]
#: modules the docs may import besides the `clawsdk` root: packages whose whole surface is public
PUBLIC_MODULES = ("clawsdk.testing", "clawsdk.synth", "clawsdk.bench", "clawsdk.models.toolcalls", "clawsdk.store.events",
                  "clawsdk_plugins.agents.cli_agent")


def test_every_public_name_resolves_to_what_its_module_defines():
    for name in clawsdk.__all__:
        value = getattr(clawsdk, name)
        home = clawsdk._EXPORTS[name]
        assert getattr(importlib.import_module(home), name) is value, name
    assert {"hookimpl", "run", "RunOptions", "Task", "Sandbox", "Agent", "Verifier", "TaskSource", "Model",
            "Trainer", "skill_server"} <= set(clawsdk.__all__)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = clawsdk.no_such_name


def test_import_clawsdk_loads_none_of_the_heavy_dependencies():
    code = ("import sys, clawsdk; heavy = [m for m in ('textual', 'torch', 'trl', 'vllm', 'docker', 'ray', 'mcp', "
            "'pydantic', 'sqlite_utils') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _doc_imports():
    """(doc, line, module, names) for every import of clawsdk in a python block of README.md and docs/*.md."""
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for block in re.finditer(r"```python\n(.*?)```", text, re.S):
            line0 = text[:block.start()].count("\n") + 2
            try:
                tree = ast.parse(block.group(1))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("clawsdk"):
                    yield doc.name, line0 + node.lineno - 1, node.module, [a.name for a in node.names]
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith("clawsdk"):
                            yield doc.name, line0 + node.lineno - 1, alias.name, []


def _private(module: str, names: list[str]) -> list[str]:
    if module == "clawsdk":
        return [n for n in names if n not in clawsdk.__all__]
    def public(name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in PUBLIC_MODULES)

    if public(module) or (names and all(public(f"{module}.{n}") for n in names)):  # `from pkg import module`
        return []
    return [f"{module} (not a public module)"]


def test_the_docs_import_only_public_names():
    found = list(_doc_imports())
    assert len(found) > 10, "the docs' python blocks are read"
    wrong = [f"{doc}:{line}: {module}: {bad}" for doc, line, module, names in found
             if (bad := _private(module, names))]
    assert not wrong, "docs import what is not public (clawsdk.__all__ or PUBLIC_MODULES):\n" + "\n".join(wrong)


def test_the_check_catches_a_doc_importing_the_implementation():
    assert _private("clawsdk.runtime.runner", ["run"]) == ["clawsdk.runtime.runner (not a public module)"]
    assert _private("clawsdk", ["Recorder"]) == ["Recorder"]
    assert _private("clawsdk", ["run", "hookimpl"]) == []
    assert _private("clawsdk.models", ["toolcalls"]) == [] and _private("clawsdk.models", ["base"])


class _WritesDone(Agent):
    name = "writes-done"

    async def run(self, ctx: AgentContext) -> None:
        await ctx.tools.call("write", {"path": "done.txt", "content": "done"})


class _ThirdParty:
    """A plugin as its author writes it with the public names only."""

    @hookimpl
    def register_agents(self, register):
        register("writes-done", _WritesDone)


def test_a_plugin_written_with_public_names_only_runs_through_run_options(tmp_path):
    register_plugin(_ThirdParty(), "third-party-writes-done")
    task = Task(id="t", instruction="write done.txt",
                verifier=VerifierSpec(checks=[{"type": "file_exists", "path": "done.txt"}]))
    options = RunOptions(agent="writes-done", sandbox="local", samples=2, concurrency=2)
    result = run_sync([task], options, db=tmp_path / "s.db", run_id="pub")
    assert [(o.kind.value, o.reward) for o in result.outcomes] == [("ok", 1.0), ("ok", 1.0)]
    with Store(tmp_path / "s.db") as store:
        assert store.run("pub")["status"] == "finished"
    # keywords override the options' fields; a resume with another agent is refused, as before
    with pytest.raises(RunConflict):
        run_sync([task], options, agent="scripted", db=tmp_path / "s.db", run_id="pub")
    with pytest.raises(TypeError, match=r"unknown option.*sampels.*RunOptions has agent"):
        run_sync([task], options, sampels=3, db=tmp_path / "s.db")
    with pytest.raises(ValueError, match="samples must be at least 1"):
        RunOptions(samples=0)
