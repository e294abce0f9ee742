"""A real OpenAI-compatible HTTP server on 127.0.0.1 that serves scripted chat completions."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from clawsdk.tasks.model import Limits, Task, VerifierSpec


def completion(content: str | None = None, tool_calls: list[dict] | None = None, *,
               finish_reason: str = "stop", logprobs: list[float] | None = None, token_ids: list[int] | None = None,
               usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """A scripted chat.completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": c["name"],
                          "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])}}
            for i, c in enumerate(tool_calls)]
        finish_reason = "tool_calls"
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish_reason}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": "t", "logprob": lp} for lp in logprobs]}
    if token_ids is not None:
        choice["token_ids"] = token_ids
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "stub", "choices": [choice],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


class Reply:
    """One scripted answer: a completion body, or an HTTP error, or a hang."""

    def __init__(self, body: Any = None, status: int = 200, hang: bool = False, headers: dict | None = None,
                 delay: float = 0.0):
        self.body, self.status, self.hang, self.headers = body, status, hang, headers or {}
        self.delay = delay  # a slow server


#: how servers say a request does not fit the context window (HTTP 400): what each one writes
OVERFLOW_STYLES = {
    "vllm": lambda w, p, c: {"object": "error", "type": "BadRequestError", "code": 400, "message": (
        f"This model's maximum context length is {w} tokens. However, you requested {p + c} tokens "
        f"({p} in the messages, {c} in the completion). Please reduce the length of the messages or completion.")},
    "vllm-input": lambda w, p, c: {"error": {"type": "BadRequestError", "code": 400, "message": (
        f"This model's maximum context length is {w} tokens. However, your request has {p} input tokens. "
        "Please reduce the length of the input messages.")}},
    "vllm-v1": lambda w, p, c: {"error": {"type": "BadRequestError", "code": 400, "message": (
        f"Prompt length of {p} is longer than the maximum model length of {w}.")}},
    "openai": lambda w, p, c: {"error": {"type": "invalid_request_error", "code": "context_length_exceeded",
                                         "param": "messages", "message": (
        f"This model's maximum context length is {w} tokens. However, your messages resulted in {p} tokens "
        "(including 90 in the functions). Please reduce the length of the messages or functions.")}},
    "llama.cpp": lambda w, p, c: {"error": {"code": 400, "type": "exceed_context_size_error", "n_ctx": w,
                                            "n_prompt_tokens": p,
                                            "message": "the request exceeds the available context size, try increasing it"}},
    "sglang": lambda w, p, c: {"object": "error", "code": 400, "message": (
        f"The input ({p} tokens) is longer than the model's context length ({w} tokens).")},
    "bare": lambda w, p, c: {"error": {"code": "context_length_exceeded",
                                       "message": "Your input exceeds the context window of this model."}},
}
#: vLLM when only max_tokens is too much
def MAX_TOKENS_TOO_LARGE(w: int, p: int, c: int) -> dict:
    return {"error": {"type": "BadRequestError", "code": 400, "message": (
        f"'max_tokens' or 'max_completion_tokens' is too large: {c}. This model's maximum context length is {w} "
        f"tokens and your request has {p} input tokens ({c} > {w} - {p}).")}}


def prompt_tokens(body: dict) -> int:
    """The stub's token count: 4 characters of message text a token."""
    return sum(len(str(m.get("content") or "")) for m in body.get("messages") or []) // 4


class StubServer:
    """Answers POST /v1/chat/completions from a script; records every request it got.

    With `window` set, a request whose messages and max_tokens do not fit `window` tokens is
    answered HTTP 400 in the words of `overflow_style` (OVERFLOW_STYLES), as a server with that
    max_model_len would, and takes nothing from the script."""

    def __init__(self) -> None:
        self.script: list[Reply | dict] = []
        self.default: Reply | dict | None = None
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self.entered = threading.Event()
        self.window: int | None = None
        self.overflow_style = "vllm"
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub.lock:
                    stub.requests.append(body)
                    stub.headers.append(dict(self.headers))
                    reply = stub.overflow(body)
                    if reply is None:
                        reply = stub.script.pop(0) if stub.script else stub.default
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                    self.counted_out = False
                try:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        self._send(404, {"error": {"message": f"no route {self.path}"}})
                        return
                    if reply is None:
                        self._send(500, {"error": {"message": "script exhausted"}})
                        return
                    if isinstance(reply, dict):
                        reply = Reply(reply)
                    if reply.hang:
                        stub.entered.set()
                        stub.release.wait(30)
                        return
                    if reply.delay:
                        stub.release.wait(reply.delay)
                    self._left()  # before the answer goes: the client may send its next request at once
                    self._send(reply.status, reply.body, reply.headers)
                finally:
                    self._left()

            def _left(self) -> None:
                with stub.lock:
                    if not self.counted_out:
                        self.counted_out = True
                        stub.in_flight -= 1

            def _send(self, status: int, body: Any, headers: dict | None = None) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()  # bytes: sent as they are
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def overflow(self, body: dict) -> Reply | None:
        if not self.window:
            return None
        p, c = prompt_tokens(body), int(body.get("max_tokens") or 0)
        if p >= self.window or (p + c > self.window and self.overflow_style == "vllm"):
            return Reply(OVERFLOW_STYLES[self.overflow_style](self.window, p, c), 400)
        if p + c > self.window:
            return Reply(MAX_TOKENS_TOO_LARGE(self.window, p, c), 400)
        return None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> StubServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub_server():
    server = StubServer().start()
    yield server
    server.stop()


def write_task(**overrides: Any) -> Task:
    """A tiny native task: write the greeting to hello.txt."""
    spec = dict(
        id="hello-file",
        instruction="Write the text 'hello world' into hello.txt.",
        category="content & domain",
        tools=["core"],
        verifier=VerifierSpec(checks=[{"type": "text_equals", "path": "hello.txt", "text": "hello world"}]),
        limits=Limits(timeout_s=30, tool_timeout_s=10, verifier_timeout_s=20),
    )
    spec.update(overrides)
    return Task(**spec)
