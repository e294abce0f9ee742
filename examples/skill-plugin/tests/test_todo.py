"""The example skill's tests: clawsdk's conformance kit, and the tools doing their job through MCP."""

from __future__ import annotations

import anyio
from clawsdk_skill_todo import server
from mcp import Client

from clawsdk.sandbox.base import SandboxPlugin
from clawsdk.tasks.model import File, Task
from clawsdk.testing.skills import assert_skill_conforms


def test_the_skill_passes_the_conformance_kit():
    report = assert_skill_conforms(server)
    assert report.tools == ["todo_list", "todo_add", "todo_done"]


def test_add_list_and_complete():
    task = Task(id="todo", instruction="-", workspace=[File(path="todo.txt", text="Water plants\n")])

    async def main():
        async with SandboxPlugin.named("local")() as sb:  # the registered backend, whoever provides it
            await sb.start(task)
            async with Client(server(sb, task)) as c:
                r = await c.call_tool("todo_add", {"text": "Call the bank", "priority": "A", "due": "2024-05-03"})
                assert r.structured_content["number"] == 2
                listed = (await c.call_tool("todo_list", {})).structured_content["result"]
                assert [i["text"] for i in listed] == ["(A) Call the bank due:2024-05-03", "Water plants"]
                await c.call_tool("todo_done", {"number": 1})
                r = await c.call_tool("todo_done", {"number": 1})
                assert r.is_error and "already done" in r.content[0].text
                assert (sb.workspace / "todo.txt").read_text().startswith("x ")

    anyio.run(main)
