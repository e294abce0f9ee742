"""A client that hangs up on the recording proxy mid-answer, and a call still open when the proxy stops.

Before: the proxy read the upstream's answer to the end after the client had gone, and its shutdown
waited on that call. A harness whose command had finished (exit 0) sat behind a long generation until
its task's time ran out and was scored `agent_timeout`.
"""

from __future__ import annotations

import contextlib
import json
import textwrap

import anyio
import httpx2
from clawsdk_plugins.agents.harness import HarnessAgent

from clawsdk.proxy import SHUTDOWN_GRACE_S, ModelProxy, serving
from clawsdk.runtime.runner import run
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from tests.asgi import answered_models, request_body
from tests.conftest import make_task


class SlowStream:
    """Streams one token every 0.1 s, `n` of them (30 s by default): a long generation."""

    def __init__(self, n: int = 300):
        self.n, self.sent = n, 0

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None or await answered_models(scope, send):
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(self.n):
            chunk = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": f"tok{i} "}}]}
            await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(),
                        "more_body": True})
            self.sent += 1
            await anyio.sleep(0.1)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


@contextlib.asynccontextmanager
async def proxied(upstream, recorder, **options):
    """The recording proxy in front of `upstream`, recording to `recorder`: (proxy, its URL, the token)."""
    async with serving(upstream) as up:
        proxy = ModelProxy(up + "/v1", **options)
        token = proxy.register(recorder)
        async with serving(proxy) as url:
            yield proxy, url, token


def chat(token: str, stream: bool = True) -> dict:
    return {"headers": {"authorization": f"Bearer {token}"},
            "json": {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}}


def stream_while_the_proxy_stops(upstream) -> Recorder:
    """A client keeps reading a stream (a process the agent left behind) while the proxy stops under it."""
    recorder = Recorder(None, "r", keep=True)

    async def main():
        with anyio.fail_after(SHUTDOWN_GRACE_S + 30):  # a hang is a failure, whatever the machine's speed
            async with anyio.create_task_group() as tg:
                async with proxied(upstream, recorder) as (_, url, token):
                    reading = anyio.Event()

                    async def client() -> None:
                        with contextlib.suppress(httpx2.RemoteProtocolError):  # the proxy cuts the stream
                            async with httpx2.AsyncClient(timeout=None) as http, \
                                    http.stream("POST", url + "/v1/chat/completions", **chat(token)) as r:
                                async for _ in r.aiter_lines():
                                    reading.set()

                    tg.start_soon(client)
                    await reading.wait()
                tg.cancel_scope.cancel()  # the proxy is down; the client's stream is cut

    anyio.run(main)
    return recorder


# asks for a streamed answer, reads its first line, writes the deliverable and exits 0 without reading on
HANG_UP = textwrap.dedent('''
    import os, urllib.request
    body = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                          "Content-Type": "application/json"})
    print(urllib.request.urlopen(req).readline().decode().strip())
    open("done.txt", "w").write("done\\n")
''')


def test_a_harness_that_hangs_up_mid_stream_and_exits_is_scored_not_timed_out(tmp_path, db):
    (tmp_path / "client.py").write_text(HANG_UP)
    task = load_task(make_task(tmp_path, "hang", extra={"limits": {"timeout_s": 15}}))
    upstream = SlowStream()

    async def main():
        async with serving(upstream) as url:
            agent = HarnessAgent(command=f"python3 {tmp_path / 'client.py'}", base_url=url + "/v1")
            return await run([task], agent=agent, db=db, run_id="hang", sandbox="local", retries=0)

    (outcome,) = anyio.run(main).outcomes
    assert (outcome.kind.value, outcome.reward) == ("ok", 1.0), outcome.error
    assert upstream.sent < upstream.n  # the upstream call was stopped, not read to its end
    with Store(db) as store:
        events = store.events(outcome.rollout_id)
    (response,) = [e["payload"] for e in events if e["kind"] == "model_response"]
    assert response["abandoned"] and response["status"] == 499
    assert response["partial"]["content"].startswith("tok0 ")


def test_a_call_still_open_when_the_proxy_stops_is_cancelled_after_the_grace_and_recorded():
    """A process the agent left behind keeps a stream open: the proxy's exit does not wait for it to end."""
    recorder = stream_while_the_proxy_stops(SlowStream(n=100_000))  # hours
    kinds = [e["kind"] for e in recorder.kept]
    assert kinds == ["model_request", "model_response"]
    assert recorder.kept[1]["payload"]["abandoned"]


class DoneThenLinger:
    """Streams an answer to its end ([DONE]), then keeps the connection open a while before closing it."""

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None or await answered_models(scope, send):
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for delta, finish in (({"role": "assistant", "content": "all of it"}, None), ({}, "stop")):
            chunk = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(),
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
        await anyio.sleep(2)
        self.closed_at = anyio.current_time()
        await send({"type": "http.response.body", "body": b""})


def test_a_client_that_hangs_up_at_done_has_a_whole_answer_recorded_not_an_abandoned_one():
    """SSE clients stop reading at [DONE] and may close at once, before the upstream ends its stream."""
    recorder = Recorder(None, "r", keep=True)

    async def main():
        async with proxied(DoneThenLinger(), recorder) as (_, url, token), httpx2.AsyncClient(timeout=30) as http:
            async with http.stream("POST", url + "/v1/chat/completions", **chat(token)) as r:
                async for line in r.aiter_lines():
                    if line == "data: [DONE]":
                        break
            # the connection is closed here, with the upstream's stream still open
            await anyio.sleep(3)

    anyio.run(main)
    (response,) = [e["payload"] for e in recorder.kept if e["kind"] == "model_response"]
    assert "abandoned" not in response
    assert (response["message"]["content"], response["finish_reason"]) == ("all of it", "stop")


def test_the_proxy_ends_the_answer_at_done_without_waiting_for_the_upstream_to_close():
    recorder = Recorder(None, "r", keep=True)
    upstream = DoneThenLinger()

    async def main():
        async with proxied(upstream, recorder) as (_, url, token), httpx2.AsyncClient(timeout=30) as http:
            async with http.stream("POST", url + "/v1/chat/completions", **chat(token)) as r:
                lines = [line async for line in r.aiter_lines() if line]
            ended = anyio.current_time()  # the proxy closed the stream
            await anyio.sleep(2.5)
            return lines, ended

    lines, ended = anyio.run(main)
    assert lines[-1] == "data: [DONE]" and ended < upstream.closed_at
    (response,) = [e["payload"] for e in recorder.kept if e["kind"] == "model_response"]
    assert response["message"]["content"] == "all of it"


class Hung:
    """Never answers (a model server that hangs)."""

    async def __call__(self, scope, receive, send):
        if await request_body(scope, receive, send) is None:
            return
        await anyio.sleep(3600)


def test_a_client_that_gives_up_on_a_stream_that_never_began_leaves_the_failure_the_model_servers():
    """The client timed out waiting for a stream's status line, which a serving model server sends at once: the
    server hung (last_failed), so an agent that then exits non-zero is unscored, not scored 0 for the outage.
    A non-streamed answer comes whole, so a client giving up on one says nothing of the server: the last
    call's failure stands, either way."""
    recorder = Recorder(None, "r", keep=True)

    async def main():
        async with proxied(Hung(), recorder, hung_after_s=0.5) as (proxy, url, token), \
                httpx2.AsyncClient(timeout=1) as http:
            seen = []
            for stream, before in ((True, False), (False, False), (False, True)):
                proxy.last_failed = before
                try:
                    await http.post(url + "/v1/chat/completions", **chat(token, stream))
                except httpx2.TimeoutException:
                    pass
                with anyio.fail_after(10):
                    while sum(e["kind"] == "model_response" for e in recorder.kept) < len(seen) + 1:
                        await anyio.sleep(0.05)
                seen.append(proxy.last_failed)
            return seen

    assert anyio.run(main) == [True, False, True]
    responses = [e["payload"] for e in recorder.kept if e["kind"] == "model_response"]
    assert [r["abandoned"] for r in responses] == [True] * 3 and not any("partial" in r for r in responses)


class SlowButHealthy:
    """Answers every request, after a second (streamed or not)."""

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None or await answered_models(scope, send):
            return
        await anyio.sleep(1.0)
        answer = {"id": "c", "object": "chat.completion", "model": "m",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


HANGS_UP = textwrap.dedent("""
    import os, sys, urllib.request
    body = b'{"model": "m", "stream": %s, "messages": [{"role": "user", "content": "hi"}]}'
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                          "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=0.05)
    except Exception as e:
        print("gave up:", e)
    import time; time.sleep(0.5)
    sys.exit(1)
""")


def test_a_harness_that_hangs_up_on_a_healthy_server_and_fails_is_scored(tmp_path):
    """A harness gave up on its request after 50 ms, on a server that answers in a second, and exited 1: the
    proxy counted the hang-up as the server's failure, and the rollout ended model_error, unscored, retried
    (found by a read-only audit). Its failure is its own: agent_error, scored."""
    task = load_task(make_task(tmp_path, "hangup"))
    for stream in ("false", "true"):
        (tmp_path / "client.py").write_text(HANGS_UP % stream)

        async def main(stream: str):
            async with serving(SlowButHealthy()) as up:
                agent = HarnessAgent(command=f"python3 {tmp_path / 'client.py'}", base_url=up + "/v1")
                return await run([task], agent=agent, db=tmp_path / f"{stream}.db", run_id="h", sandbox="local",
                                 retries=0)

        (o,) = anyio.run(main, stream).outcomes
        assert o.kind.value == "agent_error" and o.kind.scored, (stream, o)


class FinishNoDone:
    """Streams a whole answer (its finish reason) and then neither sends [DONE] nor closes."""

    async def __call__(self, scope, receive, send):
        if await request_body(scope, receive, send) is None:
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        chunk = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "whole"},
                                                       "finish_reason": "stop"}]}
        await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(), "more_body": True})
        await anyio.sleep(3600)


def test_a_whole_answer_whose_stream_never_ends_is_recorded_when_the_proxy_stops():
    recorder = stream_while_the_proxy_stops(FinishNoDone())
    (response,) = [e["payload"] for e in recorder.kept if e["kind"] == "model_response"]
    assert (response["message"]["content"], response["finish_reason"]) == ("whole", "stop")
