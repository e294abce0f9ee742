"""The tool host: a task's skill servers, served over MCP on stdin/stdout from inside its sandbox.

Started by the runner (clawsdk.mcp.toolhost.client) through `Sandbox.spawn`, so it runs behind the
sandbox's boundary: its namespaces or container, its uid, no network, and a kernel limit on memory and
CPU. The first line on stdin is the spec (JSON): which servers, where the workspace is, the task without
what the agent must not see, the most a result may hold. Then MCP follows on the same pipes. Every tool of
server S is offered as `S.TOOL`.

It diverts its own fd 0 and 1 before anything runs, so a tool that prints, or a command it starts, can
never write into the MCP stream.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import sys
from collections.abc import Callable
from typing import Any

#: the spec's format; a tool host refuses a newer one (the runner and the sandbox's copy of clawsdk differ)
SPEC_VERSION = 1
SEPARATOR = "."


def load_factory(entry: dict[str, Any]) -> Callable[..., Any]:
    """A server factory from its reference: {"module": "pkg.mod:qualname"} or {"file": PATH, "function": NAME}."""
    if "module" in entry:
        module, _, qualname = entry["module"].partition(":")
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    path = entry["file"]
    name = "clawsdk_skill_" + "".join(c if c.isalnum() else "_" for c in path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, entry.get("function") or "server")


def hosted_tools(servers: list[tuple[str, Any]], output_chars: int, memory_mb: int = 0, *,
                 prefix: bool = True) -> Any:
    """One MCP server offering every tool of `servers` as `NAME.TOOL` (or as TOOL, `prefix` False, for one
    server), entering each server's lifespan; a result is cut to `output_chars`, and a tool that runs out of
    memory says so."""
    import contextlib

    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import CallToolResult, TextContent

    from clawsdk.mcp.toolkit import ToolServer, bounded_result

    @contextlib.asynccontextmanager
    async def lifespans(_server: Any):
        async with contextlib.AsyncExitStack() as stack:
            for _, srv in servers:
                lifespan = getattr(getattr(srv, "settings", None), "lifespan", None)
                if lifespan is not None:
                    await stack.enter_async_context(lifespan(srv))
            yield {}

    class HostedTools(ToolServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                result = await super().call_tool(name, arguments, context)
            except UnexpectedToolError as e:
                cause = e.__cause__
                while isinstance(cause, UnexpectedToolError) and cause.__cause__ is not None:
                    cause = cause.__cause__
                if isinstance(cause, MemoryError):
                    limit = f" (its limit is {memory_mb} MiB)" if memory_mb else ""
                    tool = name.split(SEPARATOR, 1)[-1] if prefix else name  # the name the agent knows
                    raise ToolError(f"{tool} ran out of memory{limit}; ask for less: a smaller file, a "
                                    "narrower range, fewer rows") from None
                raise
            if not isinstance(result, CallToolResult):  # a request for input: nothing to cut
                return result
            texts = [t for c in result.content if (t := getattr(c, "text", None)) is not None]
            if len(texts) == len(result.content):
                text, structured = bounded_result("\n".join(texts), result.structured_content, output_chars)
                if text != "\n".join(texts) or structured is not result.structured_content:
                    return result.model_copy(update={"content": [TextContent(type="text", text=text)],
                                                     "structured_content": structured})
            return result

    name = "clawsdk-toolhost" if prefix or not servers else servers[0][0]
    instructions = None if prefix or not servers else getattr(servers[0][1], "instructions", None)
    host = HostedTools(name, instructions=instructions, lifespan=lifespans)
    tools = host._tool_manager._tools
    for server_name, srv in servers:
        for tool in srv._tool_manager.list_tools():
            public = f"{server_name}{SEPARATOR}{tool.name}" if prefix else tool.name
            tools[public] = tool if public == tool.name else tool.model_copy(update={"name": public})
    return host


def build(spec: dict[str, Any]) -> Any:
    """The hosted server a spec describes, bound to the workspace it names."""
    from clawsdk.mcp.toolhost.view import WorkspaceView
    from clawsdk.sandbox.base import Capabilities
    from clawsdk.tasks.model import Task

    version = spec.get("version", 0)
    if version > SPEC_VERSION:
        raise SystemExit(f"clawsdk tool host: spec version {version} is newer than this clawsdk ({SPEC_VERSION})")
    view = WorkspaceView(spec["workspace"], home=spec.get("home"),
                         capabilities=Capabilities(**spec.get("capabilities", {})))
    task = Task.model_validate(spec["task"])
    servers = [(entry["name"], load_factory(entry)(view, task)) for entry in spec["servers"]]
    return hosted_tools(servers, int(spec["output_chars"]), int(spec.get("memory_mb", 0)))


async def serve(server: Any, wire_in: io.BufferedReader, wire_out: io.BufferedWriter) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    stdin = anyio.wrap_file(io.TextIOWrapper(wire_in, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(io.TextIOWrapper(wire_out, encoding="utf-8", errors="replace"))
    low = server._lowlevel_server
    async with stdio_server(stdin, stdout) as (read_stream, write_stream):
        await low.run(read_stream, write_stream, low.create_initialization_options())


def main() -> None:
    # the wire is a private copy of fd 0 and 1; from here fd 0 reads nothing and fd 1 goes to stderr
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    line = wire_in.readline()
    if not line:
        return
    import threading

    threading.stack_size(1024 * 1024)  # the address-space limit counts every thread's stack
    server = build(json.loads(line))

    import anyio

    anyio.run(serve, server, wire_in, wire_out)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
