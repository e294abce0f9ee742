"""`clawsdk serve`: each MCP client session is one recorded, scored rollout (in-process, HTTP, stdio)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from clawsdk.errors import VerifierError
from clawsdk.plugins import get_registry
from clawsdk.serve import ServeConfig, hosting
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from clawsdk.verify.verdict import Verifier
from tests.conftest import EXAMPLES, make_task

HERE = Path(__file__).parent
CLAWSDK = str(Path(sys.executable).parent / "clawsdk")


def _task(tmp_path, **extra):
    return load_task(make_task(tmp_path, "hello", instruction="Write done.txt containing done.", **extra))


def _rollouts(db):
    with Store(db) as s:
        rows = s.query("SELECT * FROM rollouts ORDER BY sample")
        return rows, {r["id"]: s.events(r["id"]) for r in rows}, {r["id"]: s.verdict(r["id"]) for r in rows}


def test_each_session_is_a_rollout_ended_by_finish_or_disconnect(tmp_path, db):
    task = _task(tmp_path)

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv")) as host:
            server = host.server()
            async with Client(server, mode="legacy") as c:
                tools = [t.name for t in (await c.list_tools()).tools]
                assert tools[-1] == "finish" and {"read", "write", "exec", "apply_patch"} <= set(tools)
                assert "Write done.txt containing done." in c.instructions
                await c.call_tool("write", {"path": "done.txt", "content": "done\n"})
                r = await c.call_tool("finish", {"summary": "wrote it"})
                assert not r.is_error and "finished" in r.content[0].text
                r = await c.call_tool("read", {"path": "done.txt"})
                assert r.is_error and "has ended (finish)" in r.content[0].text
            async with Client(server, mode="legacy") as c:  # a second session: a fresh sandbox, sample 1
                r = await c.call_tool("read", {"path": "done.txt"})
                assert r.is_error and "no such file" in r.content[0].text
            with anyio.fail_after(30):
                while len(host.finished) < 2:
                    await anyio.sleep(0.02)
            # a closed connection's key is dropped: a new connection may reuse its id
            assert not host.sessions and len(host.lives) == 2

    anyio.run(main)
    rows, events, verdicts = _rollouts(db)
    assert [(r["sample"], r["status"], r["failure_kind"], r["passed"], r["n_tool_calls"]) for r in rows] == [
        (0, "finished", "ok", 1, 1), (1, "finished", "ok", 0, 1)]
    assert rows[0]["agent"] == "mcp:mcp"
    first = events[rows[0]["id"]]
    assert [e["kind"] for e in first][:3] == ["tool_call", "tool_result", "note"]
    assert first[0]["payload"] == {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}}
    assert first[2]["payload"] == {"event": "finish", "args": {"summary": "wrote it"}}
    note = next(e for e in events[rows[1]["id"]] if e["kind"] == "note")
    assert note["payload"] == {"event": "session_ended", "reason": "disconnect"}
    assert verdicts[rows[0]["id"]]["passed"] == 1 and verdicts[rows[1]["id"]]["passed"] == 0


def test_timeout_and_tool_budget_end_a_session(tmp_path, db):
    task = _task(tmp_path, extra={"limits": {"max_tool_calls": 2}})

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", timeout_s=1.0)) as host:
            server = host.server()
            async with Client(server, mode="legacy") as c:
                assert not (await c.call_tool("ls", {})).is_error  # the clock starts at the first call
                with anyio.fail_after(20):
                    while not host.finished:
                        await anyio.sleep(0.02)
                r = await c.call_tool("ls", {})
                assert r.is_error and "ended (timeout)" in r.content[0].text
            async with Client(server, mode="legacy") as c:
                for _ in range(2):
                    assert not (await c.call_tool("ls", {})).is_error
                r = await c.call_tool("ls", {})
                assert r.is_error and "budget of 2 calls exhausted" in r.content[0].text

    anyio.run(main)
    rows, _, _ = _rollouts(db)
    assert [(r["failure_kind"], r["scored"]) for r in rows] == [("agent_timeout", 1), ("agent_error", 1)]


class QuotingVerifier(Verifier):
    """Fails the way a judge or grade() can: its error quotes what the task author expects."""

    name = "quoting"

    def __init__(self, spec):
        pass

    async def verify(self, ctx):
        raise VerifierError("judge gave no usable answer; last answer: 'the expected total is SECRET-4242'")


def test_an_unscored_ending_tells_the_client_its_kind_never_the_verifiers_words(tmp_path, db, monkeypatch):
    monkeypatch.setitem(get_registry().tables["verifiers"], "quoting", QuotingVerifier)
    task = _task(tmp_path, extra={"verifier": {"type": "quoting"}})

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv")) as host:
            async with Client(host.server(), mode="legacy") as c:
                await c.call_tool("write", {"path": "done.txt", "content": "done\n"})
                finished = (await c.call_tool("finish", {"summary": "done"})).content[0].text
                after = (await c.call_tool("ls", {})).content[0].text
        return finished, after

    finished, after = anyio.run(main)
    assert "could not be scored (verifier_error)" in finished and "could not be scored (verifier_error)" in after
    assert "SECRET" not in finished + after
    rows, _, _ = _rollouts(db)
    assert rows[0]["failure_kind"] == "verifier_error" and "SECRET-4242" in rows[0]["error"]  # the operator's copy


def _start_http(args, db):
    proc = subprocess.Popen([CLAWSDK, "serve", *args, "--http", "--port", "0", "--max-rollouts", "1",
                             "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the server prints one JSON line once it listens
    if not line:
        raise AssertionError(proc.stderr.read())
    return proc, json.loads(line)


@pytest.mark.slow
def test_external_client_works_an_example_task_over_http_with_the_token(db):
    task = EXAMPLES / "access-log-report"
    proc, info = _start_http([str(task)], db)
    try:
        assert info["url"].startswith("http://127.0.0.1:")
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = httpx2.post(info["url"], headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert r.status_code == 401 and "bearer token" in r.text
        out = subprocess.run([sys.executable, str(HERE / "external_client.py"), "--http", info["url"], info["token"],
                              str(task / "solution" / "steps.yaml")], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["calls"] == [{"tool": "read", "is_error": False}, {"tool": "write", "is_error": False},
                                   {"tool": "exec", "is_error": False}]
        assert not result["finish_error"]
        proc.wait(timeout=60)  # --max-rollouts 1: the server stops once the session is recorded
    finally:
        proc.kill()
    rows, events, verdicts = _rollouts(db)
    assert len(rows) == 1 and rows[0]["run_id"] == info["run_id"]
    assert (rows[0]["failure_kind"], rows[0]["passed"], rows[0]["n_tool_calls"]) == ("ok", 1, 3)
    kinds = [e["kind"] for e in events[rows[0]["id"]]]
    assert kinds.count("tool_call") == 3 and kinds.count("tool_result") == 3 and "verifier" in kinds
    assert verdicts[rows[0]["id"]]["score"] == 1.0


@pytest.mark.slow
def test_external_client_spawns_serve_over_stdio(db):
    task = EXAMPLES / "access-log-report"
    out = subprocess.run([sys.executable, str(HERE / "external_client.py"), "--stdio", str(task),
                          str(task / "solution" / "steps.yaml"), "--db", str(db)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tools"][-1] == "finish"
    rows, _, _verdicts = _rollouts(db)
    assert [(r["failure_kind"], r["passed"], r["n_tool_calls"]) for r in rows] == [("ok", 1, 3)]
    assert "ended by finish, score 1.00" in out.stderr


def test_a_probe_is_not_a_rollout_and_the_task_reaches_clients_without_instructions(tmp_path, db):
    task = _task(tmp_path)

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            server = host.server()
            async with Client(server, mode="legacy") as c:  # a probe: lists, reads the task, leaves
                tools = (await c.list_tools()).tools
                assert tools[0].name == "task" and "Write done.txt containing done." in tools[0].description
                assert tools[-1].name == "finish"
                prompt = await c.get_prompt("task")
                assert prompt.messages[0].content.text == task.instruction
                r = await c.call_tool("task", {})
                assert not r.is_error and r.content[0].text == task.instruction
            await anyio.sleep(0.2)
            assert not host.lives and not host.finished
            async with Client(server, mode="legacy") as c:  # a real session: its first tool call starts it
                await c.call_tool("write", {"path": "done.txt", "content": "done\n"})
                await c.call_tool("finish", {})
            assert len(host.finished) == 1

    anyio.run(main)
    rows, events, _ = _rollouts(db)
    assert [(r["sample"], r["failure_kind"], r["passed"], r["n_tool_calls"]) for r in rows] == [(0, "ok", 1, 1)]
    assert not any(e["payload"].get("tool") == "task" for e in events[rows[0]["id"]])
