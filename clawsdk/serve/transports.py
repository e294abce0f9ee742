"""`clawsdk serve`'s transports: stdio (one session; the process ends when it does) and streamable HTTP
(bound to loopback unless told otherwise, every request with `Authorization: Bearer TOKEN`)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import mcp_types as types

from clawsdk._http import (
    MAX_BODY,
    BearerAuth,
    Throttled,
    ValidBodies,
    bind,
    invalid_message,
    is_loopback,
    uvicorn_server,
)
from clawsdk.serve.host import RolloutHost, ServeConfig, hosting, stop_on_signal, stop_on_store_failure

if TYPE_CHECKING:
    from anyio.abc import ObjectSendStream
    from mcp.server.lowlevel import Server

log = logging.getLogger(__name__)


class _StdinLines:
    """The JSON-RPC messages on stdin, one a line, read without a thread so that a signal can stop the server.

    (The SDK reads stdin in a worker thread that no cancellation can interrupt.) Each chunk read is scanned
    once, and a line is kept to `limit` bytes (the HTTP transport's MAX_BODY): past it the line is answered
    with a JSON-RPC error at once and the rest of it is read and dropped. A line that is not one JSON-RPC
    message (the HTTP transport's checks, then the SDK's) is answered with a JSON-RPC error naming why, with
    the request's id where it can be read, and skipped: the SDK would drop it without an answer, and a
    caller waiting on its id would wait for ever. Answers go out through `answer_through`'s stream."""

    CHUNK = 65536

    def __init__(self, fd: int, *, pollable: bool = True, limit: int = MAX_BODY):
        self.fd = fd
        self.pollable = pollable  # a regular file (or /dev/null) is read without waiting: epoll refuses it
        self.limit = limit
        self.partial = bytearray()  # the line being read
        #: lines read in full and not yet taken; None stands for one cut off at `limit`
        self.lines: deque[bytes | None] = deque()
        self.dropping = False  # the line being read ran past `limit`: its rest is dropped
        self.eof = False
        self._answers: ObjectSendStream[Any] | None = None
        self._answering = anyio.Event()
        self._refused = Throttled(logger=log)  # one line per 10 s at most: a client's flood is not the log's

    def answer_through(self, stream: ObjectSendStream[Any]) -> None:
        """Where the errors for refused lines go: the transport's stream to stdout."""
        self._answers = stream
        self._answering.set()

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        while True:
            while not self.lines and not self.eof:
                await self._read()
            if not self.lines:
                raise StopAsyncIteration
            line = self.lines.popleft()
            if line is None:
                await self._refuse(None, f"the line is over {self.limit} bytes, the most one message may be; "
                                         "it was not read", -32600)
                continue
            if not line.strip():  # a blank line is no message
                continue
            text, why, code = _checked(line)
            if text is not None:
                return text
            await self._refuse(line, why, code)

    async def _refuse(self, line: bytes | None, why: str, code: int) -> None:
        """Answer a line that is no message with a JSON-RPC error (its id if readable) and log it."""
        from mcp.shared.message import SessionMessage

        self._refused.warning("clawsdk serve: a line on stdin was skipped, with an error for the client: %s",
                              why)
        await self._answering.wait()
        assert self._answers is not None
        error = types.JSONRPCError(jsonrpc="2.0", id=_readable_id(line),
                                   error=types.ErrorData(code=code, message=why))
        try:
            await self._answers.send(SessionMessage(error))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the session is over
            pass

    async def _read(self) -> None:
        if self.pollable:
            await anyio.wait_readable(self.fd)
        else:
            await anyio.lowlevel.checkpoint()
        try:
            chunk = os.read(self.fd, self.CHUNK)
        except BlockingIOError:
            return
        except OSError as e:  # not readable at all (a folder): the client is gone
            log.warning("clawsdk serve: cannot read stdin (%s); ending the session", e)
            chunk = b""
        if not chunk:
            self.eof = True
            if self.partial and not self.dropping:  # the last line, without its newline
                self.lines.append(bytes(self.partial))
            self.partial.clear()
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._take(chunk, start, end)
            if self.dropping:
                self.dropping = False  # the end of a line cut off: already answered
            else:
                self.lines.append(bytes(self.partial))
            self.partial.clear()
            start = end + 1
        self._take(chunk, start, len(chunk))

    def _take(self, chunk: bytes, start: int, end: int) -> None:
        if self.dropping or start == end:
            return
        if len(self.partial) + end - start > self.limit:
            self.partial.clear()
            self.dropping = True
            self.lines.append(None)
            return
        self.partial += memoryview(chunk)[start:end]


def _checked(line: bytes) -> tuple[str | None, str, int]:
    """(the line as text, "", 0) if it is one JSON-RPC message MCP takes; else (None, why, JSON-RPC code):
    the HTTP transport's checks (http.invalid_message), then the SDK's own."""
    why = invalid_message(line)
    if why is not None:
        why = why.replace("the request body", "the line", 1)
        return None, why, -32700 if why.startswith("the line is not JSON") else -32600
    text = line.decode("utf-8", "replace")
    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError as e:  # pydantic's ValidationError: a shape the SDK cannot take
        errors = e.errors() if hasattr(e, "errors") else []
        first = errors[0] if errors else {"msg": str(e)}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return None, f"the line is not a JSON-RPC message MCP can take ({where + ': ' if where else ''}" \
                     f"{first.get('msg')})", -32600
    return text, "", 0


def _readable_id(line: bytes | None) -> int | str | None:
    """The id of the request on `line`, where it can be read (for its error answer), else None."""
    if line is None:
        return None
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    rid = msg.get("id") if isinstance(msg, dict) else None
    return rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on `fd` (epoll refuses regular files and /dev/null)."""
    import select

    if not hasattr(select, "epoll"):
        return False
    ep = select.epoll()
    try:
        ep.register(fd, select.EPOLLIN)
        return True
    except OSError:
        return False
    finally:
        ep.close()


@contextlib.contextmanager
def _claimed_stdin():
    """stdin as `_StdinLines`, and fd 0 then reads /dev/null so children never eat the wire. One that can be
    polled (a pipe, a socket, a terminal) is waited on; a regular file (or /dev/null) is read at once.

    No O_NONBLOCK: the open file is shared with the process that spawned us. A read after poll says
    readable returns what is there without blocking."""
    pollable = _pollable(0)
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        yield _StdinLines(private, pollable=pollable)
    finally:
        os.dup2(private, 0)
        os.close(private)


async def serve_stdio(config: ServeConfig, *, proxy_host: str = "127.0.0.1", proxy_port: int = 0,
                      token: str | None = None, on_proxy: Callable[[str, str], None] | None = None) -> RolloutHost:
    """Serve one MCP session over this process's stdin/stdout; returns once its rollout is recorded.

    With `config.upstream`, the rollout's model calls are recorded too: the recording proxy listens on
    http://PROXY_HOST:PROXY_PORT/v1 (loopback, a bearer token), told to `on_proxy(base_url, token)`, so an
    agent whose MCP client speaks stdio is recorded whole by one command. SIGTERM/SIGINT end the session as
    `cancelled` and the run as `interrupted`, never left `running`. A store that fails ends it too: the run is
    settled `failed` and StoreError is raised."""
    from mcp.server.stdio import stdio_server

    async with hosting(config) as host:
        server = host.server()
        with _claimed_stdin() as lines:
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop_on_signal, host, tg.cancel_scope.cancel)
                tg.start_soon(stop_on_store_failure, host, tg.cancel_scope.cancel)
                uv = None
                if config.upstream:
                    token = token or secrets.token_urlsafe(32)
                    sock = bind(proxy_host, proxy_port)
                    uv = uvicorn_server(_served_proxy(host, config, token), lifespan="off",
                                        timeout_graceful_shutdown=5)
                    tg.start_soon(lambda: uv.serve(sockets=[sock]))
                    if on_proxy is not None:
                        url_host = f"[{proxy_host}]" if ":" in proxy_host else proxy_host
                        on_proxy(f"http://{url_host}:{sock.getsockname()[1]}/v1", token)
                async with stdio_server(stdin=lines) as (read, write):
                    lines.answer_through(write)  # lines that are no message are answered with an error
                    await server.run(read, write, server.create_initialization_options())
                if uv is not None:
                    host.stop()
                    await host.wait_recorded()
                    uv.should_exit = True
                    await anyio.sleep(0.2)
                tg.cancel_scope.cancel()
    return host


async def _end_http_sessions(server: Server) -> None:
    """Close every client's MCP session, so that its open event stream ends and uvicorn can stop at once
    (otherwise its graceful shutdown waits on the stream, then cancels it with a traceback in the log).
    The SDK offers no public call for this: it keeps the transports on the app's session manager."""
    manager = getattr(server, "_session_manager", None)
    for transport in list(getattr(manager, "_server_instances", {}).values()):
        try:
            await transport.terminate()
        except Exception as e:  # the server is going down either way
            log.debug("closing an MCP session failed: %s", e)


def _served_proxy(host: RolloutHost, config: ServeConfig, token: str) -> Any:
    """The recording model proxy of a served task: a model call with the server's token is recorded to the rollout in
    progress, or starts one that the next session's first tool call takes over (RolloutHost.live_for_model)."""
    from clawsdk.proxy.core import ModelProxy, Refused

    class ServedProxy(ModelProxy):
        async def recorder_for(self, recorder: Any) -> Any:
            live = await host.live_for_model()
            if isinstance(live, str):
                raise Refused(live)
            return live.recorder

    proxy = ServedProxy(config.upstream, config.upstream_key)
    proxy.register(None, token)
    return proxy


def _with_proxy(mcp_app: Any, proxy: Any) -> Any:
    """One ASGI app: /v1/... (the model protocols) to the proxy, the rest to MCP."""
    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            return await proxy(scope, receive, send)
        return await mcp_app(scope, receive, send)

    return app


async def serve_http(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                     on_ready: Callable[[str, str], None] | None = None, path: str = "/mcp") -> RolloutHost:
    """Serve MCP over streamable HTTP at http://HOST:PORT/mcp until stopped (or max_rollouts ended, or the
    store failed: then the run is settled `failed` and StoreError is raised)."""
    from mcp.server.transport_security import TransportSecuritySettings

    token = token or secrets.token_urlsafe(32)
    sock = bind(host, port)
    actual_port = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{actual_port}{path}"
    stop = anyio.Event()
    async with hosting(config, on_all_done=stop.set) as rollout_host:
        server = rollout_host.server()
        # on loopback, a browser page whose name was rebound to this machine is refused by its Host header
        hosts = sorted({"127.0.0.1", "localhost", "[::1]", url_host}) if is_loopback(host) else []
        security = TransportSecuritySettings(enable_dns_rebinding_protection=bool(hosts),
                                             allowed_hosts=[f"{h}:*" for h in hosts],
                                             allowed_origins=[f"http://{h}:*" for h in hosts])
        app = server.streamable_http_app(streamable_http_path=path, transport_security=security, host=host,
                                         session_idle_timeout=config.time_limit + 60)
        mcp_app = BearerAuth(ValidBodies(app), token)
        if config.upstream:  # the rollouts' model calls too, on the same port and token: /v1/...
            mcp_app = _with_proxy(mcp_app, _served_proxy(rollout_host, config, token))
        # open event streams would hold a graceful shutdown forever; the rollouts are recorded by then
        uv = uvicorn_server(mcp_app, lifespan="on", timeout_graceful_shutdown=5)

        async def watch() -> None:
            await stop.wait()
            rollout_host.stop()  # before uvicorn closes the sessions, which would read as disconnects
            await rollout_host.wait_recorded()
            uv.should_exit = True  # stops accepting; answers in flight (a `finish`) still go out
            await anyio.sleep(0.5)
            await _end_http_sessions(server)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            tg.start_soon(stop_on_signal, rollout_host, stop.set)
            tg.start_soon(stop_on_store_failure, rollout_host, stop.set)
            if on_ready is not None:
                on_ready(url, token)
            try:
                await uv.serve(sockets=[sock])
            finally:
                tg.cancel_scope.cancel()
        rollout_host.stop()
        await rollout_host.wait_recorded()
    return rollout_host
