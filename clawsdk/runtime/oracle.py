"""The oracle agent: it runs a task's reference solution (`Task.solution`) through the tools.

Part of the task contract, not a plugin's: validation, the synthesis execution gate and the
flakiness check all need "the workspace after the reference solution", and its trajectory is
recorded like any other agent's. The built-in agents plugin registers it as `oracle`.
"""

from __future__ import annotations

from collections.abc import Sequence

from clawsdk.errors import AgentError
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.tasks.model import Task


class OracleAgent(Agent):
    """Executes the reference solution through the tools, so its trajectory is recorded like any other."""

    name = "oracle"

    def preflight(self, tasks: Sequence[Task], sandbox: str) -> None:
        """Refuse, before any rollout, tasks without a reference solution: run, each would end agent_error
        with the untouched workspace's score, a zero that is the missing solution's and not an agent's.
        All of them are refused, not only those: a run that left some out would not be the run asked for."""
        bare = [t.id for t in tasks if not t.solution]
        if bare:
            shown = ", ".join(bare[:5]) + (f" and {len(bare) - 5} more" if len(bare) > 5 else "")
            raise ValueError(f"the oracle agent runs a task's reference solution, and {len(bare)} of {len(tasks)} "
                             f"task(s) have no reference solution ({shown}): run them with another agent "
                             "(--agent tool-loop, openclaw...), or give them a `solution`")

    async def run(self, ctx: AgentContext) -> None:
        if not ctx.task.solution:
            raise AgentError(f"task {ctx.task.id} has no reference solution")
        for call in ctx.task.solution:
            await ctx.tools.call(call.tool, call.args)


__all__ = ["OracleAgent"]
