"""The data skill: JSON and YAML files, queried and edited by path expressions."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import yaml
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.mcp.toolkit import tool_errors, truncate
from clawsdk_skills._common import ext, pack_server
from clawsdk_skills.data.query import QueryError, fmt_path, parent_of, parse_query, select

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

YAML_EXT = (".yaml", ".yml")


class Match(BaseModel):
    path: str
    value: Any


class Matches(BaseModel):
    matches: list[Match]
    note: str | None = None


class Keys(BaseModel):
    path: str
    type: str
    keys: list[str] | None = None
    length: int | None = None


def _kind(path: str) -> str:
    e = ext(path)
    if e == ".json" or e == ".jsonl":
        return "json"
    if e in YAML_EXT:
        return "yaml"
    raise ToolError(f"{path}: the data skill reads .json, .yaml and .yml files")


def _type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(v), "number" if isinstance(v, (int, float)) else type(v).__name__)


def contains_itself(doc: Any) -> bool:
    """Whether a part of `doc` holds itself (YAML's `a: &x [1, *x]`): such a document is no JSON value, and
    written out it never ends. Each shared part (an alias) is walked once."""
    done: set[int] = set()
    inside: set[int] = set()  # the parts being walked, each one below the last: met again, it holds itself
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        v, leaving = stack.pop()
        if leaving:
            inside.discard(id(v))
            done.add(id(v))
            continue
        if not isinstance(v, (dict, list)) or id(v) in done:
            continue
        if id(v) in inside:
            return True
        inside.add(id(v))
        stack.append((v, True))
        stack.extend((k, False) for k in (v.values() if isinstance(v, dict) else v))
    return False


def server(sandbox: Sandbox, task: Any = None) -> MCPServer:
    srv = pack_server(__file__)

    async def load(path: str) -> Any:
        """The document; one that contains itself is refused (it has no JSON form)."""
        kind = _kind(path)
        text = (await sandbox.read_capped(path)).decode("utf-8-sig")
        try:
            doc = json.loads(text) if kind == "json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as e:
            raise ToolError(f"{path} is not valid {kind.upper()}: {e}") from e
        except RecursionError:
            raise ToolError(f"{path} is nested too deep for the data skill: look into it with exec") from None
        if contains_itself(doc):
            raise ToolError(f"{path}: a part of it contains itself (an alias *name inside its own anchor), so "
                            "it has no JSON form and the data skill cannot write it out: use exec")
        return doc

    async def save(path: str, doc: Any) -> None:
        if _kind(path) == "json":
            text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        else:
            text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False)
        await sandbox.write(path, text.encode("utf-8"))

    def steps(query: str):
        try:
            return parse_query(query)
        except QueryError as e:
            raise ToolError(str(e)) from e

    @srv.tool()
    @tool_errors
    async def data_get(path: str, query: str = "$", limit: int = 100) -> Matches:
        """Every value `query` selects in a JSON/YAML file, with its exact path."""
        found = select(await load(path), steps(query))
        out = [Match(path=fmt_path(p), value=v) for p, v in found[: max(1, limit)]]
        note = None if found else f"nothing matches {query!r}; look at the structure with data_keys"
        if len(found) > limit:
            note = f"showing {limit} of {len(found)} matches"
        text_size = len(json.dumps([m.value for m in out], default=str))
        if text_size > 60_000:
            note = (note + "; " if note else "") + "values are large: query a narrower part"
            out = [Match(path=m.path, value=truncate(json.dumps(m.value, default=str), 2000)) for m in out]
        return Matches(matches=out, note=note)

    @srv.tool()
    @tool_errors
    async def data_keys(path: str, query: str = "$") -> list[Keys]:
        """The keys of each object (or length of each array) `query` selects: the file's shape."""
        out = []
        for p, v in select(await load(path), steps(query)):
            out.append(Keys(path=fmt_path(p), type=_type(v), keys=list(map(str, v)) if isinstance(v, dict) else None,
                            length=len(v) if isinstance(v, (list, dict, str)) else None))
        if not out:
            raise ToolError(f"nothing matches {query!r} in {path}")
        return out

    @srv.tool()
    @tool_errors
    async def data_set(path: str, query: str, value: Any) -> str:
        """Set `value` (any JSON value) at every place `query` selects; missing object keys are created."""
        doc = await load(path)
        st = steps(query)
        if not st:
            await save(path, value)
            return f"replaced the whole document of {path}"
        found = select(doc, st, create=True)
        if not found:
            raise ToolError(f"nothing matches {query!r} in {path} (a list index must exist; append with [-1]?)")
        for p, _ in found:
            parent_of(doc, p)[p[-1]] = value
        await save(path, doc)
        return f"set {len(found)} value(s) in {path}: " + ", ".join(fmt_path(p) for p, _ in found[:20])

    @srv.tool()
    @tool_errors
    async def data_delete(path: str, query: str) -> str:
        """Remove every item or key `query` selects."""
        doc = await load(path)
        st = steps(query)
        if not st:
            raise ToolError("refusing to delete the whole document; select what to remove")
        found = select(doc, st)
        if not found:
            raise ToolError(f"nothing matches {query!r} in {path}")
        # delete deepest and highest indexes first so earlier deletions do not shift later ones
        for p, _ in sorted(found, key=lambda x: (len(x[0]), x[0][-1] if isinstance(x[0][-1], int) else 0),
                           reverse=True):
            del parent_of(doc, p)[p[-1]]
        await save(path, doc)
        return f"deleted {len(found)} item(s) from {path}"

    @srv.tool()
    @tool_errors
    async def data_convert(src: str, dest: str) -> str:
        """Convert a JSON file to YAML or back (formats from the extensions)."""
        doc = await load(src)
        _kind(dest)
        await save(dest, doc)
        return f"converted {src} to {dest}"

    return srv
