"""The recording proxy on loopback, sent bodies of the wrong shape and fed upstream answers of the wrong shape:
a 400 (or 502) with the reason, the call recorded where there was one, and never a traceback in its log."""

from __future__ import annotations

import json
import logging

import anyio
import httpx2
import pytest

from clawsdk.mcp.proxy import ModelProxy, serving
from clawsdk.runtime.recorder import Recorder
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
]


def test_bodies_of_the_wrong_shape_are_400_with_the_reason_and_never_reach_the_upstream(caplog):
    caplog.set_level(logging.INFO)
    upstream = Upstream()
    answers, recorder = exchange(upstream, [(raw, None) for raw, _ in BAD_REQUESTS]
                                 + [(b"[1, 2]", "wrong-token"), (json.dumps({"messages": HI}).encode(), None)])
    for (raw, why), r in zip(BAD_REQUESTS, answers):
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
    [r], recorder = exchange(upstream, [(raw, None)])
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hello", r.text
    assert upstream.calls == 1
    no_traceback(caplog)
