"""The `replay` agent: makes a stored rollout's tool calls again, in order, in a fresh sandbox.

For reproducing a rollout and debugging a verifier: the replayed workspace is what the
original agent left (as far as the tools are deterministic), scored by the task's verifier
as it is now. Where a result differs from the recorded one, a note says so.

    clawsdk run examples/tasks/eml-contacts --agent replay --agent-opt rollout=r1a2b3
    clawsdk run examples/tasks --agent replay --agent-opt run=demo     # each task's rollout of run demo
"""

from __future__ import annotations

from clawsdk.data.trajectory import tool_calls_answered
from clawsdk.errors import AgentError
from clawsdk.hookspecs import hookimpl
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.store.events import Note, StoredEvent
from clawsdk.store.store import Store, default_db_path


class ReplayAgent(Agent):
    """Options: rollout=ID (or a unique prefix) or run=RUN_ID (the rollout of the same task, sample
    `sample`); db=PATH (default: the store); attempt=N (default: the rollout's last);
    stop_on_divergence=true to fail when a result differs from the recorded one."""

    name = "replay"

    def __init__(self, rollout: str | None = None, run: str | None = None, db: str | None = None,
                 attempt: int | None = None, sample: int = 0, stop_on_divergence: bool = False):
        if (rollout is None) == (run is None):
            raise ValueError("the replay agent needs exactly one of --agent-opt rollout=ID or --agent-opt run=RUN_ID")
        self.rollout_ref = str(rollout) if rollout is not None else None
        self.run_ref = str(run) if run is not None else None
        self.db = db or str(default_db_path())
        self.attempt = attempt
        self.sample = int(sample)
        self.stop_on_divergence = stop_on_divergence
        with Store(self.db, readonly=True) as store:  # fail now, with the reason, not once per rollout
            if self.rollout_ref is not None:
                row = store.rollout(self.rollout_ref)
                if row is None:
                    raise ValueError(f"no rollout {self.rollout_ref!r} in {self.db}")
                self.rollout_ref = row["id"]
            elif self.run_ref is not None and store.run(self.run_ref) is None:
                raise ValueError(f"no run {self.run_ref!r} in {self.db}")

    def _source(self, task_id: str) -> tuple[dict, list[StoredEvent]]:
        with Store(self.db, readonly=True) as store:
            if self.rollout_ref is not None:
                row = store.rollout(self.rollout_ref)
                if row is None:  # deleted since the agent was made
                    raise AgentError(f"no rollout {self.rollout_ref!r} in {self.db}")
            else:
                rows = store.query("SELECT * FROM rollouts WHERE run_id = ? AND task_id = ? AND sample = ?",
                                   [self.run_ref, task_id, self.sample])
                if not rows:
                    raise AgentError(f"run {self.run_ref} has no rollout of task {task_id!r} (sample {self.sample})")
                row = rows[0]
            if row["task_id"] != task_id:
                raise AgentError(f"rollout {row['id']} is of task {row['task_id']!r}, not {task_id!r}; "
                                 f"run the replay on that task")
            return row, store.events(row["id"], self.attempt)

    async def run(self, ctx: AgentContext) -> None:
        row, events = self._source(ctx.task.id)
        calls = tool_calls_answered(events)
        await ctx.recorder.record(Note(event="replay", extra={
            "rollout": row["id"], "attempt": row["attempt"] if self.attempt is None else self.attempt,
            "tool_calls": len(calls)}))
        for i, (call, recorded) in enumerate(calls):
            result = await ctx.tools.call(call.tool, call.args or {})
            if recorded is not None and (result.text != recorded.content or result.is_error != recorded.is_error):
                await ctx.recorder.record(Note(event="replay_divergence", extra={
                    "call": i, "tool": call.tool, "recorded": recorded.content, "replayed": result.text}))
                if self.stop_on_divergence:
                    raise AgentError(f"replayed call {i} ({call.tool}) gave a different result than recorded")


@hookimpl
def register_agents(register):
    register("replay", ReplayAgent)
