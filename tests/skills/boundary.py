"""Skill tools called the way a rollout calls them: through a real tool session, behind the sandbox's boundary.

The skills no longer bound what they parse themselves (bytes per call, alias counts, unpacked sizes, PDF
content): what a hostile file costs is bounded by the tool host's process inside the sandbox, killed at
`limits.tool_timeout_s` and with its address space capped at `limits.tool_memory_mb`. These helpers open a
ToolSession on a real local sandbox (its tool host a child process with rlimits, as tests/mcp/test_toolhost.py
does) so that a test sees what the agent sees.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from clawsdk.mcp.session import ToolResult, ToolSession
from clawsdk.plugins import get_registry
from clawsdk.runtime.rollout import tool_servers
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import File, Task

#: how long past the tool time limit a stopped call may take to come back (the kill and the answer)
SLACK_S = 2.0


def boundary_task(tools: list[str], files: dict[str, str | bytes] | None = None, **limits: Any) -> Task:
    """A task with these skills, these workspace files and these limits (the tool time limit 4 s unless given)."""
    workspace = [File.from_bytes(p, d) if isinstance(d, bytes) else File(path=p, text=d)
                 for p, d in (files or {}).items()]
    return Task(id="skills-boundary", instruction="use the skills", tools=tools, workspace=workspace,
                limits={"tool_timeout_s": 4, **limits})


@contextlib.asynccontextmanager
async def behind_boundary(task: Task) -> AsyncIterator[tuple[ToolSession, Any]]:
    """(the tool session, the local sandbox) of `task`: its skill tools run in a tool host inside the sandbox."""
    registry = get_registry()
    sandbox = registry.get("sandboxes", "local")()
    await sandbox.start(task)
    try:
        async with ToolSession.open(tool_servers(task, sandbox, registry), Recorder(None, "skills-boundary"),
                                    task.limits, sandbox=sandbox, task=task) as session:
            yield session, sandbox
    finally:
        await sandbox.close()


async def timed(session: ToolSession, tool: str, args: dict[str, Any]) -> tuple[ToolResult, float]:
    """The tool's result and how many seconds the call took. The tool host is started first: starting it has a
    budget of its own (a second or two, more on a loaded machine), and the tool's time limit is the tool's."""
    host = next(t.host for t in session.tools() if t.name == tool)
    if host is not None:
        await host.start()
    started = time.monotonic()
    result = await session.call(tool, args)
    return result, time.monotonic() - started


def stopped_at_its_limit(result: ToolResult, took: float, task: Task, tool: str) -> str:
    """Assert that the call came back within the tool time limit (+SLACK_S) as a tool error saying that it ran
    out of time or memory; which one, "timeout" or "memory"."""
    limits = task.limits
    assert took < limits.tool_timeout_s + SLACK_S, f"{tool} took {took:.1f} s: {result.text[:300]}"
    assert result.is_error, f"{tool} answered: {result.text[:300]}"
    if f"{tool} did not answer within {limits.tool_timeout_s:g} s (the task's tool time limit)" in result.text:
        return "timeout"
    assert f"ran out of memory (its limit is {limits.tool_memory_mb} MiB)" in result.text, result.text[:500]
    return "memory"
