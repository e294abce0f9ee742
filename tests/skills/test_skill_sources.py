"""Skills from folders (user folder, extra dirs), from a task's workspace, and from an installed plugin package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from clawsdk_plugins.sandboxes.local import LocalSandbox

from clawsdk.mcp.session import ToolSession
from clawsdk.plugins import Registry
from clawsdk.runtime.rollout import tool_servers
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import File, Task
from tests.conftest import CHECKOUT_PATH

REPO = Path(__file__).resolve().parents[2]
TOOL_SKILL = '''
from clawsdk.mcp.toolkit import skill_server, tool_errors
from pathlib import Path

def server(sandbox, task=None):
    srv = skill_server(Path(__file__).parent)

    @srv.tool()
    @tool_errors
    async def shout(path: str) -> str:
        """The file's text in capitals."""
        return (await sandbox.read(path)).decode().upper()

    return srv
'''


def _skill(folder: Path, name: str, desc: str, server_py: str | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\nUse {name} well.\n")
    if server_py:
        (folder / "server.py").write_text(server_py)


def _registry() -> Registry:
    reg = Registry()
    reg.load_builtins()
    return reg


def test_folder_skills_load_from_the_user_folder_and_extra_dirs(tmp_path, monkeypatch):
    home, extra = tmp_path / "home", tmp_path / "extra"
    _skill(home / "shouting", "shouting", "Capitalise files.", TOOL_SKILL)
    _skill(home / "style", "style", "House style (home copy).")
    _skill(extra / "style", "style", "House style (extra dir wins).")
    _skill(extra / "broken", "Not A Name", "x")
    monkeypatch.setenv("CLAWSDK_SKILLS_HOME", str(home))
    monkeypatch.setenv("CLAWSDK_SKILLS_PATH", str(extra))
    reg = _registry()
    assert {"shouting", "style"} <= set(reg.names("skills")) and "Not A Name" not in reg.names("skills")
    task = Task(id="t", instruction="x", tools=["core", "shouting", "style"], workspace=[File(path="a.txt", text="hi")])

    async def main():
        async with LocalSandbox() as sb:
            await sb.start(task)
            async with ToolSession.open(tool_servers(task, sb, reg), Recorder(None, "r"), sandbox=sb, task=task) as ts:
                assert (await ts.call("shout", {"path": "a.txt"})).text == "HI"
                assert (await ts.call("shout", {"path": "../x"})).is_error
                instructions = ts.instructions()
                assert "Capitalise files." in instructions["shouting"]
                assert "House style (extra dir wins)." in instructions["style"]

    anyio.run(main)


def test_workspace_skills_are_listed_for_the_agent_to_read(tmp_path):
    task = Task(id="t", instruction="x", tools=["core", "workspace-skills"], workspace=[
        File(path="skills/invoices/SKILL.md", text="---\nname: invoices\ndescription: Number invoices.\n---\nUse INV-.\n"),
        File(path="skills/bad/SKILL.md", text="no frontmatter"), File(path="notes.md", text="x")])

    async def main():
        async with LocalSandbox() as sb:
            await sb.start(task)
            async with ToolSession.open(tool_servers(task, sb, _registry()), Recorder(None, "r"), sandbox=sb,
                                        task=task) as ts:
                text = ts.instructions()["workspace-skills"]
                assert "- invoices: Number invoices. (read skills/invoices/SKILL.md before using it)" in text
                assert "skills/bad/SKILL.md: unreadable" in text
                assert "Use INV-." in (await ts.call("read", {"path": "skills/invoices/SKILL.md"})).text

    anyio.run(main)


@pytest.mark.slow
def test_example_skill_package_installs_shows_in_plugins_and_passes_its_tests(tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                          str(REPO / "examples" / "skill-plugin")], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), CHECKOUT_PATH])}
    clawsdk = str(Path(sys.executable).parent / "clawsdk")
    out = subprocess.run([clawsdk, "plugins", "--json"], capture_output=True, text=True, env=env, timeout=120)
    todo = [p for p in json.loads(out.stdout) if p["name"] == "todo"]
    assert todo == [{"name": "todo", "origin": "entry point clawsdk-skill-todo 0.1.0",
                     "provides": {"skills": ["todo"]}, "error": None, "notes": []}]
    check = subprocess.run([clawsdk, "skills", "check", "todo"], capture_output=True, text=True, env=env, timeout=120)
    assert check.returncode == 0 and "skill todo: passes" in check.stdout, check.stdout + check.stderr
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            str(REPO / "examples" / "skill-plugin" / "tests")],
                           capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert tests.returncode == 0 and "2 passed" in tests.stdout, tests.stdout + tests.stderr
