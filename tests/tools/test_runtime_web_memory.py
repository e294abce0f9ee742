"""Background processes, web_fetch (offline pages, live behind the allow-list) and memory tools, via MCP."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest
from clawsdk_plugins.sandboxes.local import LocalSandbox
from clawsdk_tools.core import core_server, memory_server, web_server

from clawsdk.sandbox.base import Capabilities
from tests.tools.conftest import connected, task_with, text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its parent counts as gone
            return f.read().split(") ")[1][0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


async def _gone(pid: int) -> bool:
    """SIGKILL is delivered when the process next runs: wait (bounded) for it to be gone."""
    with anyio.move_on_after(5):
        while _alive(pid):
            await anyio.sleep(0.02)
    return not _alive(pid)


def test_background_process_poll_write_and_kill_takes_the_whole_tree():
    async def main():
        async with connected(core_server, task_with()) as (c, sb):
            r = await c.call_tool("exec", {"command": "read line; echo got:$line", "background": True})
            sid = r.structured_content["sessionId"]
            assert r.structured_content["status"] == "running"
            r = await c.call_tool("process", {"action": "write", "sessionId": sid, "data": "hello\n"})
            assert not r.is_error, text(r)
            with anyio.fail_after(10):
                while True:  # poll is the API under test: the agent polls until the process exits
                    r = await c.call_tool("process", {"action": "poll", "sessionId": sid})
                    if r.structured_content["status"] == "exited":
                        break
                    await anyio.sleep(0.05)
            assert r.structured_content["output"] == "got:hello\n" and r.structured_content["exit_code"] == 0

            r = await c.call_tool("process", {"action": "start",
                                              "command": "sleep 300 & echo $! > child.pid; wait"})
            sid2 = r.structured_content["sessionId"]
            with anyio.fail_after(10):
                while not (sb.workspace / "child.pid").exists() or not (sb.workspace / "child.pid").read_text():
                    await anyio.sleep(0.05)
            child = int((sb.workspace / "child.pid").read_text())
            assert _alive(child)
            r = await c.call_tool("process", {"action": "kill", "sessionId": sid2})
            assert r.structured_content["status"] == "killed"
            assert await _gone(child)
            listed = (await c.call_tool("process", {"action": "list"})).structured_content["processes"]
            assert {p["sessionId"]: p["status"] for p in listed} == {sid: "exited", sid2: "killed"}
            r = await c.call_tool("process", {"action": "poll", "sessionId": "nope"})
            assert r.is_error and "no background process" in text(r)

    anyio.run(main)


def test_a_poll_that_says_exited_has_the_whole_output():
    """The status was read after the log: a process that wrote its last line and exited while `tail` ran was
    reported exited with that line missing, and an agent polling until exit never saw it. Here the process is
    fed, writes and ends while the poll's `tail` is running, every time."""
    async def main():
        async with connected(core_server, task_with()) as (c, sb):
            r = await c.call_tool("exec", {"command": "read line; echo got:$line", "background": True})
            sid = r.structured_content["sessionId"]
            real_exec, fed = sb.exec, []

            async def exec_ending_the_process_meanwhile(command, **kw):
                result = await real_exec(command, **kw)
                if command.startswith("tail ") and sid in command and not fed:
                    fed.append(True)
                    await real_exec(f"printf 'hello\\n' > \"${{HOME:-/tmp}}/.clawsdk-proc/{sid}.in\"")
                    with anyio.fail_after(10):  # the output is written, then the process's exec returns
                        while "got:hello" not in (await real_exec(command, **kw)).stdout:
                            await anyio.sleep(0.05)
                    await anyio.sleep(1)
                return result

            sb.exec = exec_ending_the_process_meanwhile
            polls = []
            with anyio.fail_after(30):
                while not polls or polls[-1]["status"] != "exited":
                    polls.append((await c.call_tool("process", {"action": "poll", "sessionId": sid})
                                  ).structured_content)
            sb.exec = real_exec
            assert "".join(p["output"] for p in polls) == "got:hello\n", polls
            assert polls[-1]["output"].endswith("got:hello\n"), polls

    anyio.run(main)


def test_background_processes_end_when_the_server_closes():
    async def main():
        async with connected(core_server, task_with()) as (c, sb):
            await c.call_tool("exec", {"command": "sleep 300 & echo $! > child.pid; wait", "background": True})
            with anyio.fail_after(10):
                while not (sb.workspace / "child.pid").exists() or not (sb.workspace / "child.pid").read_text():
                    await anyio.sleep(0.05)
            child = int((sb.workspace / "child.pid").read_text())
        assert await _gone(child)

    anyio.run(main)


PAGE = "<html><head><title>Opening hours</title><script>track()</script></head><body><h1>Hours</h1>" \
       "<p>Mon-Fri <b>9-17</b>. See <a href='/faq'>FAQ</a>.</p><ul><li>Sat: closed</li></ul></body></html>"


def test_web_fetch_serves_the_pages_a_task_ships_and_is_offline_in_an_isolating_sandbox():
    class Isolated(LocalSandbox):
        capabilities = Capabilities(network_isolated=True)

    async def main():
        task = task_with(tool_config={"web": {"pages": {"https://shop.test/hours": PAGE}}})
        async with connected(web_server, task, Isolated()) as (c, _):
            r = await c.call_tool("web_fetch", {"url": "https://shop.test/hours"})
            page = r.structured_content
            assert page["source"] == "offline" and page["title"] == "Opening hours"
            assert "# Hours" in page["text"] and "[FAQ](/faq)" in page["text"] and "- Sat: closed" in page["text"]
            assert "track()" not in page["text"]
            r = await c.call_tool("web_fetch", {"url": "https://shop.test/hours", "extractMode": "text",
                                                "maxChars": 120})
            assert "#" not in r.structured_content["text"]
            r = await c.call_tool("web_fetch", {"url": "https://example.com/"})
            assert r.is_error and "offline" in text(r) and "https://shop.test/hours" in text(r)

    anyio.run(main)


@contextlib.contextmanager
def local_site():
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = PAGE.encode() if self.path == "/hours" else json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("content-type", "text/html" if self.path == "/hours" else "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()


def test_web_fetch_live_refuses_loopback_unless_allowed_and_honours_the_allow_list():
    async def main():
        with local_site() as site:
            async with connected(web_server, task_with()) as (c, _):
                r = await c.call_tool("web_fetch", {"url": f"{site}/hours"})
                assert r.is_error and "non-public address" in text(r)
            allowed = task_with(tool_config={"web": {"allow": ["127.0.0.1"], "allow_private": True}})
            async with connected(web_server, allowed) as (c, _):
                r = await c.call_tool("web_fetch", {"url": f"{site}/hours"})
                assert r.structured_content["source"] == "live" and "Mon-Fri 9-17" in r.structured_content["text"]
                r = await c.call_tool("web_fetch", {"url": f"{site}/data.json"})
                assert json.loads(r.structured_content["text"]) == {"ok": True}
                r = await c.call_tool("web_fetch", {"url": "http://localhost:1/"})
                assert r.is_error and "may not reach localhost" in text(r)
                r = await c.call_tool("web_fetch", {"url": "file:///etc/passwd"})
                assert r.is_error and "http(s) URL" in text(r)

    anyio.run(main)


MEMORY = "# Preferences\nDana prefers tea over coffee.\nMeetings never before 10am.\n\n" \
         "# Projects\nThe Atlas migration is blocked on the vendor contract.\n"


def test_memory_search_ranks_notes_and_memory_get_reads_only_memory_files():
    async def main():
        files = {"MEMORY.md": MEMORY, "memory/2024-05-02.md": "Called the vendor about Atlas: contract by Friday.\n",
                 "secret.txt": "not memory\n"}
        async with connected(memory_server, task_with(files)) as (c, _):
            r = await c.call_tool("memory_search", {"query": "Atlas vendor contract"})
            hits = r.structured_content["results"]
            assert r.structured_content["searched_files"] == 2
            assert {h["path"] for h in hits[:2]} == {"MEMORY.md", "memory/2024-05-02.md"}
            top = next(h for h in hits if h["path"] == "MEMORY.md")
            assert top["startLine"] == 5 and "Atlas migration" in top["snippet"]
            r = await c.call_tool("memory_search", {"query": "coffee"})
            assert [h["snippet"].splitlines()[1] for h in r.structured_content["results"]] == \
                ["Dana prefers tea over coffee."]
            r = await c.call_tool("memory_get", {"path": "MEMORY.md", "from_line": 2, "lines": 2})
            assert text(r).startswith("Dana prefers tea over coffee.\nMeetings never before 10am.")
            assert "continue with from_line=4" in text(r)
            for bad in ("secret.txt", "../MEMORY.md", "memory/../secret.txt"):
                r = await c.call_tool("memory_get", {"path": bad})
                assert r.is_error, bad

    anyio.run(main)


@pytest.mark.parametrize("policy,expected", [
    (None, {"read", "write", "edit", "apply_patch", "ls", "glob", "grep", "exec", "process", "memory_search",
            "memory_get", "sheet_list", "sheet_read", "sheet_query", "sheet_write", "sheet_update"}),
    ({"profile": "coding", "deny": ["group:runtime"]},
     {"read", "write", "edit", "apply_patch", "ls", "glob", "grep", "memory_search", "memory_get", "sheet_list",
      "sheet_read", "sheet_query", "sheet_write", "sheet_update"}),
    ({"allow": ["read", "SHEET_*"]}, {"read", "sheet_list", "sheet_read", "sheet_query", "sheet_write",
                                      "sheet_update"}),
    ({"profile": "minimal", "allow": ["group:memory"], "deny": ["server:spreadsheets"]},
     {"memory_search", "memory_get"}),
])
def test_tool_policy_selects_tools_like_openclaw(policy, expected):
    from clawsdk.mcp.session import ToolSession
    from clawsdk.plugins import get_registry
    from clawsdk.runtime.rollout import tool_servers
    from clawsdk.store.recorder import Recorder

    async def main():
        task = task_with(tools=["core", "memory", "spreadsheets"], tool_policy=policy)
        async with LocalSandbox() as sb:
            await sb.start(task)
            servers = tool_servers(task, sb, get_registry())
            async with ToolSession.open(servers, Recorder(None, "r"), task.limits, task.tool_policy, sandbox=sb,
                                        task=task) as ts:
                assert {t.name for t in ts.tools()} == expected
                if "exec" not in expected:
                    r = await ts.call("exec", {"command": "true"})
                    assert r.is_error and "unknown tool" in r.text

    anyio.run(main)


def test_unknown_profile_or_group_is_a_clear_task_error():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"tool_policy.profile: unknown profile 'cod'"):
        task_with(tool_policy={"profile": "cod"})
    with pytest.raises(ValidationError, match=r"tool_policy.deny: unknown group 'group:nope'"):
        task_with(tool_policy={"deny": ["group:nope"]})
