"""The skill conformance kit: the checks every built-in skill passes, for plugin authors to run on theirs.

    from clawsdk.testing.skills import assert_skill_conforms
    from my_skill import server

    def test_my_skill_conforms():
        assert_skill_conforms(server, skill_md="src/my_skill/SKILL.md")

Checks, through a real in-process MCP client on a fresh local sandbox:

- SKILL.md: frontmatter with a valid `name` and a `description`, a non-empty body; the server's
  instructions carry it.
- tools: every tool has a valid name, a description and an object input schema whose required
  arguments are declared properties.
- confinement: every argument that names a file (path, paths, src, dest, file, folder, repo, ...)
  is tried with `..`, `../..` up to a folder outside, an absolute path, a symlink out of the
  workspace and a NUL byte; no call may read, create or change anything outside the workspace.
- errors: missing or wrongly typed arguments, and calls on an empty workspace, come back as tool
  errors (is_error with a message), never as crashes or protocol failures.
- the boundary: a server whose tools run inside the sandbox (all but its `host_tools`) has a factory the
  tool host can import by name there.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from clawsdk.testing.report import Finding, Report

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
PATH_ARGS = re.compile(r"(?i)^(path|paths|file|files|src|dest|source|target|folder|dir|directory|repo|"
                       r"filename|workdir|cwd|id|.*_id|.*_path|.*_paths|path_.*)$")
MARKER = "clawsdk-conformance-secret-7f3a"


@dataclass
class SkillReport(Report):
    """A kit report that also names the skill's tools and the checks that did not apply."""

    kind: str = "skill"
    name: str = "skill"
    tools: list[str] = field(default_factory=list)
    #: checks that did not apply, so were neither passed nor failed
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"skill {self.name}: {'passes' if self.ok else 'FAILS'} "
                 f"({len(self.findings) - len(self.failures)}/{len(self.findings)} checks, {len(self.tools)} tools"
                 + (f"; not checked: {', '.join(self.skipped)}" if self.skipped else "") + ")"]
        lines += [f"  FAIL {f.check}: {f.detail}" for f in self.failures]
        return "\n".join(lines)

    def add(self, check: str, ok: bool, detail: str = "") -> bool:
        self.findings.append(Finding(check, ok, detail))  # a passed check keeps its detail (what was checked)
        return ok


def _dummy(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return _dummy(defs.get(schema["$ref"].split("/")[-1], {}), defs)
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
        return _dummy(options[0], defs)
    t = schema.get("type")
    if t == "string":
        return "x"
    if t == "integer":
        return 1
    if t == "number":
        return 1.0
    if t == "boolean":
        return False
    if t == "array":
        return [_dummy(schema.get("items", {"type": "string"}), defs)]
    if t == "object":
        props = schema.get("properties", {})
        return {k: _dummy(v, defs) for k, v in props.items() if k in schema.get("required", [])}
    return "x"


def _wrong(schema: dict[str, Any]) -> Any:
    t = schema.get("type")
    if not isinstance(t, str):  # absent, or a list of types (["string", "null"]): no one wrong value
        return None
    return {"string": {"not": "a string"}, "integer": "not-a-number", "number": "not-a-number",
            "boolean": {"x": 1}, "array": 12345, "object": 12345}.get(t, None)


def _is_array(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "array":
        return True
    return any(s.get("type") == "array" for s in schema.get("anyOf", []))


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") or "" for c in result.content or [])


def _crashed(name: str, result: Any) -> bool:
    """The SDK answers an unexpected exception with a bare 'Error executing tool NAME': a crash."""
    return bool(result.is_error) and _text(result).strip() in (f"Error executing tool {name}", "")


def _find_skill_md(factory: Callable[..., Any]) -> Path | None:
    """The factory's SKILL.md: in its `skill_dir`, else beside the module that defines it."""
    from clawsdk.sandbox.toolruntime import SkillPlugin

    folder = SkillPlugin.of(factory).skill_dir
    if folder is not None:
        return folder / "SKILL.md"
    import inspect

    try:
        beside = Path(inspect.getfile(factory)).parent / "SKILL.md"
    except (TypeError, OSError):
        return None
    return beside if beside.is_file() else None


async def check_skill(factory: Callable[..., Any], *, skill_md: str | os.PathLike | None = None,
                      task: Any = None, sandbox_factory: Callable[[], Any] | None = None,
                      require_skill_md: bool = True, name: str | None = None) -> SkillReport:
    """Run every check on the server `factory(sandbox, task)` builds; never raises for a failed check.

    The SKILL.md is `skill_md`, else `factory.skill_dir / "SKILL.md"`, else one beside the factory's
    module. None found is a failed check unless `require_skill_md=False` (a plain tool server), and
    then it is listed as not checked, never counted as a pass. `name` is what the report is called
    (the registered name); by default the SKILL.md's name, else the factory's."""
    from mcp import Client

    from clawsdk.mcp.toolkit import SkillFormatError, load_skill_md
    from clawsdk.tasks.model import File, Task

    report = SkillReport(name=name or str(getattr(factory, "__name__", "skill")))
    manifest = None
    md = skill_md or _find_skill_md(factory)
    if md is None:
        if require_skill_md:
            report.add("SKILL.md", False, "no SKILL.md found: pass skill_md=PATH, or set the factory's skill_dir "
                                          "(server.skill_dir = Path(__file__).parent) to the folder holding it")
        else:
            report.skipped.append("SKILL.md (a plain tool server: none to check)")
    else:
        try:
            manifest = load_skill_md(Path(md))
            report.name = name or manifest.name
            report.add("SKILL.md", True)
        except SkillFormatError as e:
            report.add("SKILL.md", False, str(e))

    task = task or Task(id="conformance", instruction="skill conformance checks",
                        workspace=[File(path="notes.txt", text="hello\n")])
    if sandbox_factory is None:
        from clawsdk.plugins import get_registry

        sandbox_factory = get_registry().get("sandboxes", "local")
    outside = Path(tempfile.mkdtemp(prefix="clawsdk-outside-"))
    (outside / "secret.txt").write_text(MARKER + "\n")
    sandbox = sandbox_factory()
    try:
        await sandbox.start(task)
        await sandbox.exec(["ln", "-s", str(outside), "link_out"], timeout=30)
        before = _snapshot(outside)
        server = factory(sandbox, task)
        async with Client(server) as client:
            instructions = getattr(client, "instructions", None) or ""
            if manifest is not None:
                report.add("instructions carry SKILL.md", manifest.description in instructions,
                           "the server's instructions do not contain the SKILL.md description; build the "
                           "server with clawsdk.mcp.toolkit.skill_server(SKILL.md)")
            tools = (await client.list_tools()).tools
            report.tools = [t.name for t in tools]
            report.add("has tools", bool(tools) or manifest is not None, "the server offers no tools")
            inside = sorted({t.name for t in tools} - set(getattr(server, "host_tools", ()) or ()))
            if inside:
                from clawsdk.sandbox.toolruntime import SkillPlugin

                report.add("runs behind the sandbox's boundary", SkillPlugin.of(factory).server_ref() is not None,
                           f"its tools ({', '.join(inside[:5])}) run inside the sandbox, in a process that imports "
                           f"the factory by name, and {getattr(factory, '__qualname__', factory)!r} cannot be "
                           "imported (a closure, or a function of a script run as __main__): define it at the top "
                           "level of a module")
            workspace = getattr(sandbox, "workspace", None)  # host-folder sandboxes: a ../../ path to `outside`
            relative_out = os.path.relpath(outside / "secret.txt", workspace) if workspace else None  # noqa: ASYNC240 - arithmetic on two absolute paths
            for tool in tools:
                await _check_tool(client, tool, report, outside, relative_out)
        after = _snapshot(outside)
        escaped = workspace is not None and (Path(workspace).parent / "outside-secret.txt").exists()
        report.add("nothing outside the workspace changed", before == after and not escaped,
                   f"files outside the workspace changed: {sorted(set(before) ^ set(after)) or 'contents'}"
                   + (" and ../outside-secret.txt was written" if escaped else ""))
    except Exception as e:  # a report, not a crash
        report.add("server runs", False, f"{type(e).__name__}: {e}")
    finally:
        with anyio.CancelScope(shield=True):
            await sandbox.close()
        shutil.rmtree(outside, ignore_errors=True)
    return report


async def _check_tool(client: Any, tool: Any, report: SkillReport, outside: Path, relative_out: str | None) -> None:
    name = tool.name
    schema = dict(tool.input_schema or {})
    props: dict[str, Any] = schema.get("properties", {}) or {}
    required = list(schema.get("required", []) or [])
    defs = schema.get("$defs", {})
    report.add(f"{name}: name", bool(TOOL_NAME.match(name)), "tool names are letters, digits, _ . - (at most 64)")
    report.add(f"{name}: description", bool((tool.description or "").strip()), "write a docstring for the tool")
    report.add(f"{name}: input schema", schema.get("type") == "object" and set(required) <= set(props),
               f"the input schema must be an object whose required names are properties: {schema}")

    base = {k: _dummy(props[k], defs) for k in required if k in props}
    if required:
        r = await client.call_tool(name, {})
        report.add(f"{name}: missing arguments give a tool error", bool(r.is_error) and not _crashed(name, r),
                   _text(r)[:200] or "no error")
        key = required[0]
        bad = _wrong(props.get(key, {}))
        if bad is not None:
            r = await client.call_tool(name, {**base, key: bad})
            report.add(f"{name}: wrong argument types give a tool error", bool(r.is_error) and not _crashed(name, r),
                       _text(r)[:200] or "accepted a wrongly typed argument")
    r = await client.call_tool(name, base)
    report.add(f"{name}: plain call does not crash", not _crashed(name, r), "the tool raised an unexpected exception; "
               "raise mcp.server.mcpserver.exceptions.ToolError with a message the agent can act on")

    escapes = ["../outside-secret.txt", str(outside / "secret.txt"), "link_out/secret.txt", "notes\x00.txt"]
    if relative_out:
        escapes.append(relative_out)
    for arg, sub in props.items():
        if not PATH_ARGS.match(arg):
            continue
        for bad_path in escapes:
            value = [bad_path] if _is_array(sub) else bad_path
            r = await client.call_tool(name, {**base, arg: value})
            text = _text(r) + str(r.structured_content or "")
            leaked = MARKER in text
            report.add(f"{name}: {arg}={bad_path!r} stays in the workspace", not leaked and not _crashed(name, r),
                       "read outside the workspace" if leaked else "crashed instead of a tool error")


def assert_skill_conforms(factory: Callable[..., Any], **kwargs: Any) -> SkillReport:
    """check_skill from synchronous code (a pytest test); AssertionError lists every failed check."""
    report = anyio.run(lambda: check_skill(factory, **kwargs))
    if not report.ok:
        raise AssertionError(report.summary())
    return report
