"""Helpers the skill packs share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from clawsdk.mcp.toolkit import load_skill_md, skill_server


def pack_server(module_file: str, **kwargs: Any) -> MCPServer:
    """The MCP server of the pack whose server.py is `module_file`, instructions from its SKILL.md."""
    return skill_server(load_skill_md(Path(module_file).parent / "SKILL.md"), **kwargs)


def config(task: Any, name: str) -> dict[str, Any]:
    """The task's tool_config for a skill, or {}."""
    return dict((getattr(task, "tool_config", None) or {}).get(name, {})) if task is not None else {}


def ext(path: str) -> str:
    return Path(path).suffix.lower()
