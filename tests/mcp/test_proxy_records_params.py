"""Every field of a chat request that goes upstream is recorded: the proxy forwarded `chat_template`,
`continue_final_message` or `logit_bias` and recorded only `model` and `temperature`, so the store (and the
training data made from it) said the model was asked less than it was (found by a read-only audit)."""

from __future__ import annotations

import json

import anyio
import httpx2

from clawsdk.store.recorder import Recorder
from tests.asgi import request_body
from tests.mcp.test_proxy_disconnect import proxied

EXTRA = {"chat_template": "{{ messages[0].content }}", "chat_template_kwargs": {"enable_thinking": False},
         "logit_bias": {"50256": -100}, "presence_penalty": 0.5, "continue_final_message": True,
         "add_generation_prompt": False, "temperature": 0.2}


class Echo:
    """Answers at once, and keeps what it was sent."""

    def __init__(self) -> None:
        self.got: list[dict] = []

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None:
            return
        self.got.append(json.loads(body))
        answer = {"id": "c", "object": "chat.completion", "model": "m",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


def test_every_forwarded_field_of_a_request_is_recorded():
    recorder, upstream = Recorder(None, "r", keep=True), Echo()
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure, the answer is"}]

    async def main():
        async with proxied(upstream, recorder) as (_, url, token), httpx2.AsyncClient(timeout=30) as http:
            r = await http.post(url + "/v1/chat/completions", headers={"authorization": f"Bearer {token}"},
                                json={"model": "m", "messages": messages, **EXTRA})
            assert r.status_code == 200

    anyio.run(main)
    (sent,) = upstream.got
    (request,) = [e["payload"] for e in recorder.kept if e["kind"] == "model_request"]
    assert request["messages"] == messages
    assert request["params"] == {k: v for k, v in sent.items() if k not in ("messages", "tools")}
    assert request["params"] == {"model": "m", **EXTRA}
