"""Tools behind the sandbox's boundary: where they run, what the kernel bounds, what they are told.

Through a real tool session (the one every agent uses) on a real sandbox of each backend, with the probe
skill (tests/fixtures/skills/probe: a folder skill whose tools report where they run and misbehave on
purpose) and the notes skill (a stdio MCP server written with the official SDK, declared in its SKILL.md).
"""

from __future__ import annotations

import json
import os
import time

import anyio
import pytest

from clawsdk.mcp.session import ToolSession
from clawsdk.plugins import get_registry, reset_registry
from clawsdk.runtime.rollout import tool_servers
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import File, Task
from tests.conftest import FIXTURES, REPO
from tests.sandbox.sandbox_backends import skip_unless_available

BACKENDS = ["local", "bwrap", "docker"]
SECRET = "the-hidden-answer-41f3"


@pytest.fixture(autouse=True)
def fixture_skills(monkeypatch):
    monkeypatch.setenv("CLAWSDK_SKILLS_PATH", str(FIXTURES / "skills"))
    reset_registry()
    yield
    reset_registry()


def probe_task(**limits) -> Task:
    return Task(id="probe", instruction="probe the tools", tools=["core", "probe", "notes"],
                workspace=[File(path="a.txt", text="hello\n")], hidden=[File(path="answer.txt", text=SECRET)],
                solution=[{"tool": "write", "args": {"path": "answer.txt", "content": SECRET}}],
                limits={"tool_timeout_s": 4, **limits})


async def session_on(backend: str, task: Task, body) -> None:
    registry = get_registry()
    sandbox = registry.get("sandboxes", backend)()
    await sandbox.start(task)
    try:
        async with ToolSession.open(tool_servers(task, sandbox, registry), Recorder(None, "probe"), task.limits,
                                    sandbox=sandbox, task=task) as session:
            await body(session)
    finally:
        await sandbox.close()


def info(result) -> dict:
    assert not result.is_error, result.text
    return json.loads(result.text)


@pytest.mark.parametrize("backend", BACKENDS)
def test_skill_tools_run_in_a_process_of_their_own_inside_the_sandbox(backend):
    skip_unless_available(backend)

    async def body(session: ToolSession) -> None:
        where = {s.name: s.host is not None for s in session.tools()}
        assert not where["read"] and not where["exec"] and not where["grep"]  # the byte-level tools stay here
        assert where["whoami"] and where["note_add"]
        seen = info(await session.call("whoami", {"path": str(REPO / "README.md")}))
        assert seen["pid"] != os.getpid() or backend != "local"
        if backend != "local":
            assert seen["uid"] == 1000 and seen["network"] is False
            assert seen["cwd"] == "/root/.openclaw/workspace" == seen["workspace"]
            # the runner's files are not there: only the runtime's packages are mounted, not the checkout
            assert seen["readable"] is False
        again = info(await session.call("whoami", {}))
        assert again["boot"] == seen["boot"]  # one process serves the session's calls
        assert not (await session.call("note_add", {"text": "from the notes server"})).is_error
        listed = await session.call("note_list", {})
        assert "from the notes server" in listed.text
        assert (await session.call("read", {"path": "notes.md"})).text.strip() == "from the notes server"

    anyio.run(session_on, backend, probe_task(), body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tool_past_its_time_is_stopped_and_the_next_call_starts_afresh(backend):
    skip_unless_available(backend)

    async def body(session: ToolSession) -> None:
        first = info(await session.call("whoami", {}))["boot"]
        started = time.monotonic()
        hung = await session.call("spin", {"seconds": 60})
        took = time.monotonic() - started
        assert hung.is_error and "did not answer within 4 s" in hung.text, hung.text
        assert took < 4 + 2, took
        after = info(await session.call("whoami", {}))
        assert after["boot"] != first  # a new process
        assert not (await session.call("spin", {"seconds": 0.1})).is_error

    anyio.run(session_on, backend, probe_task(), body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_output_and_crashes_are_the_tools_errors_not_the_runners(backend):
    skip_unless_available(backend)

    async def body(session: ToolSession) -> None:
        big = await session.call("allocate", {"mb": 2048})
        assert big.is_error and "ran out of memory (its limit is 512 MiB)" in big.text, big.text
        assert not (await session.call("allocate", {"mb": 16})).is_error  # the same process goes on
        flood = await session.call("flood", {"chars": 3_000_000})
        assert not flood.is_error and "[tool result cut: showing 1,048,376 of 3,000,000 characters" in flood.text
        assert len(flood.text) <= 1024 * 1024
        crashed = await session.call("crash", {})
        assert crashed.is_error and "its tool server stopped" in crashed.text and "exited with 3" in crashed.text
        assert not (await session.call("whoami", {})).is_error

    anyio.run(session_on, backend, probe_task(tool_memory_mb=512), body)


@pytest.mark.parametrize("backend", ["local", "bwrap"])
def test_the_tools_are_never_told_the_hidden_files_solution_or_verifier(backend):
    skip_unless_available(backend)

    async def body(session: ToolSession) -> None:
        seen = (await session.call("task_seen", {})).text
        assert SECRET not in seen
        told = json.loads(seen)
        assert told["id"] == "probe" and told["hidden"] == [] and told["solution"] is None
        assert told["verifier"]["checks"] == []

    anyio.run(session_on, backend, probe_task(), body)


def test_a_server_answering_past_what_the_runner_reads_is_stopped():
    """A third-party server's result is not cut inside (clawsdk does not run its code): a line past 4 x
    tool_output_chars (+64 KiB) is never read whole; the process is stopped, and the next call starts it."""
    async def body(session: ToolSession) -> None:
        flood = await session.call("note_flood", {"chars": 200_000})
        assert flood.is_error and "answered more than the runner reads of one result (73,728 bytes)" in flood.text
        assert not (await session.call("note_add", {"text": "still here"})).is_error

    anyio.run(session_on, "local", probe_task(tool_output_chars=2048), body)


def test_a_skill_whose_factory_cannot_be_imported_inside_is_refused_before_the_run(tmp_path):
    """A closure (here, a plugin registered at run time) could never run its tools inside the sandbox: the
    task is refused at the start, naming the skill and what to do, instead of every rollout ending unscored."""
    from clawsdk import run_sync
    from clawsdk.hookspecs import hookimpl
    from clawsdk.mcp.toolkit import ToolServer
    from clawsdk.plugins import register_plugin

    def make(sandbox, task=None):
        server = ToolServer("closure")

        @server.tool()
        async def parse(path: str) -> str:
            """Parse a file."""
            return "parsed"

        return server

    class Plugin:
        @hookimpl
        def register_skills(self, register):
            register("closure-skill", make)

    register_plugin(Plugin(), "closure-plugin")
    task = Task(id="closure", instruction="use it", tools=["core", "closure-skill"],
                solution=[{"tool": "parse", "args": {"path": "a.txt"}}])
    result = run_sync([task], agent="oracle", sandbox="local", db=tmp_path / "c.db", retries=0)
    assert result.outcomes == []
    [error] = result.task_errors
    assert "skill 'closure-skill': its tools (parse) run inside the sandbox" in str(error)
    assert "define it at the top level of a module" in str(error)
