"""The core tool server, driven through a real in-process MCP client."""

import json
import os
import subprocess
import sys

import anyio
from clawsdk_plugins.sandboxes.local import LocalSandbox
from clawsdk_tools.core import core_server, glob_to_regex
from mcp import Client

from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task

TASK = Task(id="t", instruction="x", workspace=[
    File(path="src/app.py", text="def add(a, b):\n    return a - b\n"),
    File(path="src/util.py", text="X = 1\nY = 2\n"),
    File(path="notes.md", text="\n".join(f"line {i}" for i in range(1, 101)) + "\n"),
    File(path="blob.bin", b64="AAECAw=="),
])


def drive(fn):
    async def main():
        sb = LocalSandbox(SandboxConfig())
        await sb.start(TASK)
        try:
            with anyio.fail_after(30):
                async with Client(core_server(sb, TASK)) as client:
                    return await fn(client, sb)
        finally:
            await sb.close()

    return anyio.run(main)


def text(result):
    return "\n".join(c.text for c in result.content)


def test_lists_the_openclaw_style_tools_with_schemas():
    async def body(client, sb):
        return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    tools = drive(body)
    assert {"read", "write", "edit", "ls", "glob", "grep", "exec"} <= set(tools)
    assert tools["read"]["required"] == ["path"]


def test_read_with_offset_and_limit_says_what_is_left():
    async def body(client, sb):
        return text(await client.call_tool("read", {"path": "notes.md", "offset": 10, "limit": 3}))

    out = drive(body)
    assert out.startswith("line 10\nline 11\nline 12\n") and "88 more lines; read with offset=13" in out


def test_write_edit_and_exec_change_the_workspace():
    async def body(client, sb):
        await client.call_tool("edit", {"path": "src/app.py", "old_text": "a - b", "new_text": "a + b"})
        await client.call_tool("write", {"path": "out/new.txt", "content": "fresh"})
        r = await client.call_tool("exec", {"command": "python3 -c 'from src.app import add; print(add(2, 3))'"})
        return json.loads(text(r)), (await sb.read("out/new.txt"))

    r, new = drive(body)
    assert r["exit_code"] == 0 and r["stdout"].strip() == "5" and new == b"fresh"


def test_edit_refuses_ambiguous_or_missing_text():
    async def body(client, sb):
        amb = await client.call_tool("edit", {"path": "notes.md", "old_text": "line 1", "new_text": "x"})
        missing = await client.call_tool("edit", {"path": "notes.md", "old_text": "nope", "new_text": "x"})
        return amb, missing

    amb, missing = drive(body)
    assert amb.is_error and "occurs" in text(amb)
    assert missing.is_error and "not found" in text(missing)


def test_glob_and_grep():
    async def body(client, sb):
        g = text(await client.call_tool("glob", {"pattern": "**/*.py"}))
        gr = text(await client.call_tool("grep", {"pattern": "^Y =", "path": "src"}))
        one = text(await client.call_tool("grep", {"pattern": "return", "path": "src/app.py"}))
        return g, gr, one

    g, gr, one = drive(body)
    assert g.splitlines() == ["src/app.py", "src/util.py"]
    assert gr == "src/util.py:2:Y = 2"
    assert one == "src/app.py:2:    return a - b"


def test_grep_with_a_pattern_that_backtracks_without_end_is_stopped_and_the_loop_stays_free():
    """(a+)+$ against a line of a's and one '!' never ends; it held the tool server's event loop, which is
    the runner's: every other rollout of the run stopped with it. The matcher runs inside the sandbox now,
    killed at the task's tool time limit."""
    from tests.conftest import loop_ticks

    task = TASK.model_copy(update={"limits": TASK.limits.model_copy(update={"tool_timeout_s": 2.0})})

    async def main():
        sb = LocalSandbox(SandboxConfig())
        await sb.start(task)
        try:
            async with Client(core_server(sb, task)) as client:
                await client.call_tool("write", {"path": "r.txt", "content": "a" * 40 + "!\n"})
                async with loop_ticks() as ticks:
                    started = anyio.current_time()
                    bad = await client.call_tool("grep", {"pattern": "(a+)+$", "path": "."})
                    took = anyio.current_time() - started
                    good = await client.call_tool("grep", {"pattern": "a!$"})
                return bad, took, good, ticks
        finally:
            await sb.close()

    bad, took, good, ticks = anyio.run(main)
    assert bad.is_error and "still matching after 2 s" in text(bad), text(bad)
    assert 2.0 <= took < 10, took
    assert len(ticks) >= 20, f"the event loop ran {len(ticks)} times in {took:.1f} s: grep blocked it"
    assert text(good) == "r.txt:1:" + "a" * 40 + "!"


def test_paths_outside_the_workspace_are_tool_errors():
    async def body(client, sb):
        os.symlink("/etc", os.path.join(sb.workspace, "out"))
        results = []
        for tool, args in [("read", {"path": "../../etc/passwd"}), ("read", {"path": "/etc/passwd"}),
                           ("read", {"path": "out/passwd"}), ("write", {"path": "out/evil", "content": "x"}),
                           ("ls", {"path": ".."}), ("edit", {"path": "out/hosts", "old_text": "a", "new_text": "b"}),
                           ("read", {"path": "blob.bin"}), ("read", {"path": "missing.txt"})]:
            results.append(await client.call_tool(tool, args))
        return results

    results = drive(body)
    assert all(r.is_error for r in results)
    messages = [text(r) for r in results]
    assert "leaves the workspace" in messages[0] and "absolute path" in messages[1]
    assert "outside the workspace" in messages[2] and "binary file" in messages[6] and "no such file" in messages[7]


def test_exec_timeout_is_reported_not_raised():
    async def body(client, sb):
        return json.loads(text(await client.call_tool("exec", {"command": "sleep 20", "timeout": 0.5})))

    r = drive(body)
    assert r["timed_out"] and r["exit_code"] == 124


def test_glob_semantics():
    rx = glob_to_regex("**/*.py")
    assert rx.match("a.py") and rx.match("x/y/a.py") and not rx.match("a.pyc")
    assert not glob_to_regex("*.py").match("x/a.py")


def test_tool_servers_of_different_sandboxes_stay_bound_to_their_own():
    """Tool metadata is shared between servers; the functions (and so the sandbox) are not."""

    async def main():
        a, b = LocalSandbox(SandboxConfig()), LocalSandbox(SandboxConfig())
        await a.start(TASK)
        await b.start(TASK)
        try:
            async with Client(core_server(a, TASK)) as ca, Client(core_server(b, TASK)) as cb:
                await ca.call_tool("write", {"path": "who.txt", "content": "a"})
                await cb.call_tool("write", {"path": "who.txt", "content": "b"})
            return await a.read("who.txt"), await b.read("who.txt")
        finally:
            await a.close()
            await b.close()

    assert anyio.run(main) == (b"a", b"b")


QUIET_SCRIPT = """
import logging, anyio
from mcp import Client
from clawsdk.tasks.model import Task
from clawsdk_plugins.sandboxes.local import LocalSandbox
from clawsdk_tools.core import core_server

async def main():
    task = Task(id="t", instruction="x")
    async with LocalSandbox() as sb:
        await sb.start(task)
        async with Client(core_server(sb, task)) as client:
            result = await client.call_tool("ls", {"path": "missing"})
    print(result.is_error, logging.getLevelName(logging.getLogger().level))

anyio.run(main)
"""


def test_a_script_that_configured_no_logging_prints_nothing_when_a_tool_call_fails():
    # the MCP SDK's server constructor calls logging.basicConfig at INFO unless told otherwise, which
    # printed every tool call an agent got wrong (hundreds in a learning run) and turned the process up to INFO
    done = subprocess.run([sys.executable, "-c", QUIET_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "WARNING"]
    assert "failed" not in done.stderr and "missing" not in done.stderr, done.stderr
