"""Each `tool_result` names its call (`call`: the `tool_call` event's seq): an external agent's concurrent
calls finish in any order and still export paired right, and a cancelled call still gets its result."""

from __future__ import annotations

import anyio
from mcp import Client

from clawsdk import Store, load_tasks, run_sync
from clawsdk.data.select import Selection, load_candidates
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.serve import ServeConfig, hosting
from clawsdk.tasks.native import load_task
from tests.conftest import make_task

SLOW = "sleep 1; echo A-out"
FAST = "echo B-out"


def _served_events(db):
    with Store(db) as store:
        (row,) = store.query("SELECT * FROM rollouts")
        return row, store.events(row["id"])


def test_concurrent_calls_over_serve_export_each_with_its_own_output(tmp_path, db):
    task = load_task(make_task(tmp_path, "both"))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            async with Client(host.server(), mode="legacy") as c:
                answers = {}

                async def call(command):
                    answers[command] = (await c.call_tool("exec", {"command": command})).content[0].text

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, SLOW)
                    with anyio.fail_after(20):  # the slow call is recorded first
                        while not host.lives or host.lives[0].recorder.n_tool_calls < 1:
                            await anyio.sleep(0.01)
                    tg.start_soon(call, FAST)
                await c.call_tool("finish", {})
        return answers

    answers = anyio.run(main)
    assert "A-out" in answers[SLOW] and "B-out" in answers[FAST]  # the client got the right answers
    _row, events = _served_events(db)
    kinds = [(e["kind"], (e["payload"].get("args") or {}).get("command")) for e in events[:4]]
    # the fast call finished first: its result is recorded before the slow call's
    assert kinds == [("tool_call", SLOW), ("tool_call", FAST), ("tool_result", None), ("tool_result", None)]
    with Store(db) as store:
        (candidate,) = load_candidates(store, Selection())
    # the training conversation pairs each call with its own output, not with the next result recorded
    msgs = candidate.trajectory.messages
    turns = [(m["tool_calls"][0]["function"]["arguments"], msgs[i + 1]["content"])
             for i, m in enumerate(msgs) if m["role"] == "assistant" and msgs[i + 1:i + 2]]
    assert SLOW in turns[0][0] and "A-out" in turns[0][1] and "B-out" not in turns[0][1]
    assert FAST in turns[1][0] and "B-out" in turns[1][1] and "A-out" not in turns[1][1]
    assert [e["payload"]["call"] for e in events[2:4]] == [events[1]["seq"], events[0]["seq"]]


def test_a_call_the_client_cancels_still_records_its_result(tmp_path, db):
    task = load_task(make_task(tmp_path, "gives-up"))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            async with Client(host.server(), mode="legacy") as c:
                with anyio.move_on_after(0.5) as scope:  # the client gives up: MCP cancels the request
                    await c.call_tool("exec", {"command": "sleep 30"})
                assert scope.cancelled_caught
                r = await c.call_tool("write", {"path": "done.txt", "content": "done\n"})
                assert not r.is_error  # the session goes on
                await c.call_tool("finish", {})

    anyio.run(main)
    row, events = _served_events(db)
    assert (row["failure_kind"], row["passed"], row["n_tool_calls"]) == ("ok", 1, 2)
    calls = [e for e in events if e["kind"] == "tool_call"]
    gave_up, wrote = [e["payload"] for e in events if e["kind"] == "tool_result"]
    assert calls[0]["payload"]["args"] == {"command": "sleep 30"} and gave_up["call"] == calls[0]["seq"]
    # cancelled, not failed: what it did until then may have taken effect (test_cancelled_call_effects.py)
    assert gave_up["cancelled"] and gave_up["is_error"] is None
    assert "before the tool answered" in gave_up["content"]
    assert wrote["tool"] == "write" and not wrote["is_error"] and wrote["call"] == calls[1]["seq"]


class CancelsItsCall(Agent):
    """Gives up on a slow call (as a rollout cancelled mid-call does), then finishes the task."""

    name = "cancels-its-call"

    def __init__(self):
        self.went_on = False

    async def run(self, ctx: AgentContext) -> None:
        with anyio.move_on_after(0.3):
            await ctx.tools.call("exec", {"command": "sleep 30"})
            self.went_on = True
        await ctx.tools.call("write", {"path": "done.txt", "content": "done"})


def test_a_cancelled_call_records_one_result_and_the_cancellation_goes_on(tmp_path, db):
    tasks = load_tasks(str(make_task(tmp_path, "cancel"))).tasks
    agent = CancelsItsCall()
    [o] = run_sync(tasks, agent=agent, db=db, sandbox="local", retries=0).outcomes
    assert (o.kind.value, o.passed) == ("ok", True)
    assert not agent.went_on  # the call raised the cancellation: nothing after it in the scope ran
    with Store(db) as store:
        events = store.events(o.rollout_id)
    calls = [e for e in events if e["kind"] == "tool_call"]
    results = [e["payload"] for e in events if e["kind"] == "tool_result"]
    assert len(results) == len(calls) == 2
    assert [r["call"] for r in results] == [c["seq"] for c in calls]  # one result each, never two
    assert results[0]["cancelled"] and results[0]["is_error"] is None
    assert results[0]["content"].startswith("the call of 'exec' was cancelled after ")
    assert not results[1]["is_error"]


def test_a_cancelled_call_whose_result_cannot_be_recorded_is_still_cancelled():
    """The store may already be closing when a call is cancelled (the run stopping): the write's error must not
    replace the cancellation, which is what ends the task."""
    from clawsdk.mcp.session import ToolSession, ToolSpec
    from clawsdk.store.recorder import Recorder
    from clawsdk.tasks.model import Limits

    class Closed(Recorder):
        async def record(self, event, **kw):
            if event.kind == "tool_result":
                raise anyio.ClosedResourceError
            return await super().record(event, **kw)

    class Hangs:
        async def call_tool(self, name, args):
            await anyio.sleep(3600)

    session = ToolSession(Closed(None, "r"), Limits())
    session.clients["x"] = Hangs()
    session.specs["t"] = ToolSpec(name="t", description="", input_schema={}, server="x", remote_name="t")

    async def main():
        with anyio.move_on_after(0.2) as scope:
            await session.call("t", {})
        return scope.cancelled_caught

    assert anyio.run(main)
