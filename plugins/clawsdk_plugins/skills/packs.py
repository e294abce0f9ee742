"""Skills: the built-in packs, skill folders (a user folder and extra dirs), and a task workspace's skills/.

- built-in packs (`clawsdk_skills`): spreadsheets, documents, calendar, mail, git, data
- skill folders: every sub-folder with a SKILL.md in ~/.clawsdk/skills (CLAWSDK_SKILLS_HOME) and
  in the folders listed in CLAWSDK_SKILLS_PATH (separated by ':'); later ones win on a name clash,
  and folder skills win over built-ins. A folder's `server.py` with `server(sandbox, task)` gives
  it tools; without one it is an instruction-only skill.
- `workspace-skills`: the skills a task ships in its workspace under skills/NAME/SKILL.md, offered
  the AgentSkills way: their names and descriptions in the instructions, the agent reads the
  SKILL.md when it needs it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from clawsdk.hookspecs import hookimpl
from clawsdk.mcp.toolkit import SkillFormatError, ToolServer, load_skill_md, parse_skill_md, skill_server
from clawsdk.sandbox.toolruntime import ServerRef
from clawsdk.tasks.model import McpServer

log = logging.getLogger(__name__)


def skill_dirs() -> list[Path]:
    """The folders searched for skill folders, lowest precedence first."""
    home = os.environ.get("CLAWSDK_SKILLS_HOME") or str(Path.home() / ".clawsdk" / "skills")
    dirs = [Path(home)]
    dirs += [Path(p) for p in os.environ.get("CLAWSDK_SKILLS_PATH", "").split(os.pathsep) if p.strip()]
    return dirs


def folder_skill(folder: Path):
    """A server factory for a skill folder: SKILL.md, and its tools from `server.py` (`server(sandbox, task)`)
    or from a stdio MCP server its SKILL.md declares (`metadata.clawsdk.mcp.command`), run inside the sandbox
    with `{skill_dir}` standing for the folder as the sandbox shows it."""
    manifest = load_skill_md(folder)
    server_py = folder / "server.py"
    command = mcp_command(manifest)

    def make(sandbox: Any, task: Any = None) -> Any:
        if server_py.is_file() and command is None:
            spec = importlib.util.spec_from_file_location(f"clawsdk_folder_skill_{manifest.name.replace('-', '_')}",
                                                          server_py)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.server(sandbox, task)
        return skill_server(manifest)

    make.skill_dir = folder  # type: ignore[attr-defined]
    if command is not None:
        make.mcp_command = command  # type: ignore[attr-defined]
    elif server_py.is_file():
        make.server_ref = ServerRef(file=str(server_py))  # type: ignore[attr-defined]  # the tool host loads it
    return make


def mcp_command(manifest: Any) -> McpServer | None:
    """The stdio MCP server a SKILL.md declares under `metadata.clawsdk.mcp` ({command: [...], env: {...}})."""
    declared = (manifest.metadata.get("clawsdk") or {}).get("mcp") if isinstance(manifest.metadata, dict) else None
    if declared is None:
        return None
    try:
        return McpServer.model_validate(declared)
    except ValueError as e:
        raise SkillFormatError(f"{manifest.path}: metadata.clawsdk.mcp: {e}; give {{command: [PROGRAM, ARGS...]}}, "
                               "e.g. command: ['{python}', '{skill_dir}/server.py']") from None


def find_folder_skills(dirs: list[Path] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for base in dirs if dirs is not None else skill_dirs():
        if not base.is_dir():
            continue
        for sub in sorted(base.iterdir()):
            if not (sub / "SKILL.md").is_file():
                continue
            try:
                manifest = load_skill_md(sub)
                found[manifest.name] = folder_skill(sub)
            except SkillFormatError as e:
                log.warning("skipping skill folder %s: %s", sub, e)
    return found


def workspace_skills_server(sandbox: Any, task: Any = None) -> ToolServer:
    """Instructions listing the skills in the task's workspace (skills/NAME/SKILL.md)."""
    lines = []
    for f in getattr(task, "workspace", []) if task is not None else []:
        parts = f.path.split("/")
        if len(parts) == 3 and parts[0] == "skills" and parts[2] == "SKILL.md" and f.text is not None:
            try:
                m = parse_skill_md(f.text, f.path)
            except SkillFormatError as e:
                lines.append(f"- {f.path}: unreadable ({e})")
                continue
            lines.append(f"- {m.name}: {m.description} (read {f.path} before using it)")
    text = ("The workspace provides these skills. When a task matches one, read its SKILL.md with the read "
            "tool and follow it.\n" + "\n".join(lines)) if lines else None
    return ToolServer("workspace-skills", instructions=text)


@hookimpl
def register_skills(register):
    import clawsdk_skills

    for name in clawsdk_skills.PACKS:
        register(name, clawsdk_skills.factory(name))
    register("workspace-skills", workspace_skills_server)
    for name, make in find_folder_skills().items():
        register(name, make)
