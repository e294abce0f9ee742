"""What `clawsdk serve` tells a client about its rollout's ending, and which sessions are rollouts: `finish`
never says "scored" before the rollout is, `--max-rollouts N` serves N rollouts and never cancels one of them
for a session past N, reading the task inside a rollout is recorded, and the bearer scheme is case-blind."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from clawsdk.plugins import get_registry
from clawsdk.serve import RolloutHost, ServeConfig, hosting
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from clawsdk.verify.verdict import Verdict, Verifier
from tests.conftest import make_task
from tests.mcp.serve_proc import session, start_http


def _row(db):
    with Store(db) as s:
        (row,) = s.query("SELECT * FROM rollouts")
        return row


@pytest.mark.slow
def test_finish_waits_for_the_calls_in_flight_before_saying_scored(tmp_path, db):
    """A call in flight may run tool_timeout_s + 5 after `finish`; finish waited only verifier_timeout_s + 30,
    then said "the workspace has been scored" while the rollout was still running (and could end unscored)."""
    task = load_task(make_task(tmp_path, "slow", extra={"limits": {"tool_timeout_s": 45, "verifier_timeout_s": 1}}))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            async with Client(host.server(), mode="legacy") as c:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(c.call_tool, "exec", {"command": "sleep 33; echo done > done.txt"})
                    with anyio.fail_after(20):
                        while not host.lives or host.lives[0].in_flight < 1:
                            await anyio.sleep(0.05)
                    r = await c.call_tool("finish", {})
                    return r.content[0].text, _row(db)

    text, row = anyio.run(main)
    assert "has been scored" in text
    assert (row["status"], row["failure_kind"], row["passed"]) == ("finished", "ok", 1)  # was `running`


class SlowVerifier(Verifier):
    name = "slow"

    def __init__(self, spec):
        pass

    async def verify(self, ctx):
        await anyio.sleep(3)
        return Verdict(verifier="slow", score=1.0, passed=True)


def test_finish_never_says_scored_without_a_verdict(tmp_path, db, monkeypatch):
    monkeypatch.setitem(get_registry().tables["verifiers"], "slow", SlowVerifier)
    monkeypatch.setattr(RolloutHost, "ending_s", lambda self: 0.5, raising=False)  # the wait runs out first
    task = load_task(make_task(tmp_path, "slowly", extra={"verifier": {"type": "slow"}}))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            async with Client(host.server(), mode="legacy") as c:
                r = await c.call_tool("finish", {})
            with anyio.fail_after(30):
                await host.lives[0].done.wait()
            return r, host.lives[0].id

    r, rid = anyio.run(main)
    text = r.content[0].text
    assert not r.is_error and "scored." not in text
    assert "still being scored" in text and f"clawsdk show {rid} --db {db}" in text
    assert _row(db)["failure_kind"] == "ok"


def test_a_rollout_that_reads_the_task_again_records_it(tmp_path, db):
    task = load_task(make_task(tmp_path, "reread"))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            async with Client(host.server(), mode="legacy") as c:
                await c.call_tool("task", {})  # a probe's read: before any rollout, nothing to record
                await c.call_tool("ls", {})  # the rollout starts
                assert (await c.call_tool("task", {})).content[0].text == task.instruction
                await c.get_prompt("task")
                await c.call_tool("finish", {})

    anyio.run(main)
    with Store(db) as s:
        (row,) = s.query("SELECT * FROM rollouts")
        events = s.events(row["id"])
    assert [(e["kind"], e["payload"].get("tool") or e["payload"].get("event")) for e in events[:5]] == [
        ("tool_call", "ls"), ("tool_result", "ls"), ("note", "task_read"), ("note", "task_read"), ("note", "finish")]
    assert [e["payload"].get("via") for e in events[2:4]] == ["tool", "prompt"]
    assert row["n_tool_calls"] == 1  # the task's reads are no tool calls of the task's tools


@pytest.mark.slow
def test_max_rollouts_serves_its_rollouts_and_refuses_later_sessions(tmp_path, db):
    """--max-rollouts 1: a second session's end used to stop the server, cancelling the first, real, rollout."""
    proc, info = start_http([str(make_task(tmp_path, "one")), "--sandbox", "local", "--max-rollouts", "1"], db)

    async def main():
        async with session(info) as a:
            assert not (await a.call_tool("write", {"path": "done.txt", "content": "done\n"})).is_error
            async with session(info) as b:  # a session past the limit: refused, not a rollout
                refused = [await b.call_tool(name, args) for name, args in (("ls", {}), ("finish", {}))]
            await anyio.sleep(1)
            assert not (await a.call_tool("ls", {})).is_error  # the first rollout goes on
            finish = await a.call_tool("finish", {})
        return refused, finish

    try:
        refused, finish = anyio.run(main)
        code = proc.wait(timeout=60)  # all its rollouts ended: the server stops on its own
    finally:
        proc.kill()
    for r in refused:
        assert r.is_error and "serves 1 rollout (--max-rollouts 1)" in r.content[0].text
    assert not finish.is_error and "has been scored" in finish.content[0].text
    assert code == 0
    with Store(db) as s:
        rows = s.rollouts(info["run_id"])
        run = s.run(info["run_id"])
    assert [(r["status"], r["failure_kind"], r["scored"], r["passed"], r["n_tool_calls"]) for r in rows] == [
        ("finished", "ok", 1, 1, 2)]
    assert run["status"] == "finished"


@pytest.mark.slow
def test_the_bearer_scheme_is_case_insensitive(tmp_path, db):
    proc, info = start_http([str(make_task(tmp_path, "auth")), "--sandbox", "local"], db)

    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": f"bearer  {info['token']}"}, timeout=60) as http:
            async with Client(streamable_http_client(info["url"], http_client=http)) as client:
                return [t.name for t in (await client.list_tools()).tools]

    try:
        tools = anyio.run(main)
        for scheme in ("Basic", "Bearerx", "Bearer:"):
            r = httpx2.post(info["url"], headers={"Authorization": f"{scheme} {info['token']}"},
                            json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert r.status_code == 401, scheme
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert "finish" in tools
