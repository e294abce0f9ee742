"""One rollout for a host agent: `clawsdk serve TASK --http --upstream URL` is the task's MCP server and the recording
model proxy of the same rollouts, so an agent builder's own runtime (its model calls and its tool calls) is recorded
whole; and the SFT export of a served rollout uses the prompt the agent sent, never one it did not see."""

from __future__ import annotations

import anyio
import httpx2

from clawsdk.data.select import Selection, select
from clawsdk.proxy import serving
from clawsdk.store.store import Store
from tests.cli_agent.scripted_model import PlannedModel, tool_call
from tests.conftest import make_task
from tests.mcp.serve_proc import session, start_http

SYSTEM = {"role": "system", "content": "You are my own agent. Use the tools."}
WRITE = tool_call(1, "write", {"path": "done.txt", "content": "done\n"})


def _serve_run(tmp_path, db, *, upstream: bool):
    task_dir = make_task(tmp_path, "t1")
    model = PlannedModel([WRITE], final="All done.")

    async def main():
        async with serving(model) as up:
            args = [str(task_dir), "--sandbox", "local", "--max-rollouts", "1", "--run-id", "host"]
            proc, info = start_http(args + (["--upstream", up + "/v1"] if upstream else []), db)
            try:
                async with httpx2.AsyncClient(timeout=60, headers={"authorization": f"Bearer {info['token']}"}) as h:
                    async def ask(messages):
                        r = await h.post(info["base_url"] + "/chat/completions", json={"model": "m",
                                                                                       "messages": messages})
                        assert r.status_code == 200, r.text
                        return r.json()["choices"][0]["message"]

                    history = [SYSTEM, {"role": "user", "content": "Write done.txt containing done."}]
                    if upstream:  # the agent's runtime: a model call, the tool it asks for, the next model call
                        answer = await ask(history)
                    async with session(info) as client:
                        result = await client.call_tool("write", {"path": "done.txt", "content": "done\n"})
                        if upstream:
                            history += [answer, {"role": "tool", "tool_call_id": "call_1",
                                                 "content": result.content[0].text}]
                            history.append(await ask(history))
                        await client.call_tool("finish", {"summary": "done"})
                with anyio.fail_after(60):
                    while proc.poll() is None:  # --max-rollouts 1: it stops once the rollout is recorded
                        await anyio.sleep(0.1)
            finally:
                proc.terminate()
                proc.wait()
            return info

    info = anyio.run(main)
    with Store(db) as s:
        (row,) = s.rollouts("host")
        events = s.events(row["id"])
        result = select(s, Selection(runs=["host"]))
    return info, row, events, result


def test_the_model_calls_and_tool_calls_of_a_host_agent_are_one_rollout(tmp_path, db):
    info, row, events, result = _serve_run(tmp_path, db, upstream=True)
    assert info["base_url"].endswith("/v1") and info["base_url"].startswith("http://127.0.0.1:")
    kinds = [e["kind"] for e in events if e["kind"] in ("model_request", "model_response", "tool_call",
                                                          "tool_result")]
    assert kinds == ["model_request", "model_response", "tool_call", "tool_result", "model_request", "model_response"]
    assert (row["failure_kind"], row["reward"], row["n_model_calls"], row["n_tool_calls"]) == ("ok", 1.0, 2, 1)
    (kept,) = result.kept
    messages = kept.trajectory.messages
    assert messages[0] == SYSTEM  # the prompt the agent sent, as the proxy saw it
    assert messages[-1] == {"role": "assistant", "content": "All done."} and kept.trajectory.source == "model"


def test_a_served_rollout_without_its_model_calls_exports_no_made_up_system_prompt(tmp_path, db):
    _, row, _, result = _serve_run(tmp_path, db, upstream=False)
    (kept,) = result.kept
    assert row["agent"].startswith("mcp:") and kept.trajectory.source == "tools"
    assert [m["role"] for m in kept.trajectory.messages][:2] == ["user", "assistant"]  # no system prompt


def test_over_stdio_one_command_records_a_host_agent_whole(tmp_path, db):
    """`clawsdk serve TASK --upstream URL` over stdio: the MCP wire is stdout, so the proxy listens on a loopback
    port of its own and says where on stderr; the agent's model calls and tool calls are one rollout."""
    import os
    import re
    import sys
    from pathlib import Path

    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    task_dir = make_task(tmp_path, "t1")
    model = PlannedModel([WRITE], final="All done.")
    log = tmp_path / "serve.log"

    async def main():
        async with serving(model) as up:
            params = StdioServerParameters(
                command=str(Path(sys.executable).with_name("clawsdk")),
                args=["serve", str(task_dir), "--sandbox", "local", "--run-id", "host", "--db", str(db),
                      "--upstream", up + "/v1"], env=dict(os.environ))
            with log.open("w") as errlog:
                async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                    with anyio.fail_after(60):
                        while "its bearer token" not in log.read_text():
                            await anyio.sleep(0.1)
                    said = log.read_text()
                    base = re.search(r"model base URL of this session's rollout: (\S+)", said).group(1)
                    token = re.search(r"its bearer token \(shown once\): (\S+)", said).group(1)
                    assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
                    async with httpx2.AsyncClient(timeout=60, headers={"authorization": f"Bearer {token}"}) as h:
                        async def ask(messages):
                            r = await h.post(base + "/chat/completions", json={"model": "m", "messages": messages})
                            assert r.status_code == 200, r.text
                            return r.json()["choices"][0]["message"]

                        history = [SYSTEM, {"role": "user", "content": "Write done.txt containing done."}]
                        answer = await ask(history)
                        result = await client.call_tool("write", {"path": "done.txt", "content": "done\n"})
                        history += [answer, {"role": "tool", "tool_call_id": "call_1",
                                             "content": result.content[0].text}]
                        await ask(history)
                        assert (await httpx2.AsyncClient().post(base + "/chat/completions", json={})).status_code == 401
                        await client.call_tool("finish", {"summary": "done"})

    anyio.run(main)
    with Store(db) as s:
        (row,) = s.rollouts("host")
        kinds = [e["kind"] for e in s.events(row["id"]) if e["kind"] in ("model_request", "model_response",
                                                                            "tool_call", "tool_result")]
    assert kinds == ["model_request", "model_response", "tool_call", "tool_result", "model_request", "model_response"]
    assert (row["failure_kind"], row["reward"], row["n_model_calls"]) == ("ok", 1.0, 2)
