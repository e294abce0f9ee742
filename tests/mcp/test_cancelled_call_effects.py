"""A call cancelled while its tool runs (an MCP client's notifications/cancelled, an agent giving up, a
rollout stopping) may already have done its work: the store records it as cancelled, with the effect
possible, never as a failed call. Otherwise an agent could cancel each call once its work was done and
leave training data in which every call failed and the task still passed."""

from __future__ import annotations

import sqlite3
import time

import anyio
from mcp import Client

from clawsdk import Store, load_tasks, run_sync
from clawsdk.mcp.session import ToolSession, ToolSpec
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.serve import ServeConfig, hosting
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Limits
from clawsdk.tasks.native import load_task
from tests.conftest import make_task

WORK_THEN_WAIT = "echo done > done.txt; sleep 30"


def _result_of(events, command):
    (call,) = [e for e in events
               if e["kind"] == "tool_call" and e["payload"]["args"].get("command") == command]
    results = [e for e in events if e["kind"] == "tool_result" and e["payload"]["call"] == call["seq"]]
    assert len(results) == 1, results  # paired with its call, exactly once
    return results[0]


def _assert_cancelled_not_failed(result):
    p = result["payload"]
    assert p["cancelled"] is True
    assert p["is_error"] is None  # not known: the tool never answered, and it may have done its work
    assert "cancelled" in p["content"] and "may have taken effect" in p["content"]
    assert result["duration_ms"] >= 0


def test_a_call_the_client_cancels_once_its_work_is_done_is_recorded_cancelled_not_failed(tmp_path, db):
    task = load_task(make_task(tmp_path, "work-then-cancel"))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            async with Client(host.server(), mode="legacy") as c:
                gave_up = anyio.CancelScope()

                async def work():
                    with gave_up:  # the client gives up: MCP sends notifications/cancelled
                        await c.call_tool("exec", {"command": WORK_THEN_WAIT})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(work)
                    with anyio.fail_after(20):  # cancelled only once its work is surely done
                        while (await c.call_tool("read", {"path": "done.txt"})).is_error:
                            await anyio.sleep(0.05)
                    gave_up.cancel()
                assert gave_up.cancelled_caught
                await c.call_tool("finish", {})

    started = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - started < 25  # the cancelled command was stopped, not waited for
    with Store(db) as store:
        (row,) = store.query("SELECT * FROM rollouts")
        events = store.events(row["id"])
    assert (row["failure_kind"], row["passed"]) == ("ok", 1)  # its work counted ...
    result = _result_of(events, WORK_THEN_WAIT)
    _assert_cancelled_not_failed(result)  # ... so the store does not say it failed
    # what an export reads to drop (or mark) a rollout with such a call, and what the views show
    con = sqlite3.connect(db)
    try:
        is_error = con.execute("SELECT is_error FROM tool_results WHERE rollout_id = ? AND seq = ?",
                               [row["id"], result["seq"]]).fetchone()
        assert is_error == (None,)
        assert con.execute("SELECT count(*) FROM events WHERE kind = 'tool_result' AND rollout_id = ? "
                           "AND json_extract(payload, '$.cancelled')", [row["id"]]).fetchone() == (1,)
    finally:
        con.close()


class WorksThenGivesUp(Agent):
    """Does the work in a call it then gives up on (as an agent's own timeout would)."""

    name = "works-then-gives-up"

    async def run(self, ctx: AgentContext) -> None:
        async with anyio.create_task_group() as tg:
            gave_up = anyio.CancelScope()

            async def work():
                with gave_up:
                    await ctx.tools.call("exec", {"command": WORK_THEN_WAIT})

            tg.start_soon(work)
            with anyio.fail_after(20):
                while (await ctx.tools.call("read", {"path": "done.txt"})).is_error:
                    await anyio.sleep(0.05)
            gave_up.cancel()


def test_an_in_process_call_given_up_on_after_its_work_is_recorded_cancelled_not_failed(tmp_path, db):
    tasks = load_tasks(str(make_task(tmp_path, "gives-up-in-process"))).tasks
    [o] = run_sync(tasks, agent=WorksThenGivesUp(), db=db, sandbox="local", retries=0).outcomes
    assert (o.kind.value, o.passed) == ("ok", True)
    with Store(db) as store:
        events = store.events(o.rollout_id)
    _assert_cancelled_not_failed(_result_of(events, WORK_THEN_WAIT))


def test_a_call_cancelled_while_its_tool_hangs_returns_at_once_with_its_result_recorded():
    class Hangs:
        async def call_tool(self, name, args):
            await anyio.sleep(3600)

    recorder = Recorder(None, "r")
    session = ToolSession(recorder, Limits())
    session.clients["x"] = Hangs()
    session.specs["t"] = ToolSpec(name="t", description="", input_schema={}, server="x", remote_name="t")

    async def main():
        with anyio.fail_after(5):  # nothing waits for the tool once the caller has given up
            with anyio.move_on_after(0.2) as scope:
                await session.call("t", {})
        return scope.cancelled_caught

    assert anyio.run(main)
    call, result = recorder.transcript()
    assert (call["kind"], result["kind"]) == ("tool_call", "tool_result")
    assert result["payload"]["call"] == call["seq"]
    assert result["payload"]["cancelled"] is True and result["payload"]["is_error"] is None
