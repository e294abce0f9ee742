"""clawsdk's skill packs: each a folder with a SKILL.md and an MCP server of domain tools.

Every pack's `server(sandbox, task=None)` returns an MCP server whose tools act on the
sandbox's workspace and whose instructions are the pack's SKILL.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKS = ("spreadsheets", "documents", "calendar", "mail", "git", "data")
HERE = Path(__file__).parent


def pack_dir(name: str) -> Path:
    return HERE / name


def factory(name: str) -> Callable[..., Any]:
    """The server factory of a built-in pack, imported on first use."""

    def make(sandbox: Any, task: Any = None) -> Any:
        return importlib.import_module(f"clawsdk_skills.{name}.server").server(sandbox, task)

    make.__name__ = f"{name}_server"
    make.__doc__ = f"The {name} skill server (skills/clawsdk_skills/{name}/SKILL.md)."
    make.skill_dir = pack_dir(name)  # type: ignore[attr-defined]
    make.server_ref = f"clawsdk_skills.{name}.server:server"  # type: ignore[attr-defined]  # the tool host's import
    return make


__all__ = ["PACKS", "factory", "pack_dir"]
