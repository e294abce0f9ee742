"""The oracle agent: it runs a task's reference solution (`Task.solution`) through the tools.

Part of the task contract, not a plugin's: validation, the synthesis execution gate and the
flakiness check all need "the workspace after the reference solution", and its trajectory is
recorded like any other agent's. The built-in agents plugin registers it as `oracle`.
"""

from __future__ import annotations

from clawsdk.errors import AgentError
from clawsdk.runtime.agent import Agent, AgentContext


class OracleAgent(Agent):
    """Executes the reference solution through the tools, so its trajectory is recorded like any other."""

    name = "oracle"

    async def run(self, ctx: AgentContext) -> None:
        if not ctx.task.solution:
            raise AgentError(f"task {ctx.task.id} has no reference solution")
        for call in ctx.task.solution:
            await ctx.tools.call(call.tool, call.args)


__all__ = ["OracleAgent"]
