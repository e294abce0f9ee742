"""OpenClaw's fs group (read, write, edit, apply_patch) plus ls, glob and grep, acting on a sandbox's workspace.

Every path goes through the sandbox, which refuses paths that leave the workspace (`..`,
absolute paths, symlinks out, NUL bytes); the refusal reaches the agent as a tool error.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import anyio

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from clawsdk.errors import FileTooLarge
from clawsdk.mcp.toolkit import decode_text, tool_errors, truncate
from clawsdk.rematch import in_process
from clawsdk.sandbox.paths import normalize_relative
from clawsdk_tools.patch import PatchError, apply_hunks, parse_patch

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

MAX_READ_CHARS = 64_000
MAX_GREP_FILE = 2 * 1024 * 1024
MAX_MATCHES = 200
#: grep matches in a process of its own, killed past this (clawsdk.rematch)
GREP_TIMEOUT_S = 20.0
GREP_BATCH_BYTES = 8 * 1024 * 1024
MAX_LIST = 2000


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


def add_fs_tools(server: MCPServer, sandbox: Sandbox) -> None:
    """read, write, edit, apply_patch, ls, glob, grep."""

    @server.tool()
    @tool_errors
    async def read(path: str, offset: int = 1, limit: int = 2000) -> str:
        """Read a text file of the workspace. offset: first line (1-based); limit: number of lines."""
        text = decode_text(await sandbox.read_capped(path), path)
        lines = text.splitlines(keepends=True)
        start = max(offset, 1) - 1
        chunk = "".join(lines[start : start + max(limit, 1)])
        shown_until = start + len(lines[start : start + max(limit, 1)])
        notes = []
        if len(chunk) > MAX_READ_CHARS:
            chunk = chunk[:MAX_READ_CHARS]
            notes.append(f"[cut at {MAX_READ_CHARS} characters; read fewer lines with limit=]")
        if shown_until < len(lines):
            notes.append(f"[{len(lines) - shown_until} more lines; read with offset={shown_until + 1}]")
        return chunk + ("\n" + "\n".join(notes) if notes else "")

    @server.tool()
    @tool_errors
    async def write(path: str, content: str) -> str:
        """Create or overwrite a file in the workspace (parent folders are created)."""
        data = content.encode("utf-8")
        await sandbox.write(path, data)
        return f"wrote {len(data)} bytes to {path}"

    @server.tool()
    @tool_errors
    async def edit(path: str, old_text: str, new_text: str, replace_all: bool = False) -> str:
        """Replace an exact occurrence of old_text in a file (it must be unique unless replace_all)."""
        if old_text == "":
            raise ToolError("old_text is empty; use write to create a file")
        text = decode_text(await sandbox.read_capped(path), path)
        count = text.count(old_text)
        if count == 0:
            raise ToolError(f"old_text not found in {path}")
        if count > 1 and not replace_all:
            raise ToolError(f"old_text occurs {count} times in {path}; add context to make it unique or set replace_all")
        text = text.replace(old_text, new_text) if replace_all else text.replace(old_text, new_text, 1)
        await sandbox.write(path, text.encode("utf-8"))
        return f"replaced {count if replace_all else 1} occurrence(s) in {path}"

    @server.tool()
    @tool_errors
    async def apply_patch(input: str) -> str:  # noqa: A002 - OpenClaw's argument name
        """Apply a multi-file patch: '*** Begin Patch', then '*** Add File: P' (lines with '+'),
        '*** Update File: P' (optional '*** Move to: Q', hunks of ' '/'-'/'+' lines after an optional
        '@@ anchor'), '*** Delete File: P', and '*** End Patch'. All files change, or none."""
        try:
            ops = parse_patch(input)
        except PatchError as e:
            raise ToolError(f"invalid patch: {e}") from e
        for op in ops:  # refuse a path that leaves the workspace before anything changes
            normalize_relative(op.path)
            if op.move_to:
                normalize_relative(op.move_to)
        writes: dict[str, bytes | None] = {}  # path -> new bytes, None = delete
        summary = []
        for op in ops:
            if op.kind == "add":
                writes[op.path] = ("\n".join(op.content) + "\n").encode("utf-8")
                summary.append(f"A {op.path}")
            elif op.kind == "delete":
                try:
                    await sandbox.read_capped(op.path)  # must exist (and be inside the workspace)
                except FileTooLarge:
                    pass  # it exists
                writes[op.path] = None
                summary.append(f"D {op.path}")
            else:
                current = writes.get(op.path)
                text = decode_text(current if current is not None else await sandbox.read_capped(op.path), op.path)
                try:
                    new = apply_hunks(text, op.hunks, op.path) if op.hunks else text
                except PatchError as e:
                    raise ToolError(f"patch not applied (no file changed): {e}") from e
                if op.move_to:
                    writes[op.path] = None
                    writes[op.move_to] = new.encode("utf-8")
                    summary.append(f"M {op.path} -> {op.move_to}")
                else:
                    writes[op.path] = new.encode("utf-8")
                    summary.append(f"M {op.path}")
        for path, data in writes.items():
            if data is not None:
                await sandbox.write(path, data)
        for path, data in writes.items():
            if data is None:
                await sandbox.exec(["rm", "-f", "--", path], timeout=30)
        return "applied:\n" + "\n".join(summary)

    @server.tool()
    @tool_errors
    async def ls(path: str = ".", recursive: bool = False) -> str:
        """List a folder of the workspace; folders end with '/'."""
        entries = await sandbox.list(path, recursive=recursive)
        lines = [e.path + "/" if e.is_dir else f"{e.path}  ({e.size} bytes)" for e in entries]
        if len(lines) > MAX_LIST:
            lines = lines[:MAX_LIST] + [f"[{len(entries) - MAX_LIST} more entries not shown; list a sub-folder]"]
        return "\n".join(lines) if lines else "(empty)"

    @server.tool()
    @tool_errors
    async def glob(pattern: str) -> str:
        """Find workspace files whose path matches a glob pattern such as '**/*.py'."""
        rx = glob_to_regex(pattern)
        hits = [e.path for e in await sandbox.list(".", recursive=True) if not e.is_dir and rx.match(e.path)]
        if len(hits) > MAX_LIST:
            hits = hits[:MAX_LIST] + [f"[{len(hits) - MAX_LIST} more matches not shown; narrow the pattern]"]
        return "\n".join(hits) if hits else "(no match)"

    @server.tool()
    @tool_errors
    async def grep(pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
        """Search files for a regular expression; prints path:line:text for each match."""
        try:
            rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as e:
            raise ToolError(f"invalid regular expression: {e}") from e
        name_rx = glob_to_regex(glob) if glob else None

        async def texts():
            if path not in ("", ".", "./"):
                try:
                    yield path, await sandbox.read_capped(path)
                    return
                except IsADirectoryError:
                    pass
            for e in await sandbox.list(path, recursive=True):
                if e.is_dir or e.size > MAX_GREP_FILE or (name_rx and not name_rx.match(e.path)):
                    continue
                try:
                    yield e.path, await sandbox.read_capped(e.path)
                except (OSError, ValueError):  # a symlink out or a vanished file: skip it, keep searching
                    continue

        out: list[str] = []
        batch: list[tuple[str, bytes]] = []

        async def match() -> None:
            out.extend(await in_process("match_lines", rx.pattern, rx.flags, batch, MAX_MATCHES - len(out)))
            batch.clear()

        with anyio.move_on_after(GREP_TIMEOUT_S) as scope:
            size = 0
            async for item in texts():
                batch.append(item)
                size += len(item[1])
                if size >= GREP_BATCH_BYTES:
                    await match()
                    size = 0
                    if len(out) >= MAX_MATCHES:
                        break
            if batch and len(out) < MAX_MATCHES:
                await match()
        if scope.cancelled_caught:
            raise ToolError(f"the pattern was still matching after {GREP_TIMEOUT_S:g} s and was stopped (a "
                            "nested repetition such as (a+)+ can backtrack without end); simplify it or "
                            "narrow the path")
        if len(out) >= MAX_MATCHES:
            out.append(f"[stopped at {MAX_MATCHES} matches; narrow the pattern or the path]")
        return truncate("\n".join(out)) if out else "(no match)"
