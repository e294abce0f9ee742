"""Workspace path rules shared by every sandbox and file tool."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from clawsdk.errors import PathEscapeError


def normalize_relative(path: str) -> str:
    """A clean relative POSIX path inside the workspace, or PathEscapeError."""
    if not isinstance(path, str) or path.strip() == "":
        raise PathEscapeError(f"empty path {path!r}")
    if "\x00" in path:
        raise PathEscapeError("path contains a NUL byte")
    p = path.replace("\\", "/")
    if p.startswith("/"):
        raise PathEscapeError(f"absolute path {path!r}: give a path relative to the workspace")
    norm = posixpath.normpath(p)
    if norm == ".." or norm.startswith("../"):
        raise PathEscapeError(f"path {path!r} leaves the workspace")
    return norm


def resolve_inside(root: Path, path: str, *, allow_root: bool = False) -> Path:
    """Resolve `path` under `root`, following symlinks, and refuse anything that lands outside."""
    rel = "." if allow_root and path in ("", ".", "./") else normalize_relative(path)
    root_real = Path(os.path.realpath(root))
    target = Path(os.path.realpath(root_real / rel))
    if target != root_real and root_real not in target.parents:
        raise PathEscapeError(f"path {path!r} resolves outside the workspace (through a symlink?)")
    if target == root_real and not allow_root and rel != ".":
        raise PathEscapeError(f"path {path!r} is the workspace itself")
    return target
