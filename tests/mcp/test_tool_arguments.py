"""Arguments no tool server could be sent are the agent's mistake: an error result it can read, never a
broken tool server (sandbox_error, unscored)."""

from __future__ import annotations

import pytest

from clawsdk import Store, load_tasks, run_sync
from clawsdk.runtime.agent import Agent, AgentContext
from tests.conftest import make_task

DEEP: list = []
for _ in range(300):  # the MCP client cannot encode ~250 levels
    DEEP = [DEEP]


class BadArguments(Agent):
    name = "bad-arguments"

    def __init__(self, args):
        self.args = args
        self.told: list[str] = []

    async def run(self, ctx: AgentContext) -> None:
        result = await ctx.tools.call("exec", self.args)
        assert result.is_error
        self.told.append(result.text)
        await ctx.tools.call("write", {"path": "done.txt", "content": "done"})


@pytest.mark.parametrize("args,why", [
    (["echo", "hi"], "are list, not an object"),
    ("echo hi", "are str, not an object"),
    ({1: "echo hi"}, "have a key that is not a string"),
    ({"command": "echo hi", "note": object()}, "hold a object, which is not a JSON value"),
    ({"command": "echo hi", "note": DEEP}, "nest deeper than 64 levels"),
])
def test_arguments_a_server_cannot_be_sent_are_an_error_result(tmp_path, db, args, why):
    tasks = load_tasks(str(make_task(tmp_path, "args"))).tasks
    agent = BadArguments(args)
    [o] = run_sync(tasks, agent=agent, db=db, sandbox="local", retries=2, backoff_s=0.01).outcomes
    assert (o.kind.value, o.passed, o.attempts) == ("ok", True, 1)
    assert why in agent.told[0] and "send a JSON object" in agent.told[0]
    with Store(db) as store:
        calls = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["exec", "write"] and "unreadable" in calls[0]["args"]
