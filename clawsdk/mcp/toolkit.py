"""What every tool and skill server shares: tool errors, truncation notes, SKILL.md manifests.

A skill is a folder holding a SKILL.md (AgentSkills / OpenClaw frontmatter: `name`,
`description`, optional `metadata` with requirements) and, for clawsdk, an MCP server of
domain tools whose `instructions` are the SKILL.md body.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool

from clawsdk.errors import ClawError, FileTooLarge

#: AgentSkills names: lower-case letters, digits and hyphens, at most 64 characters.
SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
DEFAULT_LIMIT = 32_000
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]  # MCPServer's


class SkillFormatError(ClawError):
    """A SKILL.md that cannot be used: which file, what is wrong, what to do."""


_TOOL_TEMPLATES: dict[tuple, Tool] = {}


class ToolServer(MCPServer):
    """An MCPServer that builds each tool's argument model and JSON schema once per process.

    Tool servers are made per rollout, their tools closing over that rollout's sandbox. Building
    the pydantic argument model and schema of the same function body again for every rollout
    cost more than the rest of a short rollout together; here a tool made from the same code,
    defaults and options reuses the first one's metadata with the new function.

    `host_tools` names the tools that may run in the runner (see the attribute); the others run inside the
    sandbox, in a process that imports the server's factory there.

    The SDK's constructor calls `logging.basicConfig` at its `log_level`, INFO unless told: in a
    program that configured no logging (a script calling `run_sync`), the first tool server of a
    run turned the whole process up to INFO, and every tool call an agent got wrong was printed
    (tool errors are the agent's, and are recorded as events). WARNING is Python's own default.
    """

    def __init__(self, *args: Any, log_level: LogLevel = "WARNING", host_tools: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, log_level=log_level, **kwargs)
        #: the tools that may run in the runner's process. Every other tool of the server runs behind the
        #: sandbox's boundary (clawsdk.mcp.toolhost): name here only tools that move bytes through the sandbox's
        #: file API or run commands through its exec, and never parse what the agent wrote.
        self.host_tools = frozenset(host_tools)

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, title: str | None = None,
                 description: str | None = None, annotations: Any = None, icons: Any = None,
                 meta: dict[str, Any] | None = None, structured_output: bool | None = None) -> None:
        inner = inspect.unwrap(fn)
        if structured_output is None and _returns_text(inner):
            # a text tool's result is its text: no output schema, so no client validates
            # {"result": text} against one (compiling that validator was a sixth of a short rollout)
            structured_output = False
        code = getattr(inner, "__code__", None)
        if code is None or icons or meta:
            return super().add_tool(fn, name=name, title=title, description=description, annotations=annotations,
                                    icons=icons, meta=meta, structured_output=structured_output)
        key = (code, repr(getattr(inner, "__defaults__", None)), repr(getattr(inner, "__kwdefaults__", None)),
               name, title, description or fn.__doc__, structured_output, repr(annotations))
        template = _TOOL_TEMPLATES.get(key)
        if template is None:
            template = Tool.from_function(fn, name=name, title=title, description=description,
                                          annotations=annotations, structured_output=structured_output)
            _TOOL_TEMPLATES[key] = template
        tools = self._tool_manager._tools
        if template.name not in tools:
            tools[template.name] = template.model_copy(update={"fn": fn})


def _returns_text(fn: Callable) -> bool:
    ret = getattr(fn, "__annotations__", {}).get("return")
    return ret is str or ret == "str"


#: the most characters of one tool's result the agent reads and the store records (its `tool_result` event):
#: every tool is subject to it, whatever its own limits. A spreadsheet tool once answered 147.7 MB, sent
#: whole to the agent and written as one event. Past it the text is cut with a note saying how much was
#: left out, and the structured content is dropped (it holds the same data, and could not be cut as JSON).
#: 1 MiB is four times exec's output limit (DEFAULT_OUTPUT_LIMIT), so no tool's ordinary answer is cut.
MAX_RESULT_CHARS = 1024 * 1024


def bounded_result(text: str, structured: Any, limit: int = MAX_RESULT_CHARS) -> tuple[str, Any]:
    """(text, structured) within `limit` characters: the text cut with a note (the two within `limit`),
    structured content over it (as JSON) dropped; what fits is returned as it is."""
    if len(text) > limit:
        # the note counts: a result cut once is within the limit, so a second cut (the tool host's, then the
        # session's) leaves it as it is
        for kept in (limit - 200, limit - 400):
            note = (f"\n[tool result cut: showing {kept:,} of {len(text):,} characters, {len(text) - kept:,} "
                    "left out (the most one result may hold); ask for less: a narrower query, a range, fewer rows]")
            if kept + len(note) <= limit:
                break
        return text[:kept] + note, None
    if structured is not None:
        try:
            size = len(json.dumps(structured, ensure_ascii=False, default=str))
        except (TypeError, ValueError, RecursionError):
            size = 0  # not JSON-like: left as before
        if size > limit:
            return text, None
    return text, structured


def tool_errors(fn: Callable) -> Callable:
    """Turn errors a caller can fix (bad path, missing file, bad value) into tool errors the agent reads."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except FileNotFoundError as e:
            raise ToolError(f"no such file: {e.filename or e}") from e
        except IsADirectoryError as e:
            raise ToolError(f"{e.filename or e} is a folder, not a file") from e
        except NotADirectoryError as e:
            raise ToolError(f"not a folder: {e.filename or e}") from e
        except FileTooLarge as e:
            raise ToolError(f"{e}; look into it with exec (head, tail, sed -n, grep)") from e
        except (OSError, ValueError, KeyError, LookupError, ClawError) as e:
            raise ToolError(str(e) or type(e).__name__) from e

    return wrapper


def truncate(text: str, limit: int = DEFAULT_LIMIT, *, hint: str = "") -> str:
    """`text` cut to `limit` characters with a note saying how much was left out, and how to see it."""
    if len(text) <= limit:
        return text
    note = f"\n[output cut: showing {limit} of {len(text)} characters{'; ' + hint if hint else ''}]"
    return text[:limit] + note


def decode_text(data: bytes, path: str) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path} is a binary file ({len(data)} bytes)")
    return data.decode("utf-8", "replace")


# ---- SKILL.md ---------------------------------------------------------------------------


@dataclass
class SkillManifest:
    """A parsed SKILL.md."""

    name: str
    description: str
    body: str
    path: Path | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    frontmatter: dict[str, Any] = field(default_factory=dict)

    @property
    def requires(self) -> dict[str, Any]:
        """OpenClaw's `metadata.openclaw.requires` (bins, env, config) or a top-level `requirements`."""
        oc = self.metadata.get("openclaw") or self.metadata.get("clawsdk") or {}
        req = oc.get("requires") if isinstance(oc, dict) else None
        return dict(req or self.frontmatter.get("requirements") or {})

    def missing_requirements(self) -> list[str]:
        """Binaries or Python modules the skill needs that this machine lacks."""
        import importlib.util

        missing = []
        for b in self.requires.get("bins", []) or []:
            if shutil.which(b) is None:
                missing.append(f"binary {b}")
        for m in self.requires.get("python", []) or []:
            if importlib.util.find_spec(m) is None:
                missing.append(f"python module {m}")
        return missing

    def instructions(self) -> str:
        """The text an agent's system prompt gets for this skill."""
        return f"# Skill: {self.name}\n{self.description}\n\n{self.body.strip()}\n"


def parse_skill_md(text: str, path: str | Path | None = None) -> SkillManifest:
    """Parse SKILL.md text; SkillFormatError says which file and field is wrong."""
    where = str(path) if path else "SKILL.md"
    if not text.startswith("---"):
        raise SkillFormatError(f"{where}: no YAML frontmatter; start the file with '---', then name: and "
                               "description:, then '---'")
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise SkillFormatError(f"{where}: the frontmatter is not closed with a '---' line")
    head, body = parts[0][3:], parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""
    try:
        front = yaml.safe_load(head) or {}
    except yaml.YAMLError as e:
        raise SkillFormatError(f"{where}: frontmatter is not valid YAML: {e}") from e
    if not isinstance(front, dict):
        raise SkillFormatError(f"{where}: frontmatter must be a mapping of name:, description:, ...")
    name = front.get("name")
    if not isinstance(name, str) or not SKILL_NAME.match(name):
        raise SkillFormatError(f"{where}: name: {name!r} must be lower-case letters, digits and hyphens "
                               "(at most 64), e.g. 'spreadsheets'")
    desc = front.get("description")
    if not isinstance(desc, str) or not desc.strip():
        raise SkillFormatError(f"{where}: description: is missing or empty; say in one sentence what the "
                               "skill does and when to use it")
    meta = front.get("metadata") or {}
    if isinstance(meta, str):  # OpenClaw allows metadata as a one-line JSON string
        try:
            meta = yaml.safe_load(meta) or {}
        except yaml.YAMLError as e:
            raise SkillFormatError(f"{where}: metadata: is not valid JSON/YAML: {e}") from e
    if not isinstance(meta, dict):
        raise SkillFormatError(f"{where}: metadata: must be a mapping")
    if not body.strip():
        raise SkillFormatError(f"{where}: the body is empty; write the instructions an agent follows")
    return SkillManifest(name=name, description=desc.strip(), body=body, path=Path(path) if path else None,
                         metadata=meta, frontmatter=front)


def load_skill_md(path: str | Path) -> SkillManifest:
    p = Path(path)
    if p.is_dir():
        p = p / "SKILL.md"
    if not p.is_file():
        raise SkillFormatError(f"{p}: no SKILL.md here")
    return parse_skill_md(p.read_text(encoding="utf-8"), p)


def skill_server(manifest: SkillManifest | str | Path, **kwargs: Any) -> MCPServer:
    """An MCP server named after the skill whose instructions are its SKILL.md; add tools with @server.tool()."""
    m = manifest if isinstance(manifest, SkillManifest) else load_skill_md(manifest)
    return ToolServer(m.name, instructions=m.instructions(), **kwargs)
