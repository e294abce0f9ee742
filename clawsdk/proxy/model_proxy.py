"""A recording OpenAI-compatible proxy: black-box agents' model calls, recorded like the built-in agent's.

POST /v1/chat/completions is forwarded to the upstream (a vLLM server, llama.cpp, a hosted API)
and both sides are recorded to a rollout: `model_request` (messages, tools, parameters) and
`model_response` (the assistant message with its tool_calls, usage, finish reason, and token ids
and logprobs when the upstream returns them). Streaming answers pass through chunk by chunk and
are recorded once assembled. GET /v1/models is passed through.

Each client authenticates with a bearer token; the token picks the rollout (Recorder) its calls
are recorded to, so one proxy can serve many concurrent rollouts. The proxy binds loopback.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import anyio

from clawsdk._http import no_json_constant, public_url
from clawsdk.models.completion import MalformedAnswer, capped, read_completion
from clawsdk.runtime.concurrency import report_model_status

if TYPE_CHECKING:
    from clawsdk.runtime.recorder import Recorder
    from clawsdk.tasks.model import Task

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



def _merge_delta(acc: dict[str, Any], delta: dict[str, Any]) -> None:
    """Fold one streamed delta into the assembled assistant message."""
    if delta.get("role"):
        acc["role"] = delta["role"]
    for key in ("content", "reasoning_content", "reasoning"):
        if isinstance(delta.get(key), str) and delta[key]:
            acc[key] = (acc.get(key) or "") + delta[key]
    tool_calls = delta.get("tool_calls")
    for tc in tool_calls if isinstance(tool_calls, list) else []:
        if not isinstance(tc, dict):
            continue
        calls = acc.setdefault("tool_calls", [])
        idx = tc.get("index", len(calls))
        if not isinstance(idx, int) or not 0 <= idx < 1024:  # an index is a small position, never a size
            continue
        while len(calls) <= idx:
            calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        slot = calls[idx]
        if isinstance(tc.get("id"), str):
            slot["id"] = tc["id"]
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        for key in ("name", "arguments"):
            if isinstance(fn.get(key), str):
                slot["function"][key] += fn[key]


def response_record(body: dict[str, Any]) -> dict[str, Any]:
    """The model_response payload of a (non-streamed) chat completion; MalformedAnswer if it is not one."""
    read_completion(body)  # every field this reads has the type it needs
    choice = body["choices"][0]
    out: dict[str, Any] = {"message": choice.get("message"), "finish_reason": choice.get("finish_reason"),
                           "usage": body.get("usage"), "model": body.get("model"), "id": body.get("id")}
    for key in ("logprobs", "token_ids"):
        if choice.get(key) is not None:
            out["completion_token_ids" if key == "token_ids" else key] = choice[key]
    if body.get("prompt_token_ids") is not None:
        out["prompt_token_ids"] = body["prompt_token_ids"]
    if len(body.get("choices") or []) > 1:
        out["choices"] = body["choices"]
    return out


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


def request_problem(body: Any) -> str | None:
    """Why a chat-completions request body cannot be forwarded, or None (it is checked before anything
    reads it: a list or a string used to be an HTTP 500 with a traceback in the log)."""
    if not isinstance(body, dict):
        return f"the request body must be a JSON object with `messages`, not {_kind(body)}"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        what = "missing" if "messages" not in body else f"{_kind(messages)}" if not isinstance(messages, list) \
            else "an empty list"
        return f"`messages` must be a non-empty list of {{role, content}} objects, got {what}"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return f"messages[{i}] must be an object with a string `role`, got {_kind(m)}" \
                if not isinstance(m, dict) else f"messages[{i}].role must be a string, got {_kind(m.get('role'))}"
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        return "`tools` must be a list of tool objects"
    for key, types, what in (("model", str, "a string"), ("stream", bool, "a boolean")):
        if body.get(key) is not None and not isinstance(body[key], types):
            return f"`{key}` must be {what}, got {_kind(body[key])}"
    return None


class ModelProxy:
    """The proxy's ASGI app and its token -> recorder table."""

    def __init__(self, upstream: str, upstream_key: str | None = None, *, timeout_s: float = 600.0,
                 hung_after_s: float = HUNG_AFTER_S):
        parsed = urlparse(upstream.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"upstream {upstream!r} is not an http(s) URL; give e.g. --upstream http://127.0.0.1:8000/v1")
        self.upstream = upstream.strip().rstrip("/")
        self.shown = public_url(self.upstream)  # what messages and records name
        self.upstream_key = upstream_key
        self.timeout_s = timeout_s
        self.hung_after_s = hung_after_s
        self.routes: dict[str, Recorder] = {}
        self.n_requests = 0
        self.n_upstream_errors = 0  # answers the upstream failed to give (5xx, unreachable)
        #: whether the last call the upstream answered failed (5xx, an error event, unreachable): a black-box
        #: agent that then exits non-zero stopped for the model server, not of its own doing
        self.last_failed = False

    def register(self, recorder: Recorder, token: str | None = None) -> str:
        """A token whose calls are recorded to `recorder`."""
        token = token or secrets.token_urlsafe(24)
        self.routes[token] = recorder
        return token

    def unregister(self, token: str) -> None:
        self.routes.pop(token, None)

    def _recorder(self, scope: dict) -> Recorder | None:
        got = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        token = got[7:] if got.lower().startswith("bearer ") else ""
        for known, rec in self.routes.items():
            if hmac.compare_digest(token.encode(), known.encode()):
                return rec
        return None

    def _upstream_headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.upstream_key:
            headers["authorization"] = f"Bearer {self.upstream_key}"
        return headers

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
        recorder = self._recorder(scope)
        if recorder is None:
            return await _json(send, 401, {"error": {"message": "missing or unknown API key for the clawsdk proxy",
                                                     "type": "invalid_request_error"}})
        if scope["method"] == "GET" and path.endswith("/models"):
            return await self._models(send)
        if scope["method"] != "POST" or not path.endswith("/chat/completions"):
            return await _json(send, 404, {"error": {"message": f"the clawsdk proxy serves POST /v1/chat/completions "
                                                                 f"and GET /v1/models, not {scope['method']} {path}"}})
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_REQUEST_BODY:  # stop here; uvicorn drops the rest unread, the client gets the 413
                why = f"the request body is over {MAX_REQUEST_BODY} bytes"
                return await _json(send, 413, {"error": {"message": why, "type": "invalid_request_error"}})
            if not msg.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            body = json.loads(raw or b"{}", parse_constant=no_json_constant)
        except ValueError as e:  # not JSON, not UTF-8, NaN or Infinity
            return await _json(send, 400, {"error": {"message": f"the request body is not JSON: {e}",
                                                     "type": "invalid_request_error"}})
        except RecursionError:  # b"[" * 100000: the decoder recurses once per level
            return await _json(send, 400, {"error": {"message": "the request body is nested too deeply",
                                                     "type": "invalid_request_error"}})
        problem = request_problem(body)
        if problem is not None:
            return await _json(send, 400, {"error": {"message": problem, "type": "invalid_request_error"}})
        await self._chat(body, recorder, send, receive)

    async def _models(self, send: Callable) -> None:
        import httpx2

        try:
            async with httpx2.AsyncClient(timeout=30) as client:
                r = await client.get(f"{self.upstream}/models", headers=self._upstream_headers())
            await _json(send, r.status_code, r.json())
        except Exception as e:  # noqa: BLE001
            msg = self._redact(f"upstream {self.shown}: {type(e).__name__}: {e}")
            await _json(send, 502, {"error": {"message": msg}})

    def _hang_up_failed(self, body: dict[str, Any], call: _Call, waited: float) -> bool | None:
        """Whose failure a client's hang-up is. On an answer under way, the client's (False). On a stream whose
        status line had not come in `hung_after_s`, the model server's (True): it hung. Else not known (None,
        the last call's failure stands): a non-streamed answer comes whole, so a slow one and a hung server look
        alike, and a client that hangs up early on a healthy server must not make its own failure the
        server's."""
        if call.began:
            return False
        return True if body.get("stream") and waited >= self.hung_after_s else None

    def _ended(self, failed: bool) -> None:
        self.n_upstream_errors += failed
        self.last_failed = failed

    def _redact(self, text: str) -> str:
        """`text` with the upstream URL as it was given (credentials, query) replaced by the public one."""
        text = text.replace(self.upstream, self.shown)
        password = urlparse(self.upstream).password
        return text.replace(password, "***") if password else text

    async def _chat(self, body: dict[str, Any], recorder: Recorder, send: Callable, receive: Callable) -> None:
        """Forwards one chat request and records both sides. A client that hangs up mid-answer stops the
        upstream call at once (it read the rest to the end, and held the proxy's shutdown until then): the
        answer is recorded as abandoned, with what had come of it."""
        self.n_requests += 1
        request = {"messages": body.get("messages"), "tools": body.get("tools"),
                   # every other field goes upstream, so every one is recorded: `chat_template`,
                   # `continue_final_message` or `logit_bias` change what the model saw or said
                   "params": {k: v for k, v in body.items() if k not in ("messages", "tools")}}
        asked = await recorder.record("model_request", request)
        started = time.perf_counter()
        call = _Call()

        async def respond(payload: dict[str, Any], failed: bool | None) -> None:
            """Records the answer; `failed`: whether the upstream failed it (None: not known)."""
            call.recorded = True
            # a request the recorder knows is not the agent's own (OpenClaw's recorder: one that does not
            # carry the pending calls' turn, from a script with the token) cannot make the agent's exit the
            # model server's failure
            if failed is not None and getattr(recorder, "agents_own", lambda: True)():
                self._ended(failed)
            # `request` names the request this answers: a client may have several calls in flight
            await recorder.record("model_response", {**payload, "request": asked},
                                  duration_ms=(time.perf_counter() - started) * 1000)

        async def cut_short(why: str, failed: bool | None) -> None:
            if not call.answering:  # whole (its finish reason came), but the upstream never ended its stream
                await respond(call.streamed(), failed)
                return
            payload: dict[str, Any] = {"error": why, "status": 499, "abandoned": True}
            if call.message.get("content") or call.message.get("tool_calls"):
                payload["partial"] = call.message
            await respond(payload, failed)

        gone = False
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
                await self._forward(body, send, respond, call)
                tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            if not call.recorded:  # the proxy is stopping (past SHUTDOWN_GRACE_S) with the call open
                with anyio.CancelScope(shield=True):
                    await cut_short("the proxy stopped before the answer was complete", None)
            raise
        if gone:
            await cut_short("the client closed the connection before the answer was complete",
                            self._hang_up_failed(body, call, time.perf_counter() - started))

    async def _forward(self, body: dict[str, Any], send: Callable, respond: Callable[..., Awaitable[None]],
                       call: _Call) -> None:
        import httpx2

        stream = bool(body.get("stream"))
        # ASCII JSON: a "\udcff" the agent's harness sent loads as a lone surrogate, which no UTF-8 encoder
        # takes; httpx's own encoding raised, and the agent got a 500 for its own request
        data = json.dumps(body).encode()
        buffer = ""  # a streamed answer's unfinished line
        try:
            async with httpx2.AsyncClient(timeout=self.timeout_s) as client:
                if not stream:
                    r = await client.post(f"{self.upstream}/chat/completions", content=data,
                                          headers=self._upstream_headers())
                    status = r.status_code
                    report_model_status(status)  # -c auto counts 429/503 of harness agents' models too
                    try:
                        answer = r.json()
                    except ValueError:
                        answer = {"error": {"message": r.text[:2000]}}
                        if status < 400:  # a 200 whose body is not JSON is no answer at all
                            answer, status = _bad_upstream("the body is not JSON", r.content), 502
                    if status < 400:
                        try:
                            payload = response_record(answer)
                        except MalformedAnswer as e:
                            answer, status = _bad_upstream(str(e), r.content), 502
                    if status >= 400:
                        payload = {"error": answer, "status": status}
                    call.answering = False
                    await respond(payload, status >= 500)
                    return await _json(send, status, answer)
                async with client.stream("POST", f"{self.upstream}/chat/completions", content=data,
                                         headers=self._upstream_headers()) as r:
                    report_model_status(r.status_code)
                    await send({"type": "http.response.start", "status": r.status_code,
                                "headers": [(b"content-type", r.headers.get("content-type", "text/event-stream").encode()),
                                            (b"cache-control", b"no-cache")]})
                    call.began = True
                    meta = call.meta
                    async for chunk in r.aiter_text():
                        await send({"type": "http.response.body", "body": chunk.encode(), "more_body": True})
                        buffer += chunk
                        while "\n" in buffer:
                            line, buffer = buffer.split("\n", 1)
                            _fold_sse_line(line.strip(), call.message, meta)
                        if meta.get("finish_reason") or meta.get("done"):
                            call.answering = False  # whole: a client that hangs up now (at [DONE]) has it all
                        if meta.get("done"):
                            break  # nothing follows [DONE]; an upstream slow to close must not hold the call
                    _fold_sse_line(buffer.strip(), call.message, meta)
                    call.answering = False
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    payload = call.streamed()
                    if r.status_code >= 400:
                        payload = {"error": meta.get("error") or buffer[:2000], "status": r.status_code}
                    # streamed as not: a 5xx, or an error event the upstream sent in the stream
                    await respond(payload, r.status_code >= 500 or (r.status_code < 400 and "error" in meta))
        except httpx2.HTTPError as e:
            msg = self._redact(f"upstream {self.shown} failed: {type(e).__name__}: {e}")
            call.answering = False
            await respond({"error": msg, "status": 502}, True)
            error = {"error": {"message": msg, "type": "upstream_error"}}
            if not call.began:  # streamed or not, the client has had nothing yet: the same 502
                await _json(send, 502, error)
            else:  # mid-stream: a last event says why it stops, then the stream ends cleanly
                lead = "\n\n" if buffer else ""  # ends an event the upstream left half sent
                event = f"{lead}data: {json.dumps(error)}\n\n".encode()
                await send({"type": "http.response.body", "body": event, "more_body": False})


class _Call:
    """One chat request on its way through the proxy, as its forwarding and its disconnect watcher see it."""

    def __init__(self) -> None:
        self.began = False  # the upstream's answer has begun (its status line came)
        self.answering = True  # False once the answer is whole: a disconnect after that is the client's goodbye
        self.recorded = False  # its model_response is recorded
        self.message: dict[str, Any] = {"role": "assistant", "content": None}  # a streamed answer so far
        self.meta: dict[str, Any] = {}  # the rest of a streamed answer: finish reason, usage, ids, an error

    def streamed(self) -> dict[str, Any]:
        """The model_response payload of the streamed answer as assembled."""
        meta = self.meta
        payload = {"message": self.message, "finish_reason": meta.get("finish_reason"), "usage": meta.get("usage"),
                   "model": meta.get("model"), "id": meta.get("id"), "streamed": True}
        if "error" in meta:  # an error event in a 2xx stream: its calls were not made (clients drop the turn)
            payload["error"] = meta["error"]
        for key in ("logprobs", "completion_token_ids", "prompt_token_ids"):
            if meta.get(key):
                payload[key] = meta[key]
        return payload


def _bad_upstream(why: str, raw: bytes) -> dict[str, Any]:
    return {"error": {"message": f"the upstream's answer is not a chat completion: {why}", "type": "upstream_error",
                      "raw": capped(raw)}}


def _fold_sse_line(line: str, message: dict[str, Any], meta: dict[str, Any]) -> None:
    if not line.startswith("data:"):
        return
    data = line[5:].strip()
    if data == "[DONE]":
        meta["done"] = True
    if not data or data == "[DONE]":
        return
    try:
        event = json.loads(data)
    except json.JSONDecodeError:
        return
    if not isinstance(event, dict):  # not a chunk: the client gets it as it came; nothing to fold
        return
    if "error" in event:
        meta["error"] = event["error"]
    for key in ("id", "model"):
        if event.get(key):
            meta[key] = event[key]
    if event.get("usage"):
        meta["usage"] = event["usage"]
    if event.get("prompt_token_ids"):
        meta["prompt_token_ids"] = event["prompt_token_ids"]
    choices = event.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict):
            _merge_delta(message, delta)
        if choice.get("finish_reason"):
            meta["finish_reason"] = choice["finish_reason"]
        lp = choice.get("logprobs")
        lp = lp.get("content") if isinstance(lp, dict) else None
        if isinstance(lp, list) and lp:
            meta.setdefault("logprobs", {"content": []})["content"].extend(lp)
        if isinstance(choice.get("token_ids"), list):
            meta.setdefault("completion_token_ids", []).extend(choice["token_ids"])


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
        sock.bind(uds)
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


async def run_proxy(*, upstream: str, upstream_key: str | None, host: str, port: int, token: str | None,
                    task: Task | None, run_id: str | None, db: Path,
                    on_ready: Callable[[str, str, str], None] | None = None) -> None:
    """`clawsdk proxy`: record every call through this proxy as one rollout until interrupted."""
    from clawsdk.errors import FailureKind
    from clawsdk.runtime.ids import new_run_id, rollout_id
    from clawsdk.runtime.recorder import Recorder
    from clawsdk.store.store import Store
    from clawsdk.store.writer import StoreWriter
    from clawsdk.tasks.model import Task

    proxy = ModelProxy(upstream, upstream_key)  # a bad upstream fails here, before the store is touched
    task = task or Task(id="proxy", instruction="(model calls recorded by clawsdk proxy; no task)")
    run_id = run_id or "proxy-" + new_run_id()
    rid: str | None = None
    started = time.perf_counter()

    def claim() -> tuple[int, str]:  # never a row another proxy on the same run id holds (Store.claim_rollout)
        with Store(db) as store:
            return store.claim_rollout(run_id=run_id, task_id=task.id, task_hash=task.hash, agent="proxy",
                                       model=None, make_id=lambda sample: rollout_id(run_id, task.id, sample))

    async with StoreWriter(db) as writer:
        await writer.put("upsert_run", run_id=run_id, status="running", agent="proxy", sandbox=None, samples=None,
                         config={"proxy": True, "upstream": public_url(upstream)})
        await writer.put("upsert_task", task=task)
        await writer.flush()  # the run and the task are in before the rollout claims its row beside them
        _, rid = await anyio.to_thread.run_sync(claim)
        recorder = Recorder(writer, rid, 0)
        tok = proxy.register(recorder, token)
        try:
            with anyio.open_signal_receiver(2, 15) as signals:
                async with serving(proxy, host, port) as url, anyio.create_task_group() as tg:
                    if on_ready is not None:
                        on_ready(url + "/v1", tok, rid)

                    async def stop_on_store_failure() -> None:  # calls nobody records must not go on
                        await writer.failed.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(stop_on_store_failure)
                    async for _ in signals:
                        break
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await writer.put("finish_rollout", rollout_id=rid, attempt=0, status="finished",
                                 failure_kind=FailureKind.OK.value, scored=False, reward=None, passed=None,
                                 error=None, n_tool_calls=0, n_model_calls=recorder.n_model_calls,
                                 duration_s=time.perf_counter() - started)
                await writer.put("end_run", run_id=run_id, status="finished")  # unless another proxy records
    if writer.error is not None:  # its ending was dropped with the rest: end it on a connection of its own
        from clawsdk.errors import StoreError

        reason = f"the store refused a write ({type(writer.error).__name__}: {writer.error})"
        with Store(db) as store, store.transaction():
            store.settle_run(run_id, [rid] if rid else [], "failed", reason)
        raise StoreError(f"{reason}; the proxy stopped, as nothing more could be recorded in {db}")
