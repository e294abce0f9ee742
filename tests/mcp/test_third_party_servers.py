"""Any MCP server as a tool source, and a skill as an MCP server of its own.

- A task's `mcp_servers` (a stdio server in the standard library alone, run by the sandbox's python3) and a
  skill pack that declares its own server (tests/fixtures/skills/notes: written with the official MCP SDK,
  run by `{python}`), used by the oracle inside bwrap, docker and local: every call recorded, the workspace
  scored.
- `clawsdk skills serve NAME` over stdio and over HTTP (loopback, a bearer token), with the plain MCP client.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from mcp import Client, StdioServerParameters

from clawsdk import Store, run_sync
from clawsdk.plugins import reset_registry
from clawsdk.tasks.model import Task
from tests.conftest import FIXTURES
from tests.sandbox.sandbox_backends import skip_unless_available

CLAWSDK = str(Path(sys.executable).with_name("clawsdk"))
ICS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\nSUMMARY:standup\r\n"
       "DTSTART:20240501T090000Z\r\nDTEND:20240501T091500Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


@pytest.fixture
def fixture_skills(monkeypatch):
    monkeypatch.setenv("CLAWSDK_SKILLS_PATH", str(FIXTURES / "skills"))
    reset_registry()
    yield
    reset_registry()


def servers_task() -> Task:
    shout = (FIXTURES / "mcp_servers" / "stdlib_server.py").read_text()
    return Task.model_validate({
        "id": "third-party", "instruction": "Note the errand and shout the greeting.", "tools": ["core", "notes"],
        "mcp_servers": {"shout": {"command": ["python3", "-c", shout]}},
        "workspace": [{"path": "greeting.txt", "text": "hello there\n"}],
        "solution": [{"tool": "note_add", "args": {"text": "buy milk"}},
                     {"tool": "shout", "args": {"path": "greeting.txt"}}],
        "verifier": {"checks": [{"type": "text_contains", "path": "notes.md", "text": "buy milk"},
                                {"type": "text_contains", "path": "SHOUT.txt", "text": "HELLO THERE"}]}})


@pytest.mark.parametrize("backend", ["bwrap", "docker", "local"])
def test_declared_mcp_servers_run_inside_are_recorded_and_scored(backend, fixture_skills, tmp_path):
    skip_unless_available(backend)
    [o] = run_sync([servers_task()], agent="oracle", sandbox=backend, db=tmp_path / "s.db", retries=0).outcomes
    assert o.kind.value == "ok" and o.reward == 1.0, o.error
    with Store(tmp_path / "s.db") as store:
        events = store.events(o.rollout_id)
    calls = [e["payload"]["tool"] for e in events if e["kind"] == "tool_call"]
    results = [(e["payload"]["tool"], e["payload"]["is_error"], e["payload"]["content"])
               for e in events if e["kind"] == "tool_result"]
    assert calls == ["note_add", "shout"]
    assert results[0][:2] == ("note_add", False) and "noted (1 notes)" in results[0][2]
    assert results[1] == ("shout", False, "wrote SHOUT.txt (12 characters)")


def test_a_task_server_that_cannot_start_is_the_sandboxs_failure_not_the_agents(tmp_path):
    """A command that is not there: no rollout can have its tools, so unscored (and said), never a 0."""
    task = Task.model_validate(servers_task().model_dump() | {
        "tools": ["core"], "mcp_servers": {"shout": {"command": ["no-such-mcp-server"]}},
        "solution": [{"tool": "ls", "args": {}}]})
    [o] = run_sync([task], agent="oracle", sandbox="local", db=tmp_path / "s.db", retries=0).outcomes
    assert o.kind.value == "sandbox_error" and o.reward is None
    assert "the shout tool server could not start" in o.error and "no-such-mcp-server" in o.error


def test_skills_serve_over_stdio(tmp_path):
    (tmp_path / "cal.ics").write_text(ICS)

    async def main():
        with anyio.fail_after(60):
            params = StdioServerParameters(command=CLAWSDK, args=["skills", "serve", "calendar", "-w", str(tmp_path)])
            async with Client(params) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert "calendar_events" in names and client.instructions.startswith("# Skill: calendar")
                got = await client.call_tool("calendar_events", {"path": "cal.ics"})
                assert not got.is_error and got.structured_content["events"][0]["summary"] == "standup"
                out = await client.call_tool("calendar_events", {"path": "../cal.ics"})
                assert out.is_error and "leaves the workspace" in out.content[0].text

    anyio.run(main)


def test_skills_serve_over_http_needs_its_token(tmp_path):
    (tmp_path / "cal.ics").write_text(ICS)
    proc = subprocess.Popen([CLAWSDK, "skills", "serve", "calendar", "-w", str(tmp_path), "--http"],
                            stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        seen = ""
        while "bearer token" not in seen:
            line = proc.stderr.readline()
            assert line, f"the server ended before it was ready: {seen}"
            seen += line
        url = re.search(r"at (http://127\.0\.0\.1:\d+/mcp)", seen).group(1)
        token = re.search(r"bearer token \(shown once\): (\S+)", seen).group(1)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            assert httpx.post(url, headers=headers, json=ping).status_code == 401

        async def main():
            from mcp.client.streamable_http import streamable_http_client

            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    got = await client.call_tool("calendar_events", {"path": "cal.ics"})
                    assert not got.is_error and "standup" in got.content[0].text

        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
