"""Cheap agents: work a task's verifier must not reward.

A verifier that gives credit for doing nothing, for wrecking the workspace, or for an empty or copied
file where the deliverable goes inflates every figure read from it: a mean score at once, and a pass
rate once the credit reaches the threshold. `validate_task` (and so `clawsdk tasks validate`, procedural
synthesis and `bench build --validate`) and the synthesis execution gate run these agents through the
real rollout, as any agent runs, and flag a task where one of them

- passes,
- scores more than CHEAP_MARGIN above the untouched workspace, or
- makes the verifier fail to run: a wiped workspace must be scored 0, never `verifier_error`, or an
  agent could turn its failure into "unscored".

Each agent works only through the tools the task offers; one whose tool is not offered does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.tasks.model import Task

#: how much more than the untouched workspace a cheap agent may score
CHEAP_MARGIN = 0.1


class Idle(Agent):
    """Does nothing: the untouched workspace."""

    name = "untouched"

    async def run(self, ctx: AgentContext) -> None:
        return None


def deliverables(task: Task) -> list[str]:
    """The workspace paths a task's deliverables go to, as far as an agent knows them without doing the work:
    those its reference solution writes or edits, and its checks read, that the instruction names (a path
    worked out from the inputs, as a renamed file's, is the work itself)."""
    paths: list[str] = []
    for step in task.solution or []:
        if step.tool in ("write", "edit") and isinstance(step.args.get("path"), str):
            paths.append(step.args["path"])
    for check in task.verifier.checks:
        if isinstance(check.get("path"), str) and check.get("type") != "file_absent":
            paths.append(check["path"])
    out: list[str] = []
    for p in paths:
        norm = PurePosixPath(p)
        if str(norm) not in out and norm.name and norm.name in task.instruction:
            out.append(str(norm))
    return out


class Wipe(Agent):
    """Deletes every file of the workspace (with `exec`), or empties each input file (with `write`)."""

    name = "wipe"
    does = "deletes every file"

    def applies(self, task: Task) -> bool:
        return bool(task.workspace)

    async def run(self, ctx: AgentContext) -> None:
        if "exec" in ctx.tools.specs:
            await ctx.tools.call("exec", {"command": "find . -mindepth 1 -delete"})
        elif "write" in ctx.tools.specs:
            for f in ctx.task.workspace:
                await ctx.tools.call("write", {"path": f.path, "content": ""})


class Empty(Agent):
    """Writes an empty file where each deliverable goes."""

    name = "empty"
    does = "writes an empty file at each deliverable"

    def applies(self, task: Task) -> bool:
        return bool(deliverables(task))

    async def run(self, ctx: AgentContext) -> None:
        for path in deliverables(ctx.task) if "write" in ctx.tools.specs else ():
            await ctx.tools.call("write", {"path": path, "content": ""})


class Copy(Agent):
    """Writes a copy of an input file where each deliverable goes (an input of the same extension where
    there is one): the right file, in the right format, holding nothing worked out."""

    name = "copy"
    does = "writes a copy of an input at each deliverable"

    def applies(self, task: Task) -> bool:
        inputs = {f.path for f in task.workspace if f.text is not None}
        return bool(inputs) and bool(set(deliverables(task)) - inputs)

    async def run(self, ctx: AgentContext) -> None:
        inputs = [f for f in ctx.task.workspace if f.text is not None]
        for path in deliverables(ctx.task) if "write" in ctx.tools.specs else ():
            if any(f.path == path for f in inputs):
                continue
            ext = PurePosixPath(path).suffix
            source = next((f for f in inputs if PurePosixPath(f.path).suffix == ext), inputs[0])
            await ctx.tools.call("write", {"path": path, "content": source.text})


CHEAP = {cls.name: cls for cls in (Wipe, Empty, Copy)}


@dataclass
class Probe:
    agent: str
    score: float | None = None
    passed: bool = False
    error: str | None = None  # the verifier could not score what the agent left

    def problem(self, baseline: float) -> str:
        what = f"the {self.agent!r} agent ({CHEAP[self.agent].does})"
        if self.error:
            return (f"the verifier failed to run after {what}: {self.error}; an agent that does that must be "
                    "scored 0, not left unscored")
        if self.passed:
            return f"{what} passes the verifier (score {self.score:.2f})"
        if self.score is not None and self.score > baseline + CHEAP_MARGIN + 1e-9:
            return (f"{what} scores {self.score:.2f}, more than {CHEAP_MARGIN:g} above the untouched workspace "
                    f"({baseline:.2f}): the verifier gives credit for no work")
        return ""


async def probe_task(task: Task, make_sandbox, registry) -> list[Probe]:
    """Run every cheap agent that has something to do in `task` through a real rollout."""
    from clawsdk.errors import FailureKind
    from clawsdk.runtime.rollout import attempt_rollout
    from clawsdk.store.recorder import Recorder

    probes = []
    for name, cls in CHEAP.items():
        agent = cls()
        if not agent.applies(task):
            continue
        r = await attempt_rollout(task, agent, make_sandbox, Recorder(None, "probe"), registry)
        p = Probe(name)
        if r.verdict is not None and r.kind.scored:
            p.score, p.passed = r.verdict.score, r.verdict.passed
        elif r.kind in (FailureKind.VERIFIER_ERROR, FailureKind.VERIFIER_TIMEOUT):
            p.error = f"{r.kind.value}: {r.error}"
        else:  # the sandbox or the run failed around the agent: nothing to say of the verifier
            continue
        probes.append(p)
    return probes


__all__ = ["CHEAP_MARGIN", "Idle", "Probe", "deliverables", "probe_task"]
