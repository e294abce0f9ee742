"""The recording proxy on loopback, sent bodies of the wrong shape and fed upstream answers of the wrong shape:
a 400 (or 502) with the reason, the call recorded where there was one, and never a traceback in its log."""

from __future__ import annotations

import json
import logging

import anyio
import httpx2
import pytest

from clawsdk._http import public_url
from clawsdk.proxy import ModelProxy, serving
from clawsdk.proxy import core as proxy_module
from clawsdk.store.recorder import Recorder
from tests.asgi import request_body

HI = [{"role": "user", "content": "hi"}]
GOOD = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


class Upstream:
    """An OpenAI-compatible upstream answering one fixed body (bytes as they are), or SSE lines when streamed."""

    def __init__(self, body: bytes = json.dumps(GOOD).encode(), sse: list[str] | None = None):
        self.body, self.sse, self.calls = body, sse or [], 0

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None:
            return
        self.calls += 1
        streamed = bool(self.sse)
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream" if streamed else b"application/json")]})
        data = "".join(f"data: {line}\n\n" for line in self.sse).encode() if streamed else self.body
        await send({"type": "http.response.body", "body": data})


def exchange(upstream: Upstream, requests: list[tuple[bytes, str | None]]) -> tuple[list[httpx2.Response], Recorder]:
    """Send each (raw body, token) to a proxy in front of `upstream`; token None means the right one."""
    recorder = Recorder(None, "r-proxy")

    async def go():
        with anyio.fail_after(30):
            async with serving(upstream) as up_url:
                proxy = ModelProxy(up_url + "/v1")
                token = proxy.register(recorder)
                async with serving(proxy) as url, httpx2.AsyncClient(timeout=10) as client:
                    return [await client.post(f"{url}/v1/chat/completions", content=raw,
                                              headers={"authorization": f"Bearer {tok or token}",
                                                       "content-type": "application/json"})
                            for raw, tok in requests]

    return anyio.run(go), recorder


def no_traceback(caplog) -> None:
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert "Traceback" not in caplog.text and "Exception in ASGI" not in caplog.text, caplog.text


BAD_REQUESTS = [
    (b"[1, 2]", "must be a JSON object with `messages`, not a list"),
    (b'"just a string"', "must be a JSON object with `messages`, not a string"),
    (b"null", "not null"),
    (b"42", "not int"),
    (b"{}", "`messages` must be a non-empty list of {role, content} objects, got missing"),
    (b'{"messages": "hi"}', "`messages` must be a non-empty list of {role, content} objects, got a string"),
    (b'{"messages": []}', "got an empty list"),
    (b'{"messages": [1]}', "messages[0] must be an object with a string `role`, got int"),
    (b'{"messages": [{"content": "x"}]}', "messages[0].role must be a string, got null"),
    (json.dumps({"messages": HI, "tools": "all"}).encode(), "`tools` must be a list of tool objects"),
    (json.dumps({"messages": HI, "tools": [1]}).encode(), "`tools` must be a list of tool objects"),
    (json.dumps({"messages": HI, "stream": "yes"}).encode(), "`stream` must be a boolean, got a string"),
    (json.dumps({"messages": HI, "model": 7}).encode(), "`model` must be a string, got int"),
    (b"{not json", "the request body is not JSON"),
    (b"\xff\xfe\x00garbage", "the request body is not JSON"),
    (b"[" * 100000, "the request body is nested too deeply"),  # was a 500 with a RecursionError traceback
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "NaN is not a JSON value"),
]


def test_bodies_of_the_wrong_shape_are_400_with_the_reason_and_never_reach_the_upstream(caplog):
    caplog.set_level(logging.INFO)
    upstream = Upstream()
    answers, recorder = exchange(upstream, [(raw, None) for raw, _ in BAD_REQUESTS]
                                 + [(b"[1, 2]", "wrong-token"), (json.dumps({"messages": HI}).encode(), None)])
    for (raw, why), r in zip(BAD_REQUESTS, answers[:-2], strict=True):  # the last two are checked below
        assert r.status_code == 400, (raw, r.text)
        error = r.json()["error"]
        assert why in error["message"] and error["type"] == "invalid_request_error", (raw, error)
    assert answers[-2].status_code == 401  # the token is checked before the body is read
    assert answers[-1].status_code == 200 and answers[-1].json()["choices"][0]["message"]["content"] == "hello"
    assert upstream.calls == 1  # only the good one was forwarded
    assert [e["kind"] for e in recorder.transcript()] == ["model_request", "model_response"]
    no_traceback(caplog)


@pytest.mark.parametrize("body,why", [
    (b'{"choices": "nope"}', "choices: expected a list, got a string"),
    (b'{"choices": [{"message": {"content": 5}}]}', "choices[0].message.content: expected a string or null"),
    (b"[1, 2, 3]", "the answer: expected a JSON object, got a list"),
    (b"<html>oops</html>", "the body is not JSON"),
])
def test_an_upstream_answer_of_the_wrong_shape_is_a_recorded_502_with_the_raw_answer(caplog, body, why):
    caplog.set_level(logging.INFO)
    [r], recorder = exchange(Upstream(body), [(json.dumps({"messages": HI}).encode(), None)])
    assert r.status_code == 502 and why in r.json()["error"]["message"], r.text
    [request, response] = recorder.transcript()
    assert request["kind"] == "model_request" and response["kind"] == "model_response"
    assert response["payload"]["status"] == 502
    assert response["payload"]["error"]["error"]["raw"] == body.decode()
    no_traceback(caplog)


def test_streamed_chunks_of_the_wrong_shape_pass_through_and_are_folded_where_they_can_be(caplog):
    caplog.set_level(logging.INFO)
    sse = ["[1, 2]", '"text"', '{"choices": "x"}', '{"choices": [{"delta": "x"}, 3]}',
           '{"choices": [{"delta": {"content": 5, "tool_calls": [1, {"index": 10000000}, {"function": "f"}]}}]}',
           '{"choices": [{"delta": {"content": "fine"}, "logprobs": "lp", "token_ids": "t"}]}', "[DONE]"]
    [r], recorder = exchange(Upstream(sse=sse), [(json.dumps({"messages": HI, "stream": True}).encode(), None)])
    assert r.status_code == 200 and "data: [1, 2]" in r.text  # the client gets what the upstream sent
    response = recorder.transcript()[-1]["payload"]
    assert response["streamed"] and response["message"]["content"] == "fine"
    no_traceback(caplog)


def test_a_lone_surrogate_escape_in_the_body_goes_upstream_as_it_came(caplog):
    """JSON may escape a lone surrogate ("\\udcff"); loaded, no UTF-8 encoder takes it. The proxy re-encoded
    the body with httpx's UTF-8 JSON and answered the agent's own request with a 500 and a traceback."""
    upstream = Upstream()
    raw = b'{"model": "m", "messages": [{"role": "user", "content": "ls: n\\udcffm.txt"}]}'
    [r], _recorder = exchange(upstream, [(raw, None)])
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hello", r.text
    assert upstream.calls == 1
    no_traceback(caplog)


def test_a_body_over_the_limit_is_413_and_is_neither_read_on_nor_forwarded(caplog, monkeypatch):
    """A 200 MB body took the proxy to 1.4 GB of memory, then went upstream and into the store."""
    monkeypatch.setattr(proxy_module, "MAX_REQUEST_BODY", 1024 * 1024, raising=False)
    upstream = Upstream()
    big = json.dumps({"messages": HI, "pad": "x" * (8 * 1024 * 1024)}).encode()
    answers, recorder = exchange(upstream, [(big, None), (json.dumps({"messages": HI}).encode(), None)])
    assert answers[0].status_code == 413, answers[0].text[:200]
    assert answers[0].json()["error"]["message"] == "the request body is over 1048576 bytes"
    assert answers[1].status_code == 200  # the next request (a new connection) is served as ever
    assert upstream.calls == 1
    assert [e["kind"] for e in recorder.transcript()] == ["model_request", "model_response"]
    no_traceback(caplog)


class DiesMidStream:
    """An upstream on a raw socket: a streamed answer's headers and first chunk, half an event, then it hangs
    up (a crashed vLLM)."""

    async def serve(self, task_status=anyio.TASK_STATUS_IGNORED):
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started(f"http://127.0.0.1:{port}/v1")

        async def handle(conn):
            async with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += await conn.receive()
                first = b'data: {"choices": [{"index": 0, "delta": {"content": "par"}}]}\n\ndata: {"cho'
                head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\n\r\n")
                await conn.send(head + b"%x\r\n" % len(first) + first + b"\r\n")
                await anyio.sleep(0.2)  # then gone, without the last chunk

        await listener.serve(handle)


def _stream(upstream_url: str) -> tuple[httpx2.Response, Recorder]:
    recorder = Recorder(None, "r-stream")

    async def go():
        with anyio.fail_after(30):
            proxy = ModelProxy(upstream_url)
            token = proxy.register(recorder)
            async with serving(proxy) as url, httpx2.AsyncClient(timeout=10) as client:
                return await client.post(f"{url}/v1/chat/completions", json={"messages": HI, "stream": True},
                                         headers={"authorization": f"Bearer {token}"})

    return anyio.run(go), recorder


def test_a_streamed_request_to_a_dead_upstream_gets_the_same_502_as_an_unstreamed_one(caplog):
    r, recorder = _stream("http://127.0.0.1:9/v1")  # nothing listens on the discard port
    assert r.status_code == 502, r.text  # was a bare 500: no response had been started
    error = r.json()["error"]
    assert error["type"] == "upstream_error" and "failed: ConnectError" in error["message"]
    assert recorder.transcript()[-1]["payload"]["status"] == 502
    no_traceback(caplog)


def test_a_stream_the_upstream_breaks_off_ends_with_an_error_event(caplog):
    async def go():
        async with anyio.create_task_group() as tg:
            up = DiesMidStream()
            url = await tg.start(up.serve)
            result = await anyio.to_thread.run_sync(_stream, url)
            tg.cancel_scope.cancel()
            return result

    r, recorder = anyio.run(go)
    assert r.status_code == 200 and r.text.startswith('data: {"choices"'), r.text
    last = [line for line in r.text.split("\n") if line.startswith("data: ")][-1]
    error = json.loads(last[len("data: "):])["error"]
    assert error["type"] == "upstream_error" and "failed" in error["message"], r.text
    assert recorder.transcript()[-1]["payload"]["status"] == 502
    no_traceback(caplog)


def test_credentials_in_the_upstream_url_reach_neither_the_client_nor_the_record(caplog):
    assert public_url("http://user:PW@example.com:8000/v1/?key=K#f") == "http://example.com:8000/v1"
    assert public_url("https://[::1]/v1") == "https://[::1]/v1"
    r, recorder = _stream("http://user:SECRETPW@127.0.0.1:9/v1?key=QSECRET")
    seen = r.text + json.dumps([e.payload() for e in recorder.transcript()]) + caplog.text
    assert r.status_code == 502 and "http://127.0.0.1:9/v1" in r.text, r.text
    assert "SECRETPW" not in seen and "QSECRET" not in seen and "user" not in r.text, seen
