"""Built-in agents: `oracle` runs the task's reference solution, `scripted` a given list of tool calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawsdk.errors import AgentError
from clawsdk.hookspecs import hookimpl
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.oracle import OracleAgent
from clawsdk.tasks.model import Task, ToolCall


class ScriptedAgent(Agent):
    """Makes a fixed list of tool calls, or the calls a function returns for each task."""

    name = "scripted"

    def __init__(self, calls: list[ToolCall | dict] | Callable[[Task], list[ToolCall | dict]] | None = None,
                 script: str | None = None, stop_on_error: bool = False):
        if script is not None:
            from clawsdk.errors import TaskFormatError
            from clawsdk.tasks.reading import parse_yaml, read_text

            path = Path(script)
            try:  # a file like any task file: bounded in size and nesting, no fifo, no alias bomb
                loaded = parse_yaml(read_text(path.parent, path.name), str(path))
            except TaskFormatError as e:
                raise ValueError(f"the scripted agent's script: {e}") from None
            if not isinstance(loaded, list):
                raise ValueError(f"{script}: a scripted agent's script is a YAML list of {{tool, args}}")
            calls = loaded
        self.calls = calls or []
        self.stop_on_error = stop_on_error

    async def run(self, ctx: AgentContext) -> None:
        calls = self.calls(ctx.task) if callable(self.calls) else self.calls
        for raw in calls:
            call = raw if isinstance(raw, ToolCall) else ToolCall.model_validate(raw)
            result = await ctx.tools.call(call.tool, call.args)
            if result.is_error and self.stop_on_error:
                raise AgentError(f"tool {call.tool} failed: {result.text[:500]}")


def _oracle(**options: Any) -> OracleAgent:
    if options:
        raise ValueError(f"the oracle agent takes no options (got {sorted(options)})")
    return OracleAgent()


@hookimpl
def register_agents(register):
    register("oracle", _oracle)
    register("scripted", ScriptedAgent)
