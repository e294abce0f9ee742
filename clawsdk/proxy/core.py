"""The recording core: black-box agents' model calls, recorded like the built-in agent's, whatever protocol they speak.

A client posts to one of three protocols (openai_chat.py: /v1/chat/completions; openai_responses.py:
/v1/responses; anthropic.py: /v1/messages); the call goes upstream as a chat completion (upstream.py: an
OpenAI-compatible server, or a model backend in this process) and both sides are recorded to a rollout:
`model_request` (messages and tools in the chat shape, the rest of the request as `params`, the client's
`protocol`) and `model_response` (the assistant message with its tool_calls, usage, finish reason, and token
ids and logprobs when the upstream returns them). The answer goes back in the client's own protocol;
chat-completions answers pass through byte for byte, streamed or not. Streamed answers are recorded once
assembled. GET /v1/models is passed through.

Each client authenticates with a bearer token (or Anthropic's `x-api-key`); the token picks the rollout
(Recorder) its calls are recorded to, so one proxy can serve many concurrent rollouts. The proxy binds loopback.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from clawsdk._http import no_json_constant
from clawsdk.models.completion import MalformedAnswer
from clawsdk.proxy.anthropic import AnthropicMessages
from clawsdk.proxy.openai_chat import Assembly, OpenAIChat, bad_upstream, response_record
from clawsdk.proxy.openai_responses import OpenAIResponses
from clawsdk.proxy.upstream import HttpUpstream, UpstreamError, chunks_of
from clawsdk.runtime.concurrency import report_model_status
from clawsdk.store.events import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from clawsdk.proxy.wire import Protocol
    from clawsdk.store.recorder import Recorder

log = logging.getLogger(__name__)

#: The largest chat request the proxy takes (413 past it). Long agent contexts run to a few MiB of JSON;
#: without a cap a 200 MB body sat in memory (1.4 GB of RSS), went upstream and into the store.
MAX_REQUEST_BODY = 32 * 1024 * 1024

#: How long `serving` waits on its way out for requests still in flight before cancelling them.
SHUTDOWN_GRACE_S = 5.0

#: How long a streamed request may go without the upstream's status line before a client that gives up on it
#: counts as the model server's failure. A server that streams sends it at once; a client giving up sooner is
#: the client's doing (a harness could hang up on a healthy server at will and make its own failure unscored).
HUNG_AFTER_S = 30.0

#: the protocols, by the path their requests are posted to (after the base URL, e.g. /v1)
PROTOCOLS: tuple[Protocol, ...] = (OpenAIChat(), OpenAIResponses(), AnthropicMessages())

#: fields a recorded message may carry that no upstream is sent (anthropic.py: a tool result's is_error)
RECORD_ONLY = ("is_error",)


class Refused(Exception):
    """A model call no rollout takes (`ModelProxy.recorder_for`): answered 409 with the reason."""


def _protocol(path: str) -> Protocol | None:
    return next((p for p in PROTOCOLS if path.endswith(p.path)), None)


def upstream_body(chat: dict[str, Any], model: str | None, token_ids: bool, stream: bool) -> dict[str, Any]:
    """The chat body as it goes upstream: record-only fields out, the served model's name in, streamed or not as
    the upstream is asked, and, where asked, vLLM's token ids and logprobs."""
    body = dict(chat)
    if not stream and body.get("stream"):
        body.pop("stream")
        body.pop("stream_options", None)
    if any(k in m for m in body.get("messages") or [] if isinstance(m, dict) for k in RECORD_ONLY):
        body["messages"] = [{k: v for k, v in m.items() if k not in RECORD_ONLY} if isinstance(m, dict) else m
                            for m in body["messages"]]
    if model:
        body["model"] = model
    if token_ids:
        body.setdefault("logprobs", True)
        body.setdefault("return_token_ids", True)  # vLLM >= 0.10.2: prompt_token_ids and choices[].token_ids
    return body


class ModelProxy:
    """The proxy's ASGI app and its token -> recorder table.

    `upstream`: an OpenAI-compatible base URL, or an upstream object (upstream.py). `model`: the name the
    upstream serves, sent in place of whatever the client asks for (a CLI that insists on its own model names).
    `token_ids`: ask the upstream for token ids and logprobs (vLLM's `return_token_ids`, `logprobs`).
    `upstream_stream=False`: ask the upstream for whole answers, and stream them to clients that asked for a
    stream (an upstream whose streamed tool calls are broken; a stream-only client in front of it).
    A token registered with no recorder is served without recording (`clawsdk models serve`)."""

    def __init__(self, upstream: Any, upstream_key: str | None = None, *, timeout_s: float = 600.0,
                 hung_after_s: float = HUNG_AFTER_S, model: str | None = None, token_ids: bool = False,
                 upstream_stream: bool | None = None):
        self.upstream = HttpUpstream(upstream, upstream_key, timeout_s=timeout_s) if isinstance(upstream, str) \
            else upstream
        self.shown = self.upstream.shown  # what messages and records name
        self.hung_after_s = hung_after_s
        self.model = model
        self.token_ids = token_ids
        self.upstream_stream = upstream_stream
        self.routes: dict[str, Recorder | None] = {}
        self.n_requests = 0
        self.n_upstream_errors = 0  # answers the upstream failed to give (5xx, unreachable)
        #: whether the last call the upstream answered failed (5xx, an error event, unreachable): a black-box
        #: agent that then exits non-zero stopped for the model server, not of its own doing
        self.last_failed = False

    def register(self, recorder: Recorder | None, token: str | None = None) -> str:
        """A token whose calls are recorded to `recorder` (None: served, not recorded)."""
        token = token or secrets.token_urlsafe(24)
        self.routes[token] = recorder
        return token

    def unregister(self, token: str) -> None:
        self.routes.pop(token, None)

    def _route(self, scope: dict) -> tuple[bool, Recorder | None]:
        """(whether the caller's token is known, the recorder it names). Bearer, or Anthropic's x-api-key."""
        headers = dict(scope.get("headers") or [])
        got = headers.get(b"authorization", b"").decode("latin-1")
        token = got[7:] if got.lower().startswith("bearer ") else headers.get(b"x-api-key", b"").decode("latin-1")
        for known, rec in self.routes.items():
            if hmac.compare_digest(token.encode(), known.encode()):
                return True, rec
        return False, None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/")
        protocol = _protocol(path) or PROTOCOLS[0]
        known, recorder = self._route(scope)
        if not known:
            return await _json(send, 401, protocol.error(401, "missing or unknown API key for the clawsdk proxy"))
        if scope["method"] == "GET" and path.endswith("/models"):
            return await _json(send, *(await self.upstream.models()))
        if scope["method"] == "POST" and path.endswith("/messages/count_tokens"):
            return await self._count_tokens(receive, send)
        if scope["method"] != "POST" or _protocol(path) is None:
            paths = ", ".join(f"POST /v1{p.path}" for p in PROTOCOLS)
            return await _json(send, 404, protocol.error(404, f"the clawsdk proxy serves {paths} and GET /v1/models, "
                                                              f"not {scope['method']} {path}"))
        raw = await _read_body(receive)
        if raw is None:
            return
        if len(raw) > MAX_REQUEST_BODY:  # read no further; uvicorn drops the rest unread
            return await _json(send, 413, protocol.error(413, f"the request body is over {MAX_REQUEST_BODY} bytes"))
        try:
            body = json.loads(raw or b"{}", parse_constant=no_json_constant)
        except ValueError as e:  # not JSON, not UTF-8, NaN or Infinity
            return await _json(send, 400, protocol.error(400, f"the request body is not JSON: {e}"))
        except RecursionError:  # b"[" * 100000: the decoder recurses once per level
            return await _json(send, 400, protocol.error(400, "the request body is nested too deeply"))
        problem = protocol.problem(body)
        if problem is not None:
            return await _json(send, 400, protocol.error(400, problem))
        try:
            recorder = await self.recorder_for(recorder)
        except Refused as e:
            return await _json(send, 409, protocol.error(409, str(e)))
        await self._call(protocol, body, recorder, send, receive)

    async def _count_tokens(self, receive: Callable, send: Callable) -> None:
        """Anthropic's token count, estimated (about 4 characters a token): clients use it to budget, and no
        chat-completions upstream has it. Not a model call: nothing is recorded."""
        raw = await _read_body(receive) or b""
        await _json(send, 200, {"input_tokens": max(1, len(raw) // 4)})

    async def recorder_for(self, recorder: Recorder | None) -> Recorder | None:
        """The recorder of a model call whose token names `recorder`; raises Refused when no rollout takes it.
        A proxy whose rollouts start with their calls (`clawsdk serve --upstream`) finds or starts one here."""
        return recorder

    def _hang_up_failed(self, stream: bool, call: _Call, waited: float) -> bool | None:
        """Whose failure a client's hang-up is. On an answer under way, the client's (False). On a stream whose
        status line had not come in `hung_after_s`, the model server's (True): it hung. Else not known (None,
        the last call's failure stands): a non-streamed answer comes whole, so a slow one and a hung server look
        alike, and a client that hangs up early on a healthy server must not make its own failure the
        server's."""
        if call.began:
            return False
        return True if stream and waited >= self.hung_after_s else None

    def _ended(self, failed: bool) -> None:
        self.n_upstream_errors += failed
        self.last_failed = failed

    async def _call(self, protocol: Protocol, body: dict[str, Any], recorder: Recorder | None, send: Callable,
                    receive: Callable) -> None:
        """Forwards one call and records both sides. A client that hangs up mid-answer stops the upstream call at
        once (it read the rest to the end, and held the proxy's shutdown until then): the answer is recorded as
        abandoned, with what had come of it."""
        self.n_requests += 1
        chat, params = protocol.to_chat(body)
        request = ModelRequest(messages=chat.get("messages"), tools=chat.get("tools"), params=params,
                               protocol=None if protocol.name == OpenAIChat.name else protocol.name)
        asked = await recorder.record(request) if recorder is not None else None
        started = time.perf_counter()
        call = _Call()
        stream = bool(chat.get("stream"))
        up_stream = stream and self.upstream_stream is not False

        async def respond(payload: dict[str, Any], failed: bool | None) -> None:
            """Records the answer; `failed`: whether the upstream failed it (None: not known)."""
            call.recorded = True
            # a request the recorder knows is not the agent's own (a harness's tool-event recorder: one that does
            # not carry the pending calls' turn, from a script with the token) cannot make the agent's exit the
            # model server's failure
            if failed is not None and getattr(recorder, "agents_own", lambda: True)():
                self._ended(failed)
            if recorder is not None:  # `request` names the request this answers: several may be in flight
                await recorder.record(ModelResponse.from_payload({**payload, "request": asked}),
                                      duration_ms=(time.perf_counter() - started) * 1000)

        async def cut_short(why: str, failed: bool | None) -> None:
            if not call.answering:  # whole (its finish reason came), but the upstream never ended its stream
                await respond(call.assembly.record(), failed)
                return
            payload: dict[str, Any] = {"error": why, "status": 499, "abandoned": True}
            message = call.assembly.message
            if message.get("content") or message.get("tool_calls"):
                payload["partial"] = message
            await respond(payload, failed)

        gone = False
        data = json.dumps(upstream_body(chat, self.model, self.token_ids, up_stream)).encode()
        try:
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    nonlocal gone
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    if call.answering:
                        gone = True
                        tg.cancel_scope.cancel()

                tg.start_soon(watch)
                await self._forward(protocol, params, data, (stream, up_stream), send, respond, call)
                tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            if not call.recorded:  # the proxy is stopping (past SHUTDOWN_GRACE_S) with the call open
                with anyio.CancelScope(shield=True):
                    await cut_short("the proxy stopped before the answer was complete", None)
            raise
        if gone:
            await cut_short("the client closed the connection before the answer was complete",
                            self._hang_up_failed(up_stream, call, time.perf_counter() - started))

    async def _forward(self, protocol: Protocol, params: dict[str, Any], data: bytes, streams: tuple[bool, bool],
                       send: Callable, respond: Callable[..., Awaitable[None]], call: _Call) -> None:
        # ASCII JSON (`data`): a "\udcff" the agent's harness sent loads as a lone surrogate, which no UTF-8
        # encoder takes; httpx's own encoding raised, and the agent got a 500 for its own request
        passthrough = getattr(protocol, "passthrough", False)
        buffer = ""  # a streamed answer's unfinished line
        stream, up_stream = streams  # what the client asked for; what the upstream is asked for
        translator = None if passthrough or not stream else protocol.stream(params)
        try:
            async with self.upstream.open(data, up_stream) as r:
                report_model_status(r.status_code)  # -c auto counts 429/503 of harness agents' models too
                if not up_stream:
                    raw = await r.read()
                    status = r.status_code
                    try:
                        answer = json.loads(raw)
                    except ValueError:
                        answer = {"error": {"message": raw[:2000].decode("utf-8", "replace")}}
                        if status < 400:  # a 200 whose body is not JSON is no answer at all
                            answer, status = bad_upstream("the body is not JSON", raw), 502
                    if status < 400:
                        try:
                            payload = response_record(answer)
                        except MalformedAnswer as e:
                            answer, status = bad_upstream(str(e), raw), 502
                    if status >= 400:
                        payload = {"error": answer, "status": status}
                    call.answering = False
                    await respond(payload, status >= 500)
                    if stream and status < 400:  # a whole answer, streamed to a client that asked for a stream
                        return await _sse(send, [translator.feed(c) for c in chunks_of(answer)]
                                          + [translator.finish(payload)] if translator is not None else
                                          [f"data: {json.dumps(c)}\n\n".encode() for c in chunks_of(answer)]
                                          + [b"data: [DONE]\n\n"])
                    if passthrough:
                        return await _json(send, status, answer)
                    return await _json(send, status, protocol.answer(answer, params) if status < 400 else
                                       protocol.error(status, _message_of(answer)))
                failed_status = r.status_code >= 400
                if failed_status and not passthrough:  # said as the client's protocol says an error
                    raw = await r.read()
                    try:
                        answer = json.loads(raw)
                    except ValueError:
                        answer = {"error": {"message": raw[:2000].decode("utf-8", "replace")}}
                    call.answering = False
                    await respond({"error": answer, "status": r.status_code}, r.status_code >= 500)
                    return await _json(send, r.status_code, protocol.error(r.status_code, _message_of(answer)))
                ctype = r.headers.get("content-type", "text/event-stream") if passthrough else "text/event-stream"
                await send({"type": "http.response.start", "status": r.status_code,
                            "headers": [(b"content-type", ctype.encode()), (b"cache-control", b"no-cache")]})
                call.began = True
                assembly = call.assembly
                async for chunk in r.chunks():
                    if passthrough:
                        await send({"type": "http.response.body", "body": chunk.encode(), "more_body": True})
                    buffer += chunk
                    while "\n" in buffer:
                        line, buffer = buffer.split("\n", 1)
                        event = assembly.fold_line(line.strip())
                        if translator is not None and event is not None:
                            await _chunk(send, translator.feed(event))
                    if assembly.meta.get("finish_reason") or assembly.meta.get("done"):
                        call.answering = False  # whole: a client that hangs up now (at [DONE]) has it all
                    if assembly.meta.get("done"):
                        break  # nothing follows [DONE]; an upstream slow to close must not hold the call
                event = assembly.fold_line(buffer.strip())
                if translator is not None and event is not None:
                    await _chunk(send, translator.feed(event))
                call.answering = False
                payload = assembly.record()
                if failed_status:
                    payload = {"error": assembly.meta.get("error") or buffer[:2000], "status": r.status_code}
                elif translator is not None:
                    tail = translator.fail(_message_of(payload)) if "error" in payload else translator.finish(payload)
                    await _chunk(send, tail)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                # streamed as not: a 5xx, or an error event the upstream sent in the stream
                await respond(payload, r.status_code >= 500 or (r.status_code < 400 and "error" in assembly.meta))
        except UpstreamError as e:
            msg = str(e)
            call.answering = False
            await respond({"error": msg, "status": 502}, True)
            error = protocol.error(502, msg) if not passthrough else {"error": {"message": msg, "type": "upstream_error"}}
            if not call.began:  # streamed or not, the client has had nothing yet: the same 502
                await _json(send, 502, error)
            elif translator is not None:
                await send({"type": "http.response.body", "body": translator.fail(msg), "more_body": False})
            else:  # mid-stream: a last event says why it stops, then the stream ends cleanly
                lead = "\n\n" if buffer else ""  # ends an event the upstream left half sent
                last = f"{lead}data: {json.dumps(error)}\n\n".encode()
                await send({"type": "http.response.body", "body": last, "more_body": False})


class _Call:
    """One request on its way through the proxy, as its forwarding and its disconnect watcher see it."""

    def __init__(self) -> None:
        self.began = False  # the upstream's answer has begun (its status line came)
        self.answering = True  # False once the answer is whole: a disconnect after that is the client's goodbye
        self.recorded = False  # its model_response is recorded
        self.assembly = Assembly()  # a streamed answer so far


def _message_of(answer: Any) -> str:
    err = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"]
    return str(err if err is not None else answer)[:2000]


async def _read_body(receive: Callable) -> bytes | None:
    """The request body, or None if the client went away; stops reading one byte past MAX_REQUEST_BODY."""
    chunks, size = [], 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None
        chunks.append(msg.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_REQUEST_BODY or not msg.get("more_body"):
            return b"".join(chunks)


async def _chunk(send: Callable, data: bytes) -> None:
    if data:
        await send({"type": "http.response.body", "body": data, "more_body": True})


def _bind_unix(sock: Any, path: str) -> None:
    """Bind a unix socket at `path`, however long: a path past the kernel's 108 bytes (a docker sandbox's home
    lies deep) is reached through the open folder's /proc/self/fd entry."""
    import os

    if len(os.fsencode(path)) < 100:
        sock.bind(path)
        return
    folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{folder}/{os.path.basename(path)}")
    finally:
        os.close(folder)


async def _sse(send: Callable, events: list[bytes]) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    await send({"type": "http.response.body", "body": b"".join(events)})


async def _json(send: Callable, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


@contextlib.asynccontextmanager
async def serving(app: Any, host: str = "127.0.0.1", port: int = 0, *, uds: str | None = None) -> AsyncIterator[str]:
    """Run an ASGI app with uvicorn in a task of this task group; yields http://HOST:PORT.

    With `uds`, it listens on that unix socket instead (for a sandbox that has no network but
    has the socket bound in) and yields unix:PATH. On exit, requests still in flight get
    SHUTDOWN_GRACE_S to finish, then are cancelled: once an agent's command has ended, a call still
    open is nobody's turn (a process it left behind), and must not hold the rollout.
    """
    import socket

    from clawsdk._http import bind, uvicorn_server

    if uds is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _bind_unix(sock, uds)
        sock.listen(128)
        sock.setblocking(False)
        url = f"unix:{uds}"
    else:
        sock = bind(host, port)
        url = f"http://{host}:{sock.getsockname()[1]}"
    server = uvicorn_server(app, lifespan="on", timeout_graceful_shutdown=SHUTDOWN_GRACE_S)  # the caller owns signals
    async with anyio.create_task_group() as tg:
        # the socket already listens, so clients may connect now: the kernel queues them until uvicorn accepts
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        try:
            yield url
        finally:
            server.should_exit = True


