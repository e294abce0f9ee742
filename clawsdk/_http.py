"""HTTP plumbing of clawsdk's servers (`clawsdk serve`, the model proxy, `clawsdk skills serve`): bearer-token
auth, request-body validation, the listening socket, a uvicorn server that leaves signals to the caller, and
URLs as records keep them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ipaddress
import json
import logging
import socket
import time
from typing import Any
from urllib.parse import urlparse, urlunparse

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

log = logging.getLogger(__name__)

#: Open connections one listener keeps; past it a new one is accepted and closed at once. uvicorn has no
#: such cap (limit_concurrency answers 503 only once a request has arrived), so silent connections used
#: to pile up until the runner ran out of file descriptors and rollouts in progress failed.
MAX_CONNECTIONS = 256
#: Seconds a client has to send a whole request, headers and body; uvicorn never drops a connection that
#: sends nothing or stops halfway.
REQUEST_DEADLINE_S = 10.0


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer TOKEN` (the token compared in constant
    time; the scheme's name in any case, as RFC 7235 has it: `bearer TOKEN` is as good)."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.expected = token.encode()

    def _authorized(self, header: bytes) -> bool:
        scheme, _, credentials = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.lstrip(b" "), self.expected)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not self._authorized(got):
                body = json.dumps({"error": "missing or wrong bearer token; send Authorization: Bearer TOKEN "
                                            "(printed by clawsdk serve when it started)"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="clawsdk"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


MAX_BODY = DEFAULT_MAX_REQUEST_BODY_SIZE  # what the MCP transport itself accepts


def no_json_constant(name: str) -> Any:
    """`parse_constant` for json.loads: NaN and Infinity are not JSON. Taken in, they were forwarded (a strict
    model server answered 500, read as the server failing) and kept in the store as invalid JSON."""
    raise ValueError(f"{name} is not a JSON value")


def invalid_message(body: bytes) -> str | None:
    """Why `body` is not one JSON-RPC 2.0 message as MCP's streamable HTTP takes it, or None if it is."""
    try:
        msg = json.loads(body, parse_constant=no_json_constant)
    except (ValueError, UnicodeDecodeError) as e:
        return f"the request body is not JSON ({e})"
    except RecursionError:  # b"[" * 100000: the decoder recurses once per level
        return "the request body is nested too deeply"
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


class Throttled:
    """Logs one warning per `every_s` seconds at most, with how many were left out: a flood of them (a
    connection flood, a process out of file descriptors) must not fill the disk with the same line."""

    def __init__(self, every_s: float = 10.0, logger: logging.Logger | None = None):
        self.every_s = every_s
        self.log = logger or log
        self.last = -every_s
        self.dropped = 0

    def warning(self, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            self.dropped += 1
            return
        if self.dropped:
            msg += f" ({self.dropped} more like it in the last {self.every_s:g} s not logged)"
        self.last, self.dropped = now, 0
        self.log.warning(msg, *args)


@functools.cache
def guarded_protocol() -> type:
    """uvicorn's HTTP protocol with a cap on open connections (MAX_CONNECTIONS) and a deadline for each
    request to arrive in full (REQUEST_DEADLINE_S); an answer in progress (an event stream, a long tool
    call) has no deadline."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    refused = Throttled()

    class Guarded(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        max_connections = MAX_CONNECTIONS
        deadline_s = REQUEST_DEADLINE_S
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > self.max_connections:
                refused.warning("refused a connection: %d are open, the most one listener keeps",
                                self.max_connections)
                transport.abort()  # no handshake, no TIME_WAIT: the descriptor is free at once
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._deadline is None:  # the first bytes of the next request on a kept-alive connection
                self._arm()
            super().data_received(data)
            if self.cycle is not None and not self.cycle.more_body and not self.cycle.response_complete:
                self._disarm()  # read in full: the app has it

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(self.deadline_s, self._deadline_passed)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _deadline_passed(self) -> None:
            self._deadline = None
            cycle = self.cycle
            waiting = cycle is None or cycle.response_complete or cycle.more_body
            if waiting and not self.transport.is_closing():
                self.transport.close()  # the app sees a disconnect if it was reading the body

    return Guarded


def _quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Out of file descriptors, asyncio logs "socket.accept() out of system resource" with a traceback at
    every retry of every listener; keep one line per 10 s of it (once per loop)."""
    previous = loop.get_exception_handler()
    if getattr(previous, "clawsdk_quiet", False):
        return
    throttled = Throttled()

    def handler(loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            throttled.warning("cannot accept connections: %s", context.get("exception"))
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.clawsdk_quiet = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def uvicorn_server(app: Any, **options: Any) -> Any:
    """A uvicorn server for `app` with the guarded protocol (connection cap, request deadline) that leaves
    SIGTERM/SIGINT to the caller: uvicorn's own handler re-raises the signal once it has stopped, which
    kills the process before open sessions are recorded."""
    import uvicorn

    class Quiet(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            yield

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            _quiet_accept_errors(asyncio.get_running_loop())
            await super().serve(sockets)

    return Quiet(uvicorn.Config(app, http=guarded_protocol(), **{"log_level": "warning", **options}))


def is_loopback(host: str) -> bool:
    """Whether an address to bind is this machine only: localhost, 127.0.0.0/8, ::1 (bracketed or not)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def public_url(url: str) -> str:
    """`url` without user, password, query and fragment: what may appear in a message to the agent, a log
    or the store (http://user:PW@host/v1?key=K used to reach all three as it was given)."""
    parsed = urlparse(url.strip())
    host = parsed.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = host + (f":{parsed.port}" if parsed.port else "")
    return urlunparse((parsed.scheme, netloc, parsed.path, "", "", "")).rstrip("/")
