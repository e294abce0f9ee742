"""The agent contract: a policy that works a task through its tool session."""

from __future__ import annotations

import abc
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from clawsdk.mcp.session import ToolSession
    from clawsdk.sandbox.base import Sandbox
    from clawsdk.store.recorder import Recorder
    from clawsdk.tasks.model import Task


@dataclass
class AgentContext:
    """What an agent gets: the task (its instruction; only the oracle reads its solution),
    the recorded tool session, and the recorder for its model calls."""

    task: Task
    tools: ToolSession
    recorder: Recorder
    #: the rollout's sandbox, for agents that run a program in it (the harness agent)
    sandbox: Sandbox | None = None

    @property
    def instruction(self) -> str:
        return self.task.instruction

    def time_left(self) -> float | None:
        """Seconds the agent has left (time the run spent paused is given back), or None outside a rollout's
        agent phase."""
        import anyio

        scope = getattr(self.recorder, "agent_scope", None)
        return None if scope is None else scope.deadline - anyio.current_time()


class Agent(abc.ABC):
    name: str = "agent"
    #: the model id recorded on each rollout, if the agent uses one
    model: str | None = None
    #: seconds added to the task's time limit for the agent's own start-up (a CLI agent's Node runtime)
    startup_allowance_s: float = 0.0

    @abc.abstractmethod
    async def run(self, ctx: AgentContext) -> None:
        """Work the task. Raise AgentError (or any error) to fail; ModelError for backend failures."""

    def preflight(self, tasks: Sequence[Task], sandbox: str) -> Awaitable[None] | None:
        """Raise ValueError, before any rollout or store write, when this agent cannot work these tasks on
        this sandbox at all (the oracle without solutions, a CLI agent on a sandbox it cannot run in): one clear
        error, not the same failure in every rollout. It may be a coroutine (an agent that asks its model server
        once). The default accepts everything."""

    def sandbox_options(self, sandbox: str) -> dict[str, Any]:
        """Options (SandboxConfig.extra) this agent needs on the run's sandboxes, added to the user's: a CLI
        agent's install bound in read-only (`ro_binds`). The default asks for nothing."""
        return {}
