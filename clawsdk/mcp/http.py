"""HTTP plumbing of `clawsdk serve`: bearer-token auth, request-body validation, the listening socket,
and a uvicorn server that leaves signals to the caller."""

from __future__ import annotations

import contextlib
import hmac
import json
import socket
from typing import Any

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer TOKEN` (compared in constant time)."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = json.dumps({"error": "missing or wrong bearer token; send Authorization: Bearer TOKEN "
                                            "(printed by clawsdk serve when it started)"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="clawsdk"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


MAX_BODY = DEFAULT_MAX_REQUEST_BODY_SIZE  # what the MCP transport itself accepts


def invalid_message(body: bytes) -> str | None:
    """Why `body` is not one JSON-RPC 2.0 message as MCP's streamable HTTP takes it, or None if it is."""
    try:
        msg = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return f"the request body is not JSON ({e})"
    if not isinstance(msg, dict):
        return f"the request body must be one JSON-RPC message, a JSON object (got {type(msg).__name__})"
    if msg.get("jsonrpc") != "2.0":
        return 'the message needs "jsonrpc": "2.0"'
    if "id" in msg and (isinstance(msg["id"], bool) or not isinstance(msg["id"], (str, int))):
        return '"id" must be a string or an integer'
    if "method" in msg:
        if not isinstance(msg["method"], str) or not msg["method"]:
            return '"method" must be a non-empty string'
        if "params" in msg and not isinstance(msg["params"], dict):
            return f'"params" of {msg["method"]} must be an object (got {type(msg["params"]).__name__})'
        return None
    if "id" in msg and ("result" in msg or "error" in msg):
        return None
    return 'the message is neither a request (no "method") nor a response (an "id" and a "result" or "error")'


async def _reject(send: Any, status: int, why: str, code: int = -32600) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": why}}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


class ValidBodies:
    """ASGI middleware: a POST must carry one well-formed JSON-RPC message; else 400 with the reason in one
    line (413 past `limit` bytes), before the MCP transport sees it and whatever it would make of it."""

    def __init__(self, app: Any, limit: int = MAX_BODY):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
            if len(body) > self.limit:
                await _reject(send, 413, f"the request body is over {self.limit} bytes")
                return
        why = invalid_message(body)
        if why:
            await _reject(send, 400, why, -32700 if why.startswith("the request body is not JSON") else -32600)
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: only a disconnect can come
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def uvicorn_server(config: Any) -> Any:
    """A uvicorn server that leaves SIGTERM/SIGINT to `stop_on_signal`: uvicorn's own handler re-raises the
    signal once it has stopped, which kills the process before open sessions are recorded."""
    import uvicorn

    class Quiet(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # noqa: ANN202
            yield

    return Quiet(config)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock
