"""`clawsdk skills serve NAME`: one clawsdk skill as a standalone MCP server, for agents outside clawsdk.

The skill's server is bound to a folder (the workspace) through the same view the tool host uses inside a
sandbox (clawsdk.mcp.toolhost.view): paths stay in the folder, commands run as children of the server.
Nothing is sandboxed and nothing is recorded: run it inside your agent's own sandbox, as an MCP server your
runtime starts. Over stdio, or streamable HTTP bound to loopback with a bearer token.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawsdk.mcp.toolhost.inside import hosted_tools
from clawsdk.tasks.model import Task


def skill_server(name: str, factory: Callable[..., Any], workspace: str | Path, *,
                 task: Task | None = None) -> Any:
    """The MCP server of skill `name` (its `factory`), bound to folder `workspace`, its tools under their own
    names and its instructions its SKILL.md's."""
    from clawsdk.mcp.toolhost.view import WorkspaceView

    folder = Path(workspace).resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"--workspace {workspace}: no such folder")
    view = WorkspaceView(str(folder))
    task = task or Task(id=f"skill-{name}", instruction=f"use the {name} skill", tools=[name])
    return hosted_tools([(name, factory(view, task))], task.limits.tool_output_chars, prefix=False)


async def serve_stdio(server: Any) -> None:
    await server.run_stdio_async()


async def serve_http(server: Any, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                     on_ready: Callable[[str, str], None] | None = None, path: str = "/mcp") -> None:
    """Serve over streamable HTTP at http://HOST:PORT/mcp, every request needing `Authorization: Bearer TOKEN`."""
    from mcp.server.transport_security import TransportSecuritySettings

    from clawsdk._http import BearerAuth, ValidBodies, bind, is_loopback, uvicorn_server

    token = token or secrets.token_urlsafe(32)
    sock = bind(host, port)
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{sock.getsockname()[1]}{path}"
    hosts = sorted({"127.0.0.1", "localhost", "[::1]", url_host}) if is_loopback(host) else []
    security = TransportSecuritySettings(enable_dns_rebinding_protection=bool(hosts),
                                         allowed_hosts=[f"{h}:*" for h in hosts],
                                         allowed_origins=[f"http://{h}:*" for h in hosts])
    app = server.streamable_http_app(streamable_http_path=path, transport_security=security, host=host)
    uv = uvicorn_server(BearerAuth(ValidBodies(app), token), lifespan="on", timeout_graceful_shutdown=5)
    if on_ready is not None:
        on_ready(url, token)
    await uv.serve(sockets=[sock])
