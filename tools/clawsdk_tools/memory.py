"""OpenClaw's memory group over the workspace's memory files: MEMORY.md and memory/**/*.md.

memory_search ranks chunks (paragraph groups of at most ~20 lines) by keyword overlap with
the query, weighted by how rare each word is across the memory files; memory_get reads lines
of one memory file. No embedding model is needed, so it runs offline and deterministically.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.mcp.toolkit import decode_text, tool_errors, truncate
from clawsdk.tasks.paths import normalize_relative

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

WORD = re.compile(r"[\w][\w'-]*", re.UNICODE)
CHUNK_LINES = 20
STOP = frozenset("a an and are as at be by for from has have i in is it of on or that the to was were with".split())


class MemoryHit(BaseModel):
    path: str
    startLine: int  # OpenClaw's names
    endLine: int
    score: float
    snippet: str


class MemoryResults(BaseModel):
    results: list[MemoryHit]
    searched_files: int


def is_memory_path(path: str) -> bool:
    p = normalize_relative(path)
    return p in ("MEMORY.md", "memory.md") or (p.startswith("memory/") and p.endswith(".md"))


def _words(text: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in WORD.finditer(text)) if w not in STOP]


def chunks(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) groups of paragraphs, each at most CHUNK_LINES lines."""
    lines = text.splitlines()
    out: list[tuple[int, int, str]] = []
    start = 0
    i = 0
    while i <= len(lines):
        boundary = i == len(lines) or (lines[i].strip() == "" and i - start >= 1) or i - start >= CHUNK_LINES \
            or (lines[i].startswith("#") and i > start)
        if boundary:
            body = "\n".join(lines[start:i]).strip()
            if body:
                out.append((start + 1, i, body))
            start = i + 1 if i < len(lines) and lines[i].strip() == "" else i
        i += 1
    return out


def add_memory_tools(server: MCPServer, sandbox: Sandbox) -> None:
    """memory_search and memory_get."""

    async def memory_files() -> list[str]:
        """The path of each memory file."""
        files = [e.path for e in await sandbox.list(".", recursive=False)
                 if not e.is_dir and e.path in ("MEMORY.md", "memory.md")]
        try:
            files += [e.path for e in await sandbox.list("memory", recursive=True)
                      if not e.is_dir and e.path.endswith(".md")]
        except (FileNotFoundError, NotADirectoryError, OSError, ValueError):
            pass
        return files

    @server.tool()
    @tool_errors
    async def memory_search(query: str, maxResults: int = 6, minScore: float = 0.1) -> MemoryResults:
        """Search the memory files (MEMORY.md, memory/*.md) for notes about `query`; returns the best
        snippets with their path and line range (read more with memory_get)."""
        terms = set(_words(query))
        if not terms:
            raise ToolError("the query has no searchable words")
        docs: list[tuple[str, int, int, str, set[str]]] = []
        files = await memory_files()
        for path in files:
            text = decode_text(await sandbox.read_capped(path), path)
            for a, b, body in chunks(text):
                docs.append((path, a, b, body, set(_words(body))))
        n = len(docs) or 1
        idf = {t: math.log(1 + n / (1 + sum(1 for d in docs if t in d[4]))) for t in terms}
        total = sum(idf.values())
        hits = []
        for path, a, b, body, words in docs:
            score = sum(idf[t] for t in terms if t in words) / total
            if score >= minScore and score > 0:
                hits.append(MemoryHit(path=path, startLine=a, endLine=b, score=round(score, 4),
                                      snippet=truncate(body, 700, hint=f"memory_get path={path} from_line={a}")))
        hits.sort(key=lambda h: (-h.score, h.path, h.startLine))
        return MemoryResults(results=hits[: max(1, min(maxResults, 50))], searched_files=len(files))

    @server.tool()
    @tool_errors
    async def memory_get(path: str, from_line: int = 1, lines: int = 200) -> str:
        """Read lines of a memory file (MEMORY.md or memory/*.md): from_line (1-based), lines (count)."""
        if not is_memory_path(path):
            raise ToolError(f"{path} is not a memory file; memory files are MEMORY.md and memory/*.md "
                            "(use read for other files)")
        text = decode_text(await sandbox.read_capped(path), path)
        all_lines = text.splitlines()
        start = max(from_line, 1) - 1
        shown = all_lines[start : start + max(lines, 1)]
        out = "\n".join(shown)
        rest = len(all_lines) - (start + len(shown))
        if rest > 0:
            out += f"\n[{rest} more lines; continue with from_line={start + len(shown) + 1}]"
        return truncate(out)
