"""Workspace path rules shared by every sandbox and file tool."""

from __future__ import annotations

import posixpath

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
