"""Hostile workspace files against the data skill and the core `edit`, and a tool answering far more than any
agent should read.

The data skill runs behind the sandbox's boundary (tests/skills/boundary.py): a YAML alias bomb is no longer
counted and refused by the skill, it costs the tool host's process, stopped at the tool time limit or its
memory limit, and the agent reads which. `edit` and the result cap run in the runner: each must come back at
once as a clear tool error or a bounded result. Every test has a timeout, so a regression fails instead of
hanging."""

from __future__ import annotations

import anyio
import clawsdk_skills
import pytest
from clawsdk_tools.core import core_server
from mcp.server.mcpserver import MCPServer

from clawsdk.mcp.session import ToolSession
from clawsdk.mcp.toolkit import MAX_RESULT_CHARS
from clawsdk.sandbox.base import MAX_READ_BYTES
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Limits
from tests.skills.boundary import behind_boundary, boundary_task, stopped_at_its_limit, timed
from tests.tools.conftest import connected, task_with, text


def bomb(levels: int) -> str:
    """A "billion laughs" YAML: 10 ** levels strings from a few hundred bytes of anchors and aliases."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


# the audit's file: 10 ** 12 strings from 634 bytes, 69 s and 5.8 GB in data_get when it ran in the runner
AUDIT_BOMB = bomb(12)


@pytest.mark.timeout(60)
def test_data_skill_refuses_a_document_that_contains_itself_and_reads_shared_parts():
    """A part that holds itself has no JSON form (correctness, refused); aliases that merely share are read."""
    async def main():
        files = {"self.yaml": "a: &x [1, *x]\n", "ok.yaml": "a: &x [1, 2]\nb: *x\n", "bomb.yaml": bomb(6)}
        async with connected(clawsdk_skills.factory("data"), task_with(files)) as (c, _):
            for tool, args in (("data_get", {"path": "self.yaml"}), ("data_keys", {"path": "self.yaml"}),
                               ("data_convert", {"src": "self.yaml", "dest": "self.json"})):
                with anyio.fail_after(20):
                    r = await c.call_tool(tool, args)
                assert r.is_error and "self.yaml: a part of it contains itself" in text(r), (tool, text(r))
            with anyio.fail_after(20):
                r = await c.call_tool("data_get", {"path": "ok.yaml", "query": "b"})
            assert not r.is_error and r.structured_content["matches"][0]["value"] == [1, 2]
            with anyio.fail_after(20):  # a million values through aliases: no longer refused by counting
                r = await c.call_tool("data_get", {"path": "bomb.yaml", "query": "a1[0]"})
            assert not r.is_error and r.structured_content["matches"][0]["value"] == ["lol"] * 10, text(r)[:300]

    anyio.run(main)


@pytest.mark.timeout(120)
def test_a_yaml_alias_bomb_costs_the_tool_host_not_the_run():
    """The audit's bomb: what only its shape needs (its keys, a small part, an edit, which YAML writes with its
    aliases) answers; writing it all out is stopped at the tool time limit or the tool's memory limit, the agent
    reads which, and the next call works."""
    task = boundary_task(["data"], {"bomb.yaml": AUDIT_BOMB, "ok.yaml": "a: &x [1, 2]\nb: *x\n"},
                         tool_timeout_s=5, tool_memory_mb=512)

    async def main():
        async with behind_boundary(task) as (session, sb):
            r = await session.call("data_keys", {"path": "bomb.yaml"})
            assert not r.is_error and r.structured["result"][0]["keys"] == [f"a{i}" for i in range(12)], r.text
            r = await session.call("data_get", {"path": "bomb.yaml", "query": "a1[9][0]"})
            assert not r.is_error and r.structured["matches"] == [{"path": "$.a1[9][0]", "value": "lol"}], r.text
            for tool, args in (("data_get", {"path": "bomb.yaml"}),
                               ("data_convert", {"src": "bomb.yaml", "dest": "bomb.json"})):
                r, took = await timed(session, tool, args)
                stopped_at_its_limit(r, took, task, tool)
            r = await session.call("data_set", {"path": "bomb.yaml", "query": "a0[0]", "value": "x"})
            assert not r.is_error and r.text == "set 1 value(s) in bomb.yaml: $.a0[0]", r.text
            assert (sb.workspace / "bomb.yaml").stat().st_size < 10_000
            r = await session.call("data_get", {"path": "ok.yaml", "query": "b"})
            assert not r.is_error and r.structured["matches"][0]["value"] == [1, 2], r.text

    anyio.run(main)


@pytest.mark.timeout(60)
def test_data_skill_reads_yaml_past_the_megabyte_it_once_refused():
    # one comment line over 1 MiB, then a key: parsed as any YAML (PyYAML gets through it in a second or two)
    big = "# " + "x" * (2**20 + 1000) + "\na: 1\n"

    async def main():
        async with connected(clawsdk_skills.factory("data"), task_with({"big.yaml": big})) as (c, _):
            with anyio.fail_after(20):
                r = await c.call_tool("data_keys", {"path": "big.yaml"})
            assert not r.is_error, text(r)[:300]
            assert r.structured_content["result"][0]["keys"] == ["a"], text(r)[:300]

    anyio.run(main)


@pytest.mark.timeout(60)
def test_edit_refuses_a_replace_all_that_would_pass_the_file_cap_and_leaves_the_file():
    body = "a" * (1024 * 1024)  # 1 MiB of 'a'; each 'a' becoming 20 characters makes 20 MiB

    async def main():
        async with connected(core_server, task_with({"a.txt": body, "small.txt": "a-b-a\n"})) as (c, sb):
            with anyio.fail_after(20):
                r = await c.call_tool("edit", {"path": "a.txt", "old_text": "a", "new_text": "b" * 20,
                                               "replace_all": True})
            assert r.is_error
            assert "would make a.txt 20.0 MiB" in text(r) and f"{MAX_READ_BYTES / 2**20:g} MiB" in text(r)
            assert "nothing was changed" in text(r)
            assert (sb.workspace / "a.txt").read_text() == body
            with anyio.fail_after(20):  # an ordinary replace_all is untouched
                r = await c.call_tool("edit", {"path": "small.txt", "old_text": "a", "new_text": "xyz",
                                               "replace_all": True})
            assert not r.is_error and (sb.workspace / "small.txt").read_text() == "xyz-b-xyz\n"

    anyio.run(main)


def _big_answer_server() -> MCPServer:
    srv = MCPServer("big")

    @srv.tool()
    async def dump(n: int) -> str:
        """Answer n characters."""
        return "x" * n

    @srv.tool()
    async def rows(n: int) -> dict:
        """Answer n rows as structured content."""
        return {"rows": ["r" * 100] * n}

    return srv


@pytest.mark.timeout(60)
def test_a_tool_result_is_cut_to_the_documented_cap_for_the_agent_and_the_store():
    async def main():
        recorder = Recorder(None, "r")
        async with ToolSession.open([("big", _big_answer_server())], recorder, Limits()) as session:
            with anyio.fail_after(30):
                huge = await session.call("dump", {"n": 3 * MAX_RESULT_CHARS})
                table = await session.call("rows", {"n": 30_000})  # about 3.2 MB, text and structured
                small = await session.call("dump", {"n": 10})
        return recorder, huge, table, small

    recorder, huge, table, small = anyio.run(main)
    kept = MAX_RESULT_CHARS - 200  # the note counts toward the cap
    for result in (huge, table):
        assert len(result.text) <= MAX_RESULT_CHARS and result.structured is None
        assert f"[tool result cut: showing {kept:,} of" in result.text
    assert huge.text.startswith("x" * 1000) and f"{3 * MAX_RESULT_CHARS - kept:,} left out" in huge.text
    assert small.text == "x" * 10 and not small.is_error
    recorded = [e["payload"] for e in recorder.transcript() if e["kind"] == "tool_result"]
    assert [p["content"] for p in recorded] == [huge.text, table.text, small.text]
    assert all("structured" not in p for p in recorded[:2])
