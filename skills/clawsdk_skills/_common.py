"""Helpers the skill packs share."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from clawsdk.mcp.toolkit import load_skill_md, skill_server
from clawsdk.sandbox.base import MAX_READ_BYTES

#: how many times the read cap all the parts of one archive (DOCX, XLSX) may unpack to together
UNPACKED_PARTS = 4


def pack_server(module_file: str, **kwargs: Any) -> MCPServer:
    """The MCP server of the pack whose server.py is `module_file`, instructions from its SKILL.md."""
    return skill_server(load_skill_md(Path(module_file).parent / "SKILL.md"), **kwargs)


def config(task: Any, name: str) -> dict[str, Any]:
    """The task's tool_config for a skill, or {}."""
    return dict((getattr(task, "tool_config", None) or {}).get(name, {})) if task is not None else {}


def ext(path: str) -> str:
    return Path(path).suffix.lower()


def check_unpacked(z: zipfile.ZipFile, path: str, limit: int = MAX_READ_BYTES) -> None:
    """Refuse an archive (DOCX, XLSX) whose parts unpack past the read cap, before anything is unpacked: a
    few MiB of zeros deflate a thousandfold, so a file under the cap could still unpack to gigabytes in the
    runner. A part may hold `limit` bytes and all parts together `UNPACKED_PARTS` times that. The sizes are the
    archive's own word for them, and zipfile never unpacks a part past what its entry says."""
    total = 0
    for info in z.infolist():
        total += info.file_size
        if info.file_size > limit:
            raise ToolError(f"{path}: its part {info.filename} unpacks to {info.file_size / 2**20:.1f} MiB, "
                            f"over the {limit / 2**20:g} MiB read of one file")
    if total > UNPACKED_PARTS * limit:
        raise ToolError(f"{path}: its parts unpack to {total / 2**20:.1f} MiB together, over the "
                        f"{UNPACKED_PARTS * limit / 2**20:g} MiB this skill unpacks of one file")
