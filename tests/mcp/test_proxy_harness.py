"""`clawsdk proxy` and the harness agent: a black-box CLI's model calls, recorded, against a real local upstream."""

from __future__ import annotations

import json
import subprocess
import textwrap

import anyio
import httpx2
from clawsdk_plugins.agents.harness import HarnessAgent

from clawsdk.proxy import ModelProxy, serving
from clawsdk.runtime.runner import run
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from tests.asgi import answered_models, request_body
from tests.conftest import make_task
from tests.mcp.serve_proc import CLAWSDK, require_bwrap


def _tool_call(i: int, path: str, content: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": f"call_{i}", "type": "function",
        "function": {"name": "write_file", "arguments": json.dumps({"path": path, "content": content})}}]}


class ScriptedUpstream:
    """An OpenAI-compatible /v1/chat/completions that answers with scripted messages, streamed when asked."""

    def __init__(self, messages: list[dict]):
        self.messages = list(messages)
        self.requests: list[tuple[dict, dict]] = []

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None or await answered_models(scope, send):
            return
        req = json.loads(body)
        self.requests.append(({k.decode(): v.decode() for k, v in scope["headers"]}, req))
        message = self.messages.pop(0)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        usage = {"prompt_tokens": 10 * len(req["messages"]), "completion_tokens": 7, "total_tokens": 0}
        if not req.get("stream"):
            data = json.dumps({"id": f"cmpl-{len(self.requests)}", "object": "chat.completion", "model": req["model"],
                               "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                            "logprobs": {"content": [{"token": "x", "logprob": -0.5}]}}],
                               "usage": usage}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": data})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        chunks = [{"role": "assistant"}]
        for tc in message.get("tool_calls") or []:
            args = tc["function"]["arguments"]
            chunks.append({"tool_calls": [{"index": 0, "id": tc["id"], "type": "function",
                                           "function": {"name": tc["function"]["name"], "arguments": args[:10]}}]})
            chunks.append({"tool_calls": [{"index": 0, "function": {"arguments": args[10:]}}]})
        if message.get("content"):
            chunks += [{"content": message["content"][:3]}, {"content": message["content"][3:]}]
        for i, delta in enumerate(chunks):
            event = {"id": "cmpl-s", "model": req["model"], "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish if i == len(chunks) - 1 else None}]}
            await send({"type": "http.response.body", "body": f"data: {json.dumps(event)}\n\n".encode(),
                        "more_body": True})
        await send({"type": "http.response.body", "body": f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
                    "data: [DONE]\n\n".encode(), "more_body": False})


HARNESS = textwrap.dedent('''
    import json, os, sys, urllib.request
    base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    instruction = sys.stdin.read()
    assert instruction == os.environ["CLAWSDK_INSTRUCTION"]
    tools = [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
              "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": instruction}]
    for turn in range(8):
        stream = turn == 0
        body = {"model": os.environ["OPENAI_MODEL"], "messages": messages, "tools": tools, "stream": stream}
        req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        with urllib.request.urlopen(req) as resp:
            if not stream:
                msg = json.load(resp)["choices"][0]["message"]
            else:
                msg = {"role": "assistant", "content": None, "tool_calls": []}
                for line in resp.read().decode().splitlines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    for ch in json.loads(line[6:])["choices"]:
                        for tc in ch["delta"].get("tool_calls", []):
                            if "id" in tc:
                                msg["tool_calls"].append({"id": tc["id"], "type": "function",
                                                          "function": {"name": tc["function"]["name"], "arguments": ""}})
                            msg["tool_calls"][-1]["function"]["arguments"] += tc["function"]["arguments"]
        messages.append(msg)
        if not msg.get("tool_calls"):
            print("final:", msg["content"])
            break
        for tc in msg["tool_calls"]:
            args = json.loads(tc["function"]["arguments"])
            with open(args["path"], "w") as f:
                f.write(args["content"])
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": "ok"})
''')


def test_harness_rollout_records_every_model_call_through_the_proxy(tmp_path, db, monkeypatch):
    (tmp_path / "harness.py").write_text(HARNESS)
    task = load_task(make_task(tmp_path, "harness-task", instruction="Write done.txt containing done."))
    upstream = ScriptedUpstream([_tool_call(1, "done.txt", "done\n"), _tool_call(2, "log.txt", "wrote done.txt\n"),
                                 {"role": "assistant", "content": "All done."}])
    monkeypatch.setenv("UPSTREAM_KEY", "sk-upstream")

    async def main():
        async with serving(upstream) as url:
            agent = HarnessAgent(command=f"python3 {tmp_path / 'harness.py'}", base_url=url + "/v1",
                                 model="scripted-7b", api_key_env="UPSTREAM_KEY")
            return await run([task], agent=agent, db=db, run_id="h1", sandbox="local")

    result = anyio.run(main)
    (outcome,) = result.outcomes
    assert (outcome.kind.value, outcome.passed) == ("ok", True)
    assert len(upstream.requests) == 3
    assert all(h["authorization"] == "Bearer sk-upstream" for h, _ in upstream.requests)
    with Store(db) as s:
        row = s.rollouts("h1")[0]
        events = s.events(row["id"])
    assert (row["n_model_calls"], row["model"], row["agent"]) == (3, "scripted-7b", "harness")
    reqs = [e["payload"] for e in events if e["kind"] == "model_request"]
    resps = [e["payload"] for e in events if e["kind"] == "model_response"]
    assert len(reqs) == len(resps) == 3
    assert [len(r["messages"]) for r in reqs] == [1, 3, 5]
    assert reqs[0]["tools"][0]["function"]["name"] == "write_file" and reqs[0]["params"]["stream"] is True
    assert resps[0]["streamed"] and resps[0]["finish_reason"] == "tool_calls"
    assert resps[0]["message"]["tool_calls"][0]["function"] == _tool_call(1, "done.txt", "done\n")["tool_calls"][0]["function"]
    assert resps[0]["usage"]["prompt_tokens"] == 10
    assert resps[1]["message"]["tool_calls"][0]["id"] == "call_2" and resps[1]["logprobs"]["content"][0]["logprob"] == -0.5
    assert resps[2]["message"]["content"] == "All done." and resps[2]["finish_reason"] == "stop"
    assert all(e["duration_ms"] is not None for e in events if e["kind"] == "model_response")
    harness = next(e["payload"] for e in events if e["kind"] == "sandbox_exec" and "harness" in e["payload"])
    assert harness["exit_code"] == 0 and "final: All done." in harness["stdout"]


def test_proxy_refuses_unknown_keys_and_reports_a_dead_upstream():
    async def main():
        proxy = ModelProxy("http://127.0.0.1:9/v1")  # nothing listens on the discard port
        recorder = Recorder(None, "r")
        token = proxy.register(recorder)
        async with serving(proxy) as url, httpx2.AsyncClient(timeout=30) as http:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            r = await http.post(f"{url}/v1/chat/completions", json=body)
            assert r.status_code == 401
            r = await http.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": "Bearer nope"})
            assert r.status_code == 401
            r = await http.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 502 and "upstream http://127.0.0.1:9/v1 failed" in r.json()["error"]["message"]
        kinds = [(e["kind"], e["payload"].get("status")) for e in recorder.kept]
        assert kinds == [("model_request", None), ("model_response", 502)] and proxy.n_upstream_errors == 1

    anyio.run(main)


def test_show_prints_the_harness_command_not_exec_none(tmp_path, db):
    task = load_task(make_task(tmp_path, "shown"))
    agent = HarnessAgent(command="echo done > done.txt", base_url="http://127.0.0.1:9/v1", check_url=False)
    result = anyio.run(lambda: run([task], agent=agent, db=db, run_id="h-show", sandbox="local"))
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok" and outcome.passed
    out = subprocess.run([CLAWSDK, "show", outcome.rollout_id, "--db", str(db)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    # the harness's command as `show` renders an exec: `$ COMMAND`, never `$ None`
    assert "$ echo done > done.txt" in out.stdout and "None" not in out.stdout


def test_a_harness_the_sandbox_refuses_is_an_unscored_setup_failure(tmp_path, db):
    require_bwrap()  # bwrap isolates the network: the harness cannot reach its proxy from inside
    task = load_task(make_task(tmp_path, "refused"))
    agent = HarnessAgent(command="echo done > done.txt", base_url="http://127.0.0.1:9/v1", check_url=False)
    result = anyio.run(lambda: run([task], agent=agent, db=db, run_id="h-refused", sandbox="bwrap", retries=0))
    (outcome,) = result.outcomes
    assert (outcome.kind.value, outcome.reward, outcome.passed) == ("sandbox_error", None, None)
    assert "isolates the network" in outcome.error and "--sandbox local" in outcome.error
    with Store(db) as s:
        (row,) = s.rollouts("h-refused")
    assert (row["scored"], row["reward"]) == (0, None)
