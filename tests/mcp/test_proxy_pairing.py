"""Each recorded model_response names the request it answers: a black-box agent may have calls in flight at once
(a side call for a title while the main turn runs), and the answers land in the order they finish."""

from __future__ import annotations

import json

import anyio
import httpx2

from clawsdk.proxy import ModelProxy, serving
from clawsdk.store.recorder import Recorder
from tests.asgi import request_body


class SlowFirst:
    """Answers a request whose last message says "slow" after 1 s, any other at once, echoing it back."""

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None:
            return
        said = json.loads(body)["messages"][-1]["content"]
        if said == "slow":
            await anyio.sleep(1)
        answer = {"id": "c", "object": "chat.completion", "model": "m",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": f"re: {said}"},
                               "finish_reason": "stop"}]}
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


def test_answers_that_land_out_of_order_name_the_requests_they_answer():
    recorder = Recorder(None, "r", keep=True)

    async def main():
        async with serving(SlowFirst()) as up:
            proxy = ModelProxy(up + "/v1")
            token = proxy.register(recorder)
            async with serving(proxy) as url, httpx2.AsyncClient(timeout=30) as http:

                async def ask(what: str) -> None:
                    r = await http.post(url + "/v1/chat/completions", headers={"authorization": f"Bearer {token}"},
                                        json={"model": "m", "messages": [{"role": "user", "content": what}]})
                    assert r.status_code == 200

                async with anyio.create_task_group() as tg:
                    tg.start_soon(ask, "slow")
                    await anyio.sleep(0.3)
                    tg.start_soon(ask, "fast")

    anyio.run(main)
    events = {e["seq"]: e for e in recorder.kept}
    responses = [e["payload"] for e in recorder.kept if e["kind"] == "model_response"]
    assert [r["message"]["content"] for r in responses] == ["re: fast", "re: slow"]  # the order they finished
    for r in responses:
        asked = events[r["request"]]
        assert asked["kind"] == "model_request"
        assert r["message"]["content"] == "re: " + asked["payload"]["messages"][-1]["content"]
