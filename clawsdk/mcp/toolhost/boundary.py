"""The processes one tool session runs behind its sandbox's boundary (see the package's docstring)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from clawsdk.mcp.toolhost.client import ToolHost
from clawsdk.mcp.toolhost.inside import SPEC_VERSION
from clawsdk.sandbox import toolruntime

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from clawsdk.mcp.session import ToolSession, ToolSource
    from clawsdk.sandbox.base import Sandbox
    from clawsdk.tasks.model import Task

#: what the tool host is told of a task: never its hidden files, its solution or how it is verified
PRIVATE_FIELDS = frozenset({"hidden", "solution", "verifier", "workspace", "provenance"})


def public_task(task: Task) -> dict[str, Any]:
    """The task as the tools inside the sandbox may see it."""
    return task.model_dump(mode="json", exclude=set(PRIVATE_FIELDS))


class Boundary:
    """The processes one tool session runs inside its sandbox: one tool host for every server clawsdk
    imports (started on its first call), and one process per declared stdio server (started at once, to
    list its tools)."""

    def __init__(self, session: ToolSession, sandbox: Sandbox, task: Task | None, tg: TaskGroup):
        self.session = session
        self.sandbox = sandbox
        self.task = task
        self.tg = tg
        self.sources: list[ToolSource] = []
        self._hosted: ToolHost | None = None

    @property
    def inside(self) -> bool:
        """Whether the sandbox shows the runtime at its own paths (an isolating backend) or the host's."""
        return bool(getattr(self.sandbox, "mounts_tool_runtime", False))

    def hosted(self, source: ToolSource) -> ToolHost:
        """The tool host that runs `source`'s tools (one per session, for every server it hosts)."""
        if source not in self.sources:
            if source.ref is None:
                from clawsdk.errors import SandboxError

                raise SandboxError(f"the tools of {source.name!r} must run inside the sandbox, but its server "
                                   "factory cannot be imported there (a closure or a function of __main__): "
                                   "define it at the top level of a module")
            self.sources.append(source)
        if self._hosted is None:
            runtime = toolruntime.current()
            self._hosted = ToolHost(
                "tools", self.sandbox, runtime.module_argv("clawsdk.mcp.toolhost.inside", inside=self.inside),
                env=runtime.env(inside=self.inside), limits=self.session.limits, tg=self.tg, prelude=self._spec)
        return self._hosted

    def _spec(self) -> bytes:
        runtime = toolruntime.current()
        task = self.task
        if task is None:
            from clawsdk.tasks.model import Task

            task = Task(id="tools", instruction="(no task)")
        spec = {
            "version": SPEC_VERSION,
            "workspace": self.sandbox.workspace_path,
            "home": self._home(),
            "capabilities": dataclasses.asdict(self.sandbox.capabilities),
            "servers": [{"name": s.name, **s.ref.spec(runtime, inside=self.inside)}
                        for s in self.sources if s.ref is not None],
            "task": public_task(task),
            "output_chars": self.session.limits.tool_output_chars,
            "memory_mb": self.session.limits.tool_memory_mb,
        }
        return (json.dumps(spec, ensure_ascii=False) + "\n").encode("utf-8")

    def _home(self) -> str | None:
        visible = getattr(self.sandbox, "visible_home", None)
        try:
            return visible() if visible is not None else None
        except (AssertionError, AttributeError):
            return None

    def command_host(self, source: ToolSource) -> ToolHost:
        """A process for a declared stdio MCP server (`{python}`: the runner's interpreter and packages;
        `{skill_dir}`: the skill's folder as the sandbox shows it)."""
        assert source.command is not None
        runtime = toolruntime.current()
        argv: list[str] = []
        env = dict(source.command.env)
        skill_dir = runtime.skill_dir(source.skill, inside=self.inside) if source.skill else None
        for arg in source.command.command:
            if arg == "{python}":
                python, python_env = runtime.python_argv(inside=self.inside)
                argv += python
                env = python_env | env
            else:
                argv.append(arg.replace("{skill_dir}", skill_dir) if skill_dir else arg)
        return ToolHost(source.name, self.sandbox, argv, env=env, limits=self.session.limits, tg=self.tg)
