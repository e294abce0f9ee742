"""Validation of a task: the untouched workspace must fail its verifier, the reference solution pass it, and
no cheap agent (clawsdk.runtime.probes) may earn credit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from clawsdk.errors import FailureKind
from clawsdk.plugins import get_registry
from clawsdk.runtime.probes import Idle, Probe, probe_task
from clawsdk.runtime.rollout import attempt_rollout
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Task


@dataclass
class Validation:
    task_id: str
    baseline_score: float | None = None  # the untouched workspace
    baseline_error: str | None = None
    solution_score: float | None = None  # after the reference solution; None when there is none
    solution_error: str | None = None
    has_solution: bool = False
    baseline_passed: bool = False
    solution_passed: bool | None = None
    baseline_max: float | None = None  # verifier.untouched_score_max (ClawGym-style tasks: 0)
    cheap: list[Probe] = field(default_factory=list)  # the cheap agents run (none when cheap=False)

    @property
    def ok(self) -> bool:
        return not self.problem

    @property
    def problem(self) -> str:
        if self.baseline_error:
            return f"verifier failed on the untouched workspace: {self.baseline_error}"
        if self.baseline_max is not None and (self.baseline_score or 0.0) > self.baseline_max + 1e-9:
            return (f"the untouched workspace scores {self.baseline_score:.3f}; this task's verifier must "
                    f"give it at most {self.baseline_max:g}")
        if self.baseline_passed:
            return "the untouched workspace already passes the verifier"
        if self.has_solution and self.solution_error:
            return f"reference solution run failed: {self.solution_error}"
        if self.has_solution and not self.solution_passed:
            return f"the reference solution does not pass (score {self.solution_score:.2f})"
        return next((p for p in (c.problem(self.baseline_score or 0.0) for c in self.cheap) if p), "")


async def validate_task(task: Task, sandbox: str = "auto", config: SandboxConfig | None = None, *,
                        cheap: bool = True) -> Validation:
    """Run the task's verifier after doing nothing, after the reference solution and (`cheap`) after each
    cheap agent; `Validation.problem` says the first thing wrong."""
    registry = get_registry()
    from clawsdk.sandbox.capabilities import choose_sandbox

    sandbox = choose_sandbox(sandbox)
    make = registry.get("sandboxes", sandbox)
    cfg = config or SandboxConfig()
    v = Validation(task_id=task.id, has_solution=bool(task.solution),
                   baseline_max=(task.verifier.model_extra or {}).get("untouched_score_max"))
    base = await attempt_rollout(task, Idle(), lambda: make(cfg), Recorder(None, "validate"), registry)
    if base.kind is FailureKind.OK and base.verdict:
        v.baseline_score, v.baseline_passed = base.verdict.score, base.verdict.passed
    else:
        v.baseline_error = base.error or base.kind.value
    if task.solution:
        from clawsdk.runtime.oracle import OracleAgent

        sol = await attempt_rollout(task, OracleAgent(), lambda: make(cfg), Recorder(None, "validate"), registry)
        if sol.kind is FailureKind.OK and sol.verdict:
            v.solution_score, v.solution_passed = sol.verdict.score, sol.verdict.passed
        else:
            v.solution_error = sol.error or sol.kind.value
    if cheap and not v.problem:
        v.cheap = await probe_task(task, lambda: make(cfg), registry)
    return v


async def validate_tasks(tasks: Sequence[Task], sandbox: str = "auto", concurrency: int = 4,
                         config: SandboxConfig | None = None, *, cheap: bool = True) -> list[Validation]:
    results: dict[int, Validation] = {}
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(i: int, task: Task) -> None:
        async with limiter:
            results[i] = await validate_task(task, sandbox, config, cheap=cheap)

    async with anyio.create_task_group() as tg:
        for i, task in enumerate(tasks):
            tg.start_soon(one, i, task)
    return [results[i] for i in range(len(tasks))]
