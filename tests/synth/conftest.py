"""A real OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TOKEN = "test-token-synth"


class ScriptedServer:
    """Answers /v1/chat/completions with responder(messages) -> text (or an int: that HTTP status)."""

    def __init__(self, responder: Callable[[list[dict]], str | int]):
        self.responder = responder
        self.token = TOKEN
        self.requests: list[list[dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.send_response(401)
                    self.end_headers()
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body["messages"])
                answer = server.responder(body["messages"])
                if isinstance(answer, int):
                    self.send_response(answer)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "scripted failure"}}')
                    return
                payload = json.dumps({
                    "id": "cmpl-1", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": answer}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def count(self, needle: str) -> int:
        return sum(any(needle in (m.get("content") or "") for m in msgs) for msgs in self.requests)


@pytest.fixture
def scripted_server() -> Iterator[Callable[[Callable], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(responder):
        s = ScriptedServer(responder)
        s.thread.start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.httpd.shutdown()
        s.httpd.server_close()
