"""The openclaw agent's parts that need no OpenClaw: tool policy mapping, tool events, refusals, the install check."""

from __future__ import annotations

import json

import anyio
import pytest
from clawsdk_plugins.agents.cli_agent.events import ToolEventRecorder
from clawsdk_plugins.agents.openclaw.agent import OpenClawAgent
from clawsdk_plugins.agents.openclaw.config import allowed_tools, openclaw_config
from clawsdk_plugins.sandboxes.local import LocalSandbox
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.runtime.runner import run
from clawsdk.sandbox.base import Capabilities
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Task, ToolPolicy
from tests.cli_agent.scripted_model import tool_call
from tests.conftest import make_task


def test_the_tasks_tools_and_policy_become_openclaws_allow_and_deny():
    task = Task(id="t", instruction="x", tools=["core", "spreadsheets"], tool_policy=ToolPolicy(deny=["exec"]))
    assert allowed_tools(task) == ["read", "write", "edit", "apply_patch", "ls", "process"]
    cfg = openclaw_config(task, base_url="http://127.0.0.1:1/v1", token="tok", model="m")
    tools = cfg["tools"]
    assert tools["toolSearch"] is False and tools["profile"] == "coding"
    assert {"exec", "web_fetch", "web_search", "memory_search", "memory_get", "group:sessions"} <= set(tools["deny"])
    assert not {"read", "write", "process"} & set(tools["deny"])
    provider = cfg["models"]["providers"]["clawsdk"]
    assert (provider["baseUrl"], provider["apiKey"], provider["models"][0]["id"]) == ("http://127.0.0.1:1/v1", "tok", "m")
    with_web = Task(id="t", instruction="x", tools=["openclaw"])
    assert {"web_fetch", "memory_get", "exec"} <= set(allowed_tools(with_web))
    assert "web_fetch" not in openclaw_config(with_web, base_url="u", token="t", model="m")["tools"]["deny"]


def test_tool_calls_in_the_model_traffic_become_ordered_tool_events():
    async def main():
        rec = Recorder(None, "r")
        events = ToolEventRecorder(rec, who="OpenClaw")
        calls = tool_call(1, "write", {"path": "a.txt", "content": "x"})
        calls["tool_calls"].append(tool_call(2, "exec", {"command": "ls"})["tool_calls"][0])
        await events.record("model_request", {"messages": [{"role": "user", "content": "go"}]})
        await events.record("model_response", {"message": calls})
        # OpenClaw renames the call ids and adds a user message of its own after the results
        history = [{"role": "user", "content": "go"}, {**calls, "tool_calls": [
            {**c, "id": f"call{i}"} for i, c in enumerate(calls["tool_calls"])]},
            {"role": "tool", "tool_call_id": "call0", "content": "Successfully wrote 1 bytes"},
            {"role": "tool", "tool_call_id": "call1", "content": [{"type": "text", "text": "a.txt"}]},
            {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"}]
        await events.record("model_request", {"messages": history})
        await events.record("model_response", {"message": tool_call(3, "read", {"path": "gone.txt"})})
        await events.flush()  # OpenClaw stopped before the read's result went back
        return rec

    rec = anyio.run(main)
    got = [(e["kind"], e["payload"].get("tool"), e["payload"].get("content")) for e in rec.kept]
    assert got == [("model_request", None, None), ("model_response", None, None),
                   ("tool_call", "write", None), ("tool_call", "exec", None),
                   ("tool_result", "write", "Successfully wrote 1 bytes"), ("tool_result", "exec", "a.txt"),
                   ("model_request", None, None), ("model_response", None, None), ("tool_call", "read", None),
                   ("tool_result", "read", "(OpenClaw ended before returning this result)")]
    assert rec.kept[2]["payload"]["args"] == {"path": "a.txt", "content": "x"}
    assert rec.n_tool_calls == 3 and rec.kept[-1]["payload"]["is_error"]


def _two_calls():
    calls = tool_call(1, "read", {"path": "a.txt"})
    calls["tool_calls"].append(tool_call(2, "exec", {"command": "sleep 1; ls"})["tool_calls"][0])
    return calls


def _tool_traffic(rec):
    """(tool, result) per recorded result; each result names its call's seq, as the export pairs them."""
    by_seq = {e["seq"]: e for e in rec.kept}
    results = [e["payload"] for e in rec.kept if e["kind"] == "tool_result"]
    assert all(by_seq[r.get("call")]["kind"] == "tool_call" and by_seq[r["call"]]["payload"]["tool"] == r["tool"]
               for r in results)
    return [(r["tool"], r["content"]) for r in results]


def test_results_pair_with_their_calls_by_id_whatever_order_openclaw_sends_them_in():
    async def main():
        rec = Recorder(None, "r", keep=True)
        events = ToolEventRecorder(rec, who="OpenClaw")
        await events.record("model_request", {"messages": [{"role": "user", "content": "go"}]})
        await events.record("model_response", {"message": _two_calls()})
        turn = {**_two_calls(), "tool_calls": [{**c, "id": f"c{i}"} for i, c in enumerate(_two_calls()["tool_calls"])]}
        await events.record("model_request", {"messages": [
            {"role": "user", "content": "go"}, turn,
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt"},  # the exec's, first
            {"role": "tool", "tool_call_id": "c0", "content": "hello"}]})
        return rec

    assert _tool_traffic(anyio.run(main)) == [("read", "hello"), ("exec", "a.txt b.txt")]


def test_a_request_from_another_process_with_the_token_neither_answers_the_calls_nor_adds_its_own():
    """A script the agent ran (OpenClaw's exec) can read the proxy token and post its own conversation: its
    tool messages must not become the recorded results, and the calls its answer makes are not the agent's."""

    async def main():
        rec = Recorder(None, "r", keep=True)
        events = ToolEventRecorder(rec, who="OpenClaw")
        history = [{"role": "user", "content": "go"}]
        await events.record("model_request", {"messages": history})
        await events.record("model_response", {"message": _two_calls()})
        forged = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "I read it."},
                  {"role": "tool", "tool_call_id": "call_1", "content": "FORGED"}]
        real = [*history, _two_calls(), {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
                {"role": "tool", "tool_call_id": "call_2", "content": "a.txt"}]
        got_forged, got_real = anyio.Event(), anyio.Event()

        async def forger():  # its request and its answer straddle OpenClaw's own request
            await events.record("model_request", {"messages": forged})
            got_forged.set()
            await got_real.wait()
            await events.record("model_response", {"message": tool_call(7, "write", {"path": "x", "content": ""})})

        async def openclaw():
            await got_forged.wait()
            await events.record("model_request", {"messages": real})
            got_real.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(forger)
            tg.start_soon(openclaw)
        await events.record("model_response", {"message": {"role": "assistant", "content": "done"}})
        await events.flush()
        return rec

    rec = anyio.run(main)
    assert _tool_traffic(rec) == [("read", "hello"), ("exec", "a.txt")]
    assert [e["payload"]["tool"] for e in rec.kept if e["kind"] == "tool_call"] == ["read", "exec"]
    assert rec.n_tool_calls == 2


class NoNetSandbox(LocalSandbox):
    """A sandbox that isolates and is not bwrap: OpenClaw cannot reach its proxy from it."""

    name = "nonet"
    capabilities = Capabilities(network_isolated=True, fs_isolated=True)


def test_a_sandbox_openclaw_cannot_run_in_is_refused_before_the_run(tmp_path, db, fake_install, monkeypatch):
    """Refused once, not as an unscored sandbox_error in every rollout (retried --retries times); a rollout
    given such a sandbox some other way still ends sandbox_error."""
    from clawsdk.errors import SandboxError
    from clawsdk.plugins import get_registry

    monkeypatch.setitem(get_registry().tables["sandboxes"], "nonet", lambda cfg=None: NoNetSandbox(cfg))
    task = Task(id="t", instruction="Write done.txt")
    agent = OpenClawAgent(model="m", base_url="http://127.0.0.1:9/v1", home=str(fake_install))
    with pytest.raises(ValueError, match="runs under --sandbox local, bwrap, docker, not 'nonet'"):
        anyio.run(lambda: run([task], agent=agent, db=db, run_id="n1", sandbox="nonet", retries=0))
    assert not db.exists()
    with pytest.raises(SandboxError, match="runs under --sandbox local, bwrap, docker, not 'nonet'"):
        agent._check_sandbox(NoNetSandbox(None))


def test_a_missing_install_stops_the_run_with_the_command_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWSDK_OPENCLAW_HOME", str(tmp_path / "none"))
    task_dir = make_task(tmp_path, "t1")
    r = CliRunner().invoke(cli, ["run", str(task_dir), "--agent", "openclaw", "--model", "m", "--base-url",
                                 "http://127.0.0.1:9/v1", "--db", str(tmp_path / "s.db")])
    assert r.exit_code != 0
    assert f"openclaw is not installed under {tmp_path / 'none'}: run `clawsdk openclaw install`" in r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["openclaw", "where"])
    assert r.exit_code == 1 and "clawsdk openclaw install" in r.output


def test_openclaw_failing_before_its_first_model_call_is_unscored(tmp_path, db, fake_install):
    task = Task(id="t", instruction="Write done.txt")
    agent = OpenClawAgent(model="m", base_url="http://127.0.0.1:9/v1", home=str(fake_install),  # node: an empty file
                          check_url=False)
    (outcome,) = anyio.run(lambda: run([task], agent=agent, db=db, run_id="b1", sandbox="local", retries=0)).outcomes
    assert outcome.kind.value == "sandbox_error" and outcome.reward is None
    assert "OpenClaw failed before its first model call (exit 126)" in outcome.error


def test_a_request_that_is_not_openclaws_own_cannot_make_its_exit_the_model_servers_failure():
    """A script with the token could post a request the upstream fails (a 5xx), then kill OpenClaw: its non-zero
    exit right after the model server "failed its last call" was an unscored model_error."""
    import httpx2

    from clawsdk.proxy import ModelProxy, serving
    from tests.asgi import request_body

    class Upstream:  # a tool call for the first request; 503 for any request whose last message says "fail"
        async def __call__(self, scope, receive, send):
            body = await request_body(scope, receive, send)
            if body is None:
                return
            fail = json.loads(body)["messages"][-1]["content"] == "fail"
            answer = {"error": {"message": "overloaded"}} if fail else {
                "id": "c", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "message": tool_call(1, "exec", {"command": "ls"}),
                             "finish_reason": "tool_calls"}]}
            await send({"type": "http.response.start", "status": 503 if fail else 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    async def main():
        async with serving(Upstream()) as up:
            proxy = ModelProxy(up + "/v1")
            token = proxy.register(ToolEventRecorder(Recorder(None, "r")))
            async with serving(proxy) as url, httpx2.AsyncClient(timeout=30) as http:
                async def ask(messages):
                    r = await http.post(url + "/v1/chat/completions", headers={"authorization": f"Bearer {token}"},
                                        json={"model": "m", "messages": messages})
                    return r.status_code

                go = [{"role": "user", "content": "go"}]
                assert await ask(go) == 200  # OpenClaw's turn: an exec call, pending
                assert await ask([{"role": "user", "content": "fail"}]) == 503  # not carrying the exec's turn
                forged = proxy.last_failed
                own = [*go, tool_call(1, "exec", {"command": "ls"}),
                       {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}, {"role": "user", "content": "fail"}]
                assert await ask(own) == 503  # OpenClaw's own next request, failed by the upstream
                return forged, proxy.last_failed

    assert anyio.run(main) == (False, True)


def test_an_answer_openclaw_drops_leaves_no_call_waiting_and_the_next_turn_is_recorded():
    """OpenClaw's model client drops an assistant turn that ended in an error before it sends the history again:
    its calls (never made) waited for that turn forever, and every later request read as not OpenClaw's own."""

    async def main():
        rec = Recorder(None, "r", keep=True)
        events = ToolEventRecorder(rec, who="OpenClaw")
        go = [{"role": "user", "content": "go"}]
        await events.record("model_request", {"messages": go})
        await events.record("model_response", {"message": tool_call(1, "read", {"path": "a"}),
                                               "error": {"message": "stream broke"}})
        await events.record("model_request", {"messages": go})  # the retry
        retry_own = events.agents_own()
        await events.record("model_response", {"message": tool_call(2, "exec", {"command": "ls"})})
        # an answer dropped for another reason: the next request is the last one again, plus context
        ctx = [*go, {"role": "user", "content": "(context)"}]
        await events.record("model_request", {"messages": ctx})
        dropped_own = events.agents_own()
        await events.record("model_response", {"message": tool_call(3, "write", {"path": "b", "content": ""})})
        await events.record("model_request", {"messages": [
            *ctx, tool_call(3, "write", {"path": "b", "content": ""}),
            {"role": "tool", "tool_call_id": "call_3", "content": "wrote b"}]})
        return rec, retry_own, dropped_own

    rec, retry_own, dropped_own = anyio.run(main)
    assert retry_own and dropped_own
    assert [e["payload"]["tool"] for e in rec.kept if e["kind"] == "tool_call"] == ["exec", "write"]
    assert _tool_traffic(rec) == [("exec", "(OpenClaw dropped this answer: not run)"), ("write", "wrote b")]
