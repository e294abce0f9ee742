"""Whose failure a black-box agent's non-zero exit is: the model server's only when it failed the agent's last call.

Before: a streamed 5xx (OpenClaw always streams) was never counted, so an upstream outage was the agent's zero;
and any 5xx earlier in the rollout made the agent's own later crash unscored, one it could cause with a request
the upstream chokes on (NaN, which the proxy forwarded)."""

from __future__ import annotations

import json
import textwrap

import anyio
from clawsdk_plugins.agents.harness import HarnessAgent

from clawsdk.proxy import serving
from clawsdk.runtime.runner import run
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from tests.asgi import answered_models, request_body
from tests.conftest import make_task

COMPLETION = {"id": "c", "object": "chat.completion", "model": "m", "usage": {"prompt_tokens": 1, "completion_tokens": 1},
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}


class Upstream:
    """Answers each request with the next of `plan`: "ok", "503", "503-stream" (a streamed 503) or "500-nan" (500 for
    a body holding NaN, as a strict server does, else ok)."""

    def __init__(self, plan: list[str]):
        self.plan, self.bodies = list(plan), []

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None or await answered_models(scope, send):
            return
        self.bodies.append(body)
        what = self.plan.pop(0) if self.plan else "ok"
        status, data = 200, json.dumps(COMPLETION).encode()
        if what.startswith("503"):
            status, data = 503, b'{"error": {"message": "overloaded"}}'
        ctype = b"text/event-stream" if what == "503-stream" else b"application/json"
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype)]})
        await send({"type": "http.response.body", "body": data})


# calls the model once per argument (stream / nan / plain), then exits 1: the agent gives up
CLIENT = textwrap.dedent('''
    import json, os, sys, urllib.error, urllib.request
    for how in sys.argv[1:]:
        body = '{"model": "m", "messages": [{"role": "user", "content": "hi"}]' + {
            "stream": ', "stream": true}', "nan": ', "temperature": NaN}', "plain": "}"}[how]
        req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
                                     headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                              "Content-Type": "application/json"})
        try:
            print(how, urllib.request.urlopen(req).status)
        except urllib.error.HTTPError as e:
            print(how, e.code)
    sys.exit(1)
''')


def ending(tmp_path, db, plan: list[str], calls: str, run_id: str):
    (tmp_path / "client.py").write_text(CLIENT)
    task = load_task(make_task(tmp_path, run_id))
    upstream = Upstream(plan)

    async def main():
        async with serving(upstream) as url:
            agent = HarnessAgent(command=f"python3 {tmp_path / 'client.py'} {calls}", base_url=url + "/v1")
            return await run([task], agent=agent, db=db, run_id=run_id, sandbox="local", retries=0)

    (outcome,) = anyio.run(main).outcomes
    return outcome, upstream


def test_a_streamed_upstream_failure_on_the_last_call_is_the_model_servers(tmp_path, db):
    outcome, _ = ending(tmp_path, db, ["503-stream"], "stream", "s")
    assert outcome.kind.value == "model_error" and "failed its last call" in outcome.error


def test_a_glitch_the_agent_got_past_does_not_make_its_own_crash_unscored(tmp_path, db):
    outcome, _ = ending(tmp_path, db, ["503", "ok"], "plain plain", "g")
    assert outcome.kind.value == "agent_error" and outcome.reward == 0.0


def test_a_request_holding_nan_is_refused_by_the_proxy_not_forwarded(tmp_path, db):
    outcome, upstream = ending(tmp_path, db, [], "nan", "n")
    assert outcome.kind.value == "agent_error" and upstream.bodies == []  # the upstream never saw it
    with Store(db) as store:
        events = store.events(outcome.rollout_id)
    exec_ = next(e["payload"] for e in events if e["kind"] == "sandbox_exec")
    assert "nan 400" in exec_["stdout"]


def test_credentials_in_the_base_url_and_keys_reach_neither_the_store_nor_the_error(tmp_path, db):
    (tmp_path / "client.py").write_text(CLIENT)
    task = load_task(make_task(tmp_path, "c"))
    upstream = Upstream(["503"])

    async def main():
        async with serving(upstream) as url:
            base = url.replace("http://", "http://user:PWSECRET99@") + "/v1?api_key=QSECRET77"
            return await run([task], agent="harness", db=db, run_id="c", sandbox="local", retries=0,
                             agent_options={"command": f"python3 {tmp_path / 'client.py'} plain",
                                            "base_url": base})

    (outcome,) = anyio.run(main).outcomes
    assert outcome.kind.value == "model_error"
    with Store(db) as store:
        config = store.run("c")["config"]
        rows = [outcome.error, config, *[json.dumps(e["payload"]) for e in store.events(outcome.rollout_id)]]
    for secret in ("PWSECRET99", "QSECRET77"):
        assert not [r for r in rows if secret in r], secret


def test_the_runs_config_keeps_no_key_given_as_an_option():
    from clawsdk.runtime.runner import recorded

    assert recorded({"api_key": "sk-1", "token": "t", "max_tokens": 5, "tokenizer": "embedded",
                     "base_url": "http://u:pw@h:8000/v1?key=k"}) == {
        "api_key": "***", "token": "***", "max_tokens": 5, "tokenizer": "embedded", "base_url": "http://h:8000/v1"}
