"""The core workspace tools (OpenClaw's fs and runtime groups) as one MCP server bound to a sandbox."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from clawsdk.errors import ClawError

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox
    from clawsdk.tasks.model import Task

MAX_READ_CHARS = 64_000
MAX_GREP_FILE = 2 * 1024 * 1024
MAX_MATCHES = 200


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """`**` spans folders, `*` and `?` stay within one path segment."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _tool_errors(fn):
    """Turn the errors a caller can fix (bad path, missing file) into tool errors the agent reads."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except FileNotFoundError as e:
            raise ToolError(f"no such file: {e.filename or e}") from e
        except (OSError, ValueError, ClawError) as e:
            raise ToolError(str(e)) from e

    return wrapper


def _decode(data: bytes, path: str) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path} is a binary file ({len(data)} bytes); use exec to inspect it")
    return data.decode("utf-8", "replace")


def core_server(sandbox: Sandbox, task: Task | None = None) -> MCPServer:
    """The `core` tool server: read, write, edit, ls, glob, grep, exec in `sandbox`'s workspace."""
    server = MCPServer("core", instructions="Tools that act on the task's workspace. Paths are relative to it.")
    default_timeout = task.limits.tool_timeout_s if task else 60.0

    @server.tool()
    @_tool_errors
    async def read(path: str, offset: int = 1, limit: int = 2000) -> str:
        """Read a text file of the workspace. offset: first line (1-based); limit: number of lines."""
        text = _decode(await sandbox.read(path), path)
        lines = text.splitlines(keepends=True)
        start = max(offset, 1) - 1
        chunk = "".join(lines[start : start + max(limit, 1)])
        shown_until = start + len(lines[start : start + max(limit, 1)])
        notes = []
        if len(chunk) > MAX_READ_CHARS:
            chunk = chunk[:MAX_READ_CHARS]
            notes.append(f"[cut at {MAX_READ_CHARS} characters]")
        if shown_until < len(lines):
            notes.append(f"[{len(lines) - shown_until} more lines; read with offset={shown_until + 1}]")
        return chunk + ("\n" + "\n".join(notes) if notes else "")

    @server.tool()
    @_tool_errors
    async def write(path: str, content: str) -> str:
        """Create or overwrite a file in the workspace (parent folders are created)."""
        data = content.encode("utf-8")
        await sandbox.write(path, data)
        return f"wrote {len(data)} bytes to {path}"

    @server.tool()
    @_tool_errors
    async def edit(path: str, old_text: str, new_text: str, replace_all: bool = False) -> str:
        """Replace an exact occurrence of old_text in a file (it must be unique unless replace_all)."""
        if old_text == "":
            raise ToolError("old_text is empty; use write to create a file")
        text = _decode(await sandbox.read(path), path)
        count = text.count(old_text)
        if count == 0:
            raise ToolError(f"old_text not found in {path}")
        if count > 1 and not replace_all:
            raise ToolError(f"old_text occurs {count} times in {path}; add context to make it unique or set replace_all")
        text = text.replace(old_text, new_text) if replace_all else text.replace(old_text, new_text, 1)
        await sandbox.write(path, text.encode("utf-8"))
        return f"replaced {count if replace_all else 1} occurrence(s) in {path}"

    @server.tool()
    @_tool_errors
    async def ls(path: str = ".", recursive: bool = False) -> str:
        """List a folder of the workspace; folders end with '/'."""
        entries = await sandbox.list(path, recursive=recursive)
        lines = [e.path + "/" if e.is_dir else f"{e.path}  ({e.size} bytes)" for e in entries]
        return "\n".join(lines) if lines else "(empty)"

    @server.tool()
    @_tool_errors
    async def glob(pattern: str) -> str:
        """Find workspace files whose path matches a glob pattern such as '**/*.py'."""
        rx = glob_to_regex(pattern)
        hits = [e.path for e in await sandbox.list(".", recursive=True) if not e.is_dir and rx.match(e.path)]
        return "\n".join(hits) if hits else "(no match)"

    @server.tool()
    @_tool_errors
    async def grep(pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
        """Search files for a regular expression; prints path:line:text for each match."""
        try:
            rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as e:
            raise ToolError(f"invalid regular expression: {e}") from e
        name_rx = glob_to_regex(glob) if glob else None
        out: list[str] = []

        def scan(p: str, data: bytes) -> None:
            if b"\x00" in data[:8192]:
                return
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line) and len(out) < MAX_MATCHES:
                    out.append(f"{p}:{n}:{line[:500]}")

        if path not in ("", ".", "./"):
            try:
                scan(path, await sandbox.read(path))
                return "\n".join(out) if out else "(no match)"
            except IsADirectoryError:
                pass
        for e in await sandbox.list(path, recursive=True):
            if len(out) >= MAX_MATCHES:
                break
            if e.is_dir or e.size > MAX_GREP_FILE or (name_rx and not name_rx.match(e.path)):
                continue
            scan(e.path, await sandbox.read(e.path))
        if len(out) >= MAX_MATCHES:
            out.append(f"[stopped at {MAX_MATCHES} matches]")
        return "\n".join(out) if out else "(no match)"

    @server.tool()
    @_tool_errors
    async def exec(command: str, timeout: float | None = None, workdir: str | None = None) -> dict:
        """Run a bash command in the workspace; returns exit_code, stdout, stderr."""
        limit = min(timeout or default_timeout, default_timeout)
        result = await sandbox.exec(command, timeout=limit, cwd=workdir)
        return {
            "exit_code": result.exit_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "timed_out": result.timed_out,
        }

    return server
