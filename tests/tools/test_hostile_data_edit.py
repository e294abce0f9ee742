"""Hostile workspace files against tools that run in the runner's process (on the event loop every rollout
shares): a YAML alias bomb or an oversized YAML file for the data skill, an `edit` whose replace_all would
blow a file up, and a tool answering far more than any agent should read. Each must come back at once as a
clear tool error or a bounded result. Every test has a timeout, so a regression fails instead of hanging."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

import clawsdk_skills
from clawsdk.mcp.session import ToolSession
from clawsdk.mcp.toolkit import MAX_RESULT_CHARS
from clawsdk.runtime.recorder import Recorder
from clawsdk.sandbox.base import MAX_READ_BYTES
from clawsdk.tasks.model import Limits
from clawsdk_skills.data.server import MAX_YAML_BYTES
from clawsdk_tools.core import core_server
from tests.tools.conftest import connected, task_with, text


def bomb(levels: int) -> str:
    """A "billion laughs" YAML: 10 ** levels strings from a few hundred bytes of anchors and aliases."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


# 10 ** 6 strings (plus the lists): past the million values the guard allows, yet small enough that the
# unguarded code answered in about a second instead of hanging, so this test fails rather than stalls
SMALL_BOMB = bomb(6)
# the audit's file: 10 ** 12 strings, 69 s and 5.8 GB in data_get before the guard
AUDIT_BOMB = bomb(12)


@pytest.mark.timeout(60)
def test_data_skill_refuses_a_yaml_alias_bomb_at_once():
    async def main():
        files = {"bomb.yaml": SMALL_BOMB, "self.yaml": "a: &x [1, *x]\n", "ok.yaml": "a: &x [1, 2]\nb: *x\n"}
        async with connected(clawsdk_skills.factory("data"), task_with(files)) as (c, _):
            for tool in ("data_get", "data_keys", "data_set", "data_convert"):
                args = {"path": "bomb.yaml"}
                if tool == "data_set":
                    args |= {"query": "a0[0]", "value": "x"}
                if tool == "data_convert":
                    args = {"src": "bomb.yaml", "dest": "bomb.json"}
                started = time.monotonic()
                with anyio.fail_after(20):
                    r = await c.call_tool(tool, args)
                assert r.is_error, (tool, text(r)[:200])
                assert "bomb.yaml" in text(r) and "aliases (*name) expand to more than 1,000,000 values" in text(r)
                assert time.monotonic() - started < 10
            with anyio.fail_after(20):
                r = await c.call_tool("data_get", {"path": "self.yaml"})
            assert r.is_error and "contains itself" in text(r)
            with anyio.fail_after(20):  # aliases that expand to little are still fine
                r = await c.call_tool("data_get", {"path": "ok.yaml", "query": "b"})
            assert not r.is_error and r.structured_content["matches"][0]["value"] == [1, 2]

    anyio.run(main)


AUDIT_CHILD = """
import resource, sys, time
import anyio
resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
import clawsdk_skills
from tests.tools.conftest import connected, task_with, text

async def main():
    async with connected(clawsdk_skills.factory("data"), task_with({"bomb.yaml": sys.argv[1]})) as (c, _):
        started = time.monotonic()
        r = await c.call_tool("data_get", {"path": "bomb.yaml"})
        print(r.is_error, round(time.monotonic() - started, 1), text(r)[:300])

anyio.run(main)
"""


@pytest.mark.timeout(90)
def test_data_skill_refuses_the_audit_bomb_at_once():
    # in a process of its own, with its memory capped and a deadline: unguarded, this held the event loop
    # 69 s and 5.8 GB, which no in-process timeout could interrupt
    try:
        done = subprocess.run([sys.executable, "-c", AUDIT_CHILD, AUDIT_BOMB], capture_output=True, text=True,
                              timeout=60, cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        pytest.fail("data_get on the audit's alias bomb was still running after 60 s")
    assert done.returncode == 0, done.stderr[-2000:]
    is_error, seconds, message = done.stdout.strip().split(" ", 2)
    assert is_error == "True" and "aliases (*name) expand to more than" in message
    assert float(seconds) < 10


@pytest.mark.timeout(60)
def test_data_skill_refuses_yaml_over_its_size_cap_and_says_what_to_do():
    # one comment line: the unguarded loader got through it in a second or two, then answered
    big = "# " + "x" * (MAX_YAML_BYTES + 1000) + "\na: 1\n"

    async def main():
        async with connected(clawsdk_skills.factory("data"), task_with({"big.yaml": big})) as (c, _):
            with anyio.fail_after(20):
                r = await c.call_tool("data_keys", {"path": "big.yaml"})
            assert r.is_error
            assert "big.yaml is 1.0 MiB" in text(r) and "YAML files of up to 1 MiB" in text(r)
            assert "exec" in text(r)

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
