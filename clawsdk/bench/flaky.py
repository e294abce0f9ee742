"""Flaky verifiers: the same final workspace scored more than once must get the same score.

Two ways to find them:

- re-verification: work the task once (its reference solution, or nothing when it has none),
  then run the verifier N times on that same final workspace, restoring the workspace's files
  before each pass in case the verifier changed them, and asking a rubric judge afresh each time
  (not from its cache); scores that differ, or a verifier that fails on some passes only, mark
  the task flaky;
- repeated deterministic runs already in the store (the oracle run with k samples): the
  same actions must leave the same workspace, so scores that differ between samples mark it,
  and so does a verifier that failed (verifier_error, verifier_timeout) on some attempts and scored
  others: every attempt counts, those the runner retried included, since the rollout row keeps only
  the last one and a verifier that crashes every other call ends scored after one retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from clawsdk.errors import RolloutError
from clawsdk.mcp.session import ToolSession
from clawsdk.plugins import get_registry
from clawsdk.runtime.agent import AgentContext
from clawsdk.runtime.rollout import tool_servers, verify
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store
from clawsdk.tasks.model import Task
from clawsdk.verify.rubric import fresh_judgements

TOLERANCE = 1e-6


@dataclass
class Reverification:
    task_id: str
    task_hash: str
    scores: list[float | None] = field(default_factory=list)  # None: the verifier failed that pass
    errors: list[str] = field(default_factory=list)
    setup_error: str | None = None  # the workspace could not be produced

    @property
    def flaky(self) -> bool:
        got = [s for s in self.scores if s is not None]
        if got and len(got) < len(self.scores):
            return True  # fails on some passes only
        return bool(got) and max(got) - min(got) > TOLERANCE

    @property
    def broken(self) -> bool:
        """The verifier never scored this workspace: a validation failure, not flakiness."""
        return self.setup_error is not None or not any(s is not None for s in self.scores)

    @property
    def detail(self) -> str:
        if self.setup_error:
            return self.setup_error
        shown = ", ".join("error" if s is None else f"{s:.4g}" for s in self.scores)
        return f"scores on the same workspace: {shown}" + (f" ({self.errors[0]})" if self.errors else "")


async def reverify_task(task: Task, passes: int = 3, sandbox: str = "auto",
                        config: SandboxConfig | None = None) -> Reverification:
    """Produce the task's final workspace once and verify it `passes` times."""
    from clawsdk.runtime.oracle import OracleAgent
    from clawsdk.sandbox.capabilities import choose_sandbox

    sandbox = choose_sandbox(sandbox)
    registry = get_registry()
    make = registry.get("sandboxes", sandbox)
    result = Reverification(task_id=task.id, task_hash=task.hash)
    box = make(config or SandboxConfig())
    recorder = Recorder(None, f"reverify-{task.id}")
    try:
        try:
            await box.start(task)
            if task.solution:
                async with ToolSession.open(tool_servers(task, box, registry), recorder, task.limits, sandbox=box,
                                            task=task) as tools:
                    with anyio.fail_after(task.limits.timeout_s):
                        await OracleAgent().run(AgentContext(task=task, tools=tools, recorder=recorder))
            snapshot = {e.path: await box.read(e.path) for e in await box.list(".", recursive=True) if not e.is_dir}
        except Exception as e:  # reported per task
            result.setup_error = f"could not produce the final workspace: {type(e).__name__}: {e}"
            return result
        for _ in range(passes):
            for path, data in snapshot.items():
                await box.write(path, data)
            try:
                with fresh_judgements():  # a cached judge answer would hide a flaky judge
                    verdict = await verify(task, box, recorder, registry)
                result.scores.append(verdict.score)
            except RolloutError as e:
                result.scores.append(None)
                result.errors.append(str(e))
    finally:
        with anyio.CancelScope(shield=True):
            await box.close()
    return result


async def reverify_tasks(tasks: Sequence[Task], passes: int = 3, sandbox: str = "auto", concurrency: int = 4,
                         config: SandboxConfig | None = None) -> list[Reverification]:
    out: dict[int, Reverification] = {}
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(i: int, task: Task) -> None:
        async with limiter:
            out[i] = await reverify_task(task, passes, sandbox, config)

    async with anyio.create_task_group() as tg:
        for i, t in enumerate(tasks):
            tg.start_soon(one, i, t)
    return [out[i] for i in range(len(tasks))]


VERIFIER_FAILURES = ("verifier_error", "verifier_timeout")


def flaky_in_runs(store: Store, run_ids: Sequence[str]) -> dict[str, str]:
    """task hash -> why, for tasks whose repeated deterministic samples scored differently, or whose verifier
    failed on some attempts (retried ones included) and scored others."""
    from clawsdk.bench.results import attempt_endings

    out: dict[str, str] = {}
    for run_id in run_ids:
        if store.run(run_id) is None:
            raise LookupError(f"no reference run {run_id!r} in {store.path}")
        rows = store.query("SELECT id, task_hash, task_id, scored, reward, failure_kind, attempt "
                           "FROM rollouts WHERE run_id = ? AND status = 'finished' ORDER BY sample", [run_id])
        earlier = attempt_endings(store, run_id)  # how the attempts before each kept one ended
        by_task: dict[str, list[dict]] = {}
        for r in rows:
            by_task.setdefault(r["task_hash"], []).append(r)
        for h, rs in by_task.items():
            rewards = [r["reward"] for r in rs if r["scored"] and r["reward"] is not None]
            endings = [k for r in rs for k in [*earlier.get(r["id"], []), r["failure_kind"]]]
            verifier_fail = [k for k in endings if k in VERIFIER_FAILURES]
            if rewards and max(rewards) - min(rewards) > TOLERANCE:
                out[h] = (f"run {run_id}: the same actions scored " + ", ".join(f"{x:.4g}" for x in rewards))
            elif rewards and verifier_fail:
                # a verifier that never scores is broken, not flaky (validation says so); one that fails on
                # some attempts only is flaky, even where a retry then scored every sample
                kinds = ", ".join(sorted(set(verifier_fail)))
                out[h] = (f"run {run_id}: the verifier failed on {len(verifier_fail)} of {len(endings)} "
                          f"attempts of {len(rs)} identical samples ({kinds}; retried attempts included)")
    return out
