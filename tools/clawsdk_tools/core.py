"""The core workspace tools as MCP servers bound to a sandbox, named and shaped like OpenClaw's tool groups.

- `core`: fs (read, write, edit, apply_patch, ls, glob, grep) and runtime (exec, process)
- `web`: web_fetch (pages the task ships; live fetches behind an allow-list)
- `memory`: memory_search, memory_get over MEMORY.md and memory/*.md
- `openclaw`: all of the above in one server
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawsdk.mcp.toolkit import ToolServer
from clawsdk_tools.files import MAX_GREP_FILE, MAX_MATCHES, MAX_READ_CHARS, add_fs_tools, glob_to_regex
from clawsdk_tools.memory import add_memory_tools
from clawsdk_tools.runtime import ProcessManager, add_runtime_tools, process_lifespan
from clawsdk_tools.web import add_web_tools

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox
    from clawsdk.tasks.model import Task

__all__ = ["core_server", "web_server", "memory_server", "openclaw_server", "glob_to_regex",
           "MAX_READ_CHARS", "MAX_GREP_FILE", "MAX_MATCHES"]

#: the core tools that run in the runner: they move bytes through the sandbox's race-proof file API or run
#: commands (and grep's matcher) through its exec, and parse nothing the agent wrote. memory_search and
#: memory_get read the agent's notes, so they run behind the boundary (docs/sandboxes.md, "Where tools run").
HOST_TOOLS = frozenset({"read", "write", "edit", "apply_patch", "ls", "glob", "grep", "exec", "process",
                        "web_fetch"})

CORE_INSTRUCTIONS = ("Tools that act on the task's workspace. Paths are relative to it; a path that leaves it "
                     "is refused. exec runs bash in the workspace; long-running commands go in the background "
                     "(exec background=true, then process poll/kill).")


def _lifetime(task: Task | None) -> float:
    return task.limits.timeout_s if task else 600.0


def _tool_time(task: Task | None) -> float:
    return task.limits.tool_timeout_s if task else 60.0


def core_server(sandbox: Sandbox, task: Task | None = None) -> ToolServer:
    """The `core` tool server: files and commands in `sandbox`'s workspace."""
    procs = ProcessManager(sandbox, _lifetime(task))
    server = ToolServer("core", instructions=CORE_INSTRUCTIONS, lifespan=process_lifespan(procs),
                        host_tools=HOST_TOOLS)
    add_fs_tools(server, sandbox, _tool_time(task))
    add_runtime_tools(server, sandbox, task, procs)
    return server


def web_server(sandbox: Sandbox, task: Task | None = None) -> ToolServer:
    """The `web` tool server: web_fetch."""
    server = ToolServer("web", instructions="web_fetch reads a web page as text. Cite the URL you used.",
                        host_tools=HOST_TOOLS)
    add_web_tools(server, sandbox, task)
    return server


def memory_server(sandbox: Sandbox, task: Task | None = None) -> ToolServer:
    """The `memory` tool server: memory_search and memory_get."""
    server = ToolServer("memory", instructions="Your long-term notes are MEMORY.md and memory/*.md in the "
                       "workspace. Search them with memory_search before answering questions about past work.")
    add_memory_tools(server, sandbox)
    return server


def openclaw_server(sandbox: Sandbox, task: Task | None = None) -> ToolServer:
    """Every core tool group in one server."""
    procs = ProcessManager(sandbox, _lifetime(task))
    server = ToolServer("openclaw", instructions=CORE_INSTRUCTIONS, lifespan=process_lifespan(procs),
                        host_tools=HOST_TOOLS)
    add_fs_tools(server, sandbox, _tool_time(task))
    add_runtime_tools(server, sandbox, task, procs)
    add_web_tools(server, sandbox, task)
    add_memory_tools(server, sandbox)
    return server
