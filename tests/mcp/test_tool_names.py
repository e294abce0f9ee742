"""A call needs a tool name: an empty or blank one is refused with an error result that lists the tools,
recorded and paired like a call of an unknown tool, in-process and over `serve`."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from clawsdk import Store, load_tasks, run_sync
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.serve import ServeConfig, hosting
from clawsdk.tasks.native import load_task
from tests.conftest import make_task

NEEDS_A_NAME = "a tool call needs a name; the tools are: "


class CallsWithoutAName(Agent):
    name = "calls-without-a-name"

    def __init__(self, tool):
        self.tool = tool
        self.told: list[tuple[bool, str]] = []

    async def run(self, ctx: AgentContext) -> None:
        result = await ctx.tools.call(self.tool, {"path": "notes.md"})
        self.told.append((result.is_error, result.text))
        await ctx.tools.call("write", {"path": "done.txt", "content": "done"})


@pytest.mark.parametrize("tool", ["", "   ", "\n"], ids=["empty", "spaces", "newline"])
def test_a_call_without_a_tool_name_is_refused_with_the_tools_listed(tmp_path, db, tool):
    tasks = load_tasks(str(make_task(tmp_path, "no-name"))).tasks
    agent = CallsWithoutAName(tool)
    [o] = run_sync(tasks, agent=agent, db=db, sandbox="local", retries=0).outcomes
    assert (o.kind.value, o.passed) == ("ok", True)
    [(is_error, text)] = agent.told
    assert is_error and text.startswith(NEEDS_A_NAME) and "read" in text and "exec" in text
    with Store(db) as store:
        events = [e for e in store.events(o.rollout_id) if e["kind"] in ("tool_call", "tool_result")]
    call, result = events[0], events[1]
    assert (call["payload"]["tool"], result["payload"]["call"]) == (tool, call["seq"])
    assert result["payload"]["is_error"] is True and result["payload"]["content"] == text


def test_a_served_call_without_a_tool_name_is_refused_with_the_tools_listed(tmp_path, db):
    task = load_task(make_task(tmp_path, "no-name-served"))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv", sandbox="local")) as host:
            async with Client(host.server(), mode="legacy") as c:
                refused = await c.call_tool("", {})
                await c.call_tool("write", {"path": "done.txt", "content": "done"})
                await c.call_tool("finish", {})
        return refused

    refused = anyio.run(main)
    assert refused.is_error and refused.content[0].text.startswith(NEEDS_A_NAME)
    with Store(db) as store:
        (row,) = store.query("SELECT * FROM rollouts")
        results = [e["payload"] for e in store.events(row["id"]) if e["kind"] == "tool_result"]
    assert (row["failure_kind"], row["passed"]) == ("ok", 1)
    assert results[0]["is_error"] and results[0]["content"].startswith(NEEDS_A_NAME)
