"""OpenClaw's fs group (read, write, edit, apply_patch) plus ls, glob and grep, acting on a sandbox's workspace.

Every path goes through the sandbox, which refuses paths that leave the workspace (`..`,
absolute paths, symlinks out, NUL bytes); the refusal reaches the agent as a tool error.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from clawsdk.errors import FileTooLarge
from clawsdk.mcp.toolkit import decode_text, tool_errors, truncate
from clawsdk.sandbox.base import MAX_READ_BYTES, Entry
from clawsdk.tasks.paths import normalize_relative
from clawsdk_tools.patch import PatchError, apply_hunks, parse_patch

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

MAX_READ_CHARS = 64_000
MAX_GREP_FILE = 2 * 1024 * 1024
MAX_MATCHES = 200
#: grep's matcher, run inside the sandbox by its python3 (clawsdk_tools/grep_matcher.py)
MATCHER = (Path(__file__).parent / "grep_matcher.py").read_text(encoding="utf-8")
MAX_LIST = 2000


#: the longest glob pattern served; each step of the matcher costs time in proportion to its length
MAX_GLOB_CHARS = 4096
#: glob (and grep's glob=) stop matching names past this and answer a tool error
GLOB_TIMEOUT_S = 20.0

_LIT, _ANY, _STAR, _DSTAR, _DSTAR_SLASH = range(5)


def _glob_tokens(pattern: str) -> list[tuple[int, str]]:
    """`**/` (no folder or any folders), `**` (anything but a newline), `*` and `?` (within one path segment);
    every other character, `[` included, stands for itself, case and all."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append((_DSTAR_SLASH, ""))
            i += 3
        elif pattern.startswith("**", i):
            out.append((_DSTAR, ""))
            i += 2
        elif pattern[i] == "*":
            out.append((_STAR, ""))
            i += 1
        elif pattern[i] == "?":
            out.append((_ANY, ""))
            i += 1
        else:
            out.append((_LIT, pattern[i]))
            i += 1
    return out


class Glob:
    """A glob pattern matched against whole paths in O(len(path)) steps, each O(len(pattern)) at worst.

    The pattern once became a regular expression (`**/` -> `(?:.*/)?`, `**` -> `.*`, `*` -> `[^/]*`,
    `?` -> `[^/]`, the rest escaped, `\\Z` at the end) and re matched it in the runner's event loop:
    `*a*a*a*a*a*a*a*a*a*a*a*a*b` against a file named with 250 a's backtracked for ever, and since re
    never checks for signals, every rollout of the process stopped with it and SIGINT/SIGTERM did nothing.
    The same language is now matched by a simulation of its automaton, with no backtracking: the set of
    pattern positions a prefix of the path can reach is a pair of bit masks, each character moves it in a
    fixed number of big-integer operations (O(len(pattern)) work), and the steps already taken are cached
    (a lazily built DFA, dropped when it grows past a bound), so a path costs O(len(path)) dictionary
    lookups once the common steps are known. The semantics are the regex's, quirks included: `*` and `?`
    match any character but `/` (a newline, a leading dot), `**` any character but a newline.
    """

    _MAX_STATES = 4096
    _MAX_STEPS = 1 << 16

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        tokens = _glob_tokens(pattern)
        self._lit: dict[str, int] = {}  # character -> its literal positions
        any_ = star = dstar = dslash = 0
        for i, (kind, ch) in enumerate(tokens):
            bit = 1 << i
            if kind == _LIT:
                self._lit[ch] = self._lit.get(ch, 0) | bit
            elif kind == _ANY:
                any_ |= bit
            elif kind == _STAR:
                star |= bit
            elif kind == _DSTAR:
                dstar |= bit
            else:
                dslash |= bit
        self._any, self._star, self._dstar, self._dslash = any_, star, dstar, dslash
        self._accept = 1 << len(tokens)
        self._width = len(tokens) + 1
        nullable = star | dstar | dslash  # the positions with an empty way past them
        self._nullable = nullable
        self._run_low = nullable & ~(nullable << 1)  # lowest position of each run of nullable positions
        self._run_high = nullable & ~(nullable >> 1)  # and highest
        self._reset()

    def _reset(self) -> None:
        start = self._closure(1)
        self._ids: dict[int, int] = {start: 0, 0: 1}  # state -> id; id 1 is the dead state
        self._states: list[int] = [start, 0]
        self._steps: list[dict[str, int]] = [{}, {}]
        self._accepting: list[bool] = [bool(start & self._accept), False]
        self._cached = 0

    def _closure(self, d: int) -> int:
        """d and what it reaches through nullable positions: a reached one lets through the rest of its
        run of nullable positions and the position after the run (carries, not a loop over the run)."""
        n = self._nullable
        holes = n & ~d
        d |= n & ~((holes + self._run_low) ^ holes)
        return d | ((d & self._run_high) << 1)

    def _step(self, state: int, ch: str) -> int:
        """The state after one more character. A state is D | X << width: bit i of D, at token i; bit i of
        X, inside the `(?:.*/)?` of token i after a character other than '/' (so not yet past it)."""
        d, x = state & (self._accept * 2 - 1), state >> self._width
        adv = self._lit.get(ch, 0)
        stay = 0
        if ch != "/":
            adv |= self._any
            stay |= self._star
        if ch != "\n":
            stay |= self._dstar
        nd = ((d & adv) << 1) | (d & stay)
        nx = 0
        if ch != "\n":
            inside = (d | x) & self._dslash
            if ch == "/":
                nd |= inside
            else:
                nx = inside
        return self._closure(nd) | (nx << self._width)

    def _next(self, sid: int, ch: str) -> int:
        state = self._step(self._states[sid], ch)
        nid = self._ids.get(state)
        if nid is None:
            if len(self._states) >= self._MAX_STATES or self._cached >= self._MAX_STEPS:
                self._reset()  # bounded memory; what is dropped is rebuilt as needed
                nid = self._ids.get(state)
            if nid is None:
                nid = len(self._states)
                self._ids[state] = nid
                self._states.append(state)
                self._steps.append({})
                self._accepting.append(bool(state & self._accept))
            return nid  # the row of sid may be gone with a reset: not cached this once
        self._steps[sid][ch] = nid
        self._cached += 1
        return nid

    def match(self, path: str) -> bool:
        """Whether the whole path matches (re's `match` of the pattern's regex, which ended in `\\Z`)."""
        sid = 0
        for ch in path:
            nid = self._steps[sid].get(ch)
            if nid is None:
                nid = self._next(sid, ch)
            if nid == 1:
                return False
            sid = nid
        return self._accepting[sid]

    fullmatch = match

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


def compile_glob(pattern: str) -> Glob:
    """The pattern of the glob tool and of grep's glob=, or a tool error for one too long to serve."""
    if len(pattern) > MAX_GLOB_CHARS:
        raise ToolError(f"the glob pattern has {len(pattern)} characters; at most {MAX_GLOB_CHARS} are served")
    return Glob(pattern)


#: the old name (clawsdk_tools.core exports it): a glob is no longer a regular expression, see Glob
glob_to_regex = compile_glob


async def matching_paths(glob: Glob, paths: list[str]) -> list[str]:
    """The paths the glob matches, in order, matched in a worker thread: a tree of many files costs time in
    proportion to its names' length, and the event loop keeps running meanwhile. A tool error past
    GLOB_TIMEOUT_S; cancelled, the caller returns at once and the thread stops at its next path."""
    stop = threading.Event()
    deadline = time.monotonic() + GLOB_TIMEOUT_S

    def run() -> list[str] | None:
        out = []
        for p in paths:
            if stop.is_set() or time.monotonic() > deadline:
                return None
            if glob.match(p):
                out.append(p)
        return out

    try:
        hits = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    finally:
        stop.set()
    if hits is None:
        raise ToolError(f"the glob pattern was still matching names after {GLOB_TIMEOUT_S:g} s and was stopped; "
                        "narrow it or the path")
    return hits


def _python(sandbox: Sandbox) -> str:
    """The sandbox's python3; the runner's own where the sandbox is this host (local: no PATH lookup)."""
    if getattr(sandbox, "mounts_tool_runtime", True):
        return "python3"
    from clawsdk.sandbox.toolruntime import current

    return current().executable


def add_fs_tools(server: MCPServer, sandbox: Sandbox, timeout_s: float = 60.0) -> None:
    """read, write, edit, apply_patch, ls, glob, grep (its matcher runs inside the sandbox, for `timeout_s`)."""

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
        n = count if replace_all else 1
        # the size of the result before making it: 16 MiB of 'a', old_text 'a' and 300 characters of new_text
        # made a 4.8 GB string in the runner's process. A file the tools could not read back is refused.
        size = len(text.encode("utf-8")) + n * (len(new_text.encode("utf-8")) - len(old_text.encode("utf-8")))
        if size > MAX_READ_BYTES:
            raise ToolError(f"the edit would make {path} {size / 2**20:.1f} MiB ({n} replacement(s)), over the "
                            f"{MAX_READ_BYTES / 2**20:g} MiB the file tools read of one file; nothing was changed. "
                            "Edit fewer occurrences, or build the file with exec")
        text = text.replace(old_text, new_text) if replace_all else text.replace(old_text, new_text, 1)
        await sandbox.write(path, text.encode("utf-8"))
        return f"replaced {count if replace_all else 1} occurrence(s) in {path}"

    @server.tool()
    @tool_errors
    async def apply_patch(input: str) -> str:  # OpenClaw's argument name
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
        matcher = compile_glob(pattern)
        files = [e.path for e in await sandbox.list(".", recursive=True) if not e.is_dir]
        hits = await matching_paths(matcher, files)
        if len(hits) > MAX_LIST:
            hits = hits[:MAX_LIST] + [f"[{len(hits) - MAX_LIST} more matches not shown; narrow the pattern]"]
        return "\n".join(hits) if hits else "(no match)"

    @server.tool()
    @tool_errors
    async def grep(pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
        """Search files for a regular expression; prints path:line:text for each match."""
        flags = re.IGNORECASE if ignore_case else 0
        name_glob = compile_glob(glob) if glob else None
        one_file = False
        try:
            entries = [e for e in await sandbox.list(path, recursive=True) if not e.is_dir and e.size <= MAX_GREP_FILE]
        except NotADirectoryError:  # one file, named: searched up to what any tool reads of one file
            entries, one_file = [Entry(normalize_relative(path), False, 0)], True
        if name_glob:
            named = set(await matching_paths(name_glob, [e.path for e in entries]))
            entries = [e for e in entries if e.path in named]
        if not entries:
            return "(no match)"
        # the matching runs inside the sandbox, killed at the tool time limit: the pattern and the files are
        # the agent's, and re can backtrack without end
        request = {"pattern": pattern, "flags": flags, "paths": [e.path for e in entries], "limit": MAX_MATCHES,
                   "max_bytes": MAX_READ_BYTES if one_file else MAX_GREP_FILE}
        r = await sandbox.exec([_python(sandbox), "-I", "-c", MATCHER], stdin=json.dumps(request).encode("utf-8"),
                               timeout=timeout_s)
        if r.timed_out:
            raise ToolError(f"the pattern was still matching after {timeout_s:g} s (the task's tool time limit) and "
                            "was stopped (a nested repetition such as (a+)+ can backtrack without end); simplify "
                            "it or narrow the path")
        try:
            answer = json.loads(r.stdout)
            if "error" in answer:
                raise ToolError(answer["error"])
            out, too_large = answer["matches"], answer["too_large"]
        except (ValueError, KeyError, TypeError):
            raise ToolError(f"grep's matcher failed in the sandbox (exit {r.exit_code}): "
                            f"{(r.stderr or r.stdout).strip()[-300:]}") from None
        if one_file and too_large:
            raise FileTooLarge(too_large[0][0], too_large[0][1], MAX_READ_BYTES)
        if len(out) >= MAX_MATCHES:
            out.append(f"[stopped at {MAX_MATCHES} matches; narrow the pattern or the path]")
        return truncate("\n".join(out)) if out else "(no match)"
