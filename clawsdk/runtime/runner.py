"""The runner: k samples of each task, concurrently, recorded, resumable.

- Concurrency: an anyio task group; named capacity limits for sandboxes and verifiers.
- Infrastructure failures (model, sandbox, verifier) are retried with backoff and, if they
  keep failing, recorded as unscored: never as the agent's zero.
- Resume: a rerun with the same run id skips rollouts that finished; one interrupted in
  flight starts again as a new attempt (its old events stay, under the old attempt number).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import secrets
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from clawsdk.errors import ClawError, FailureKind, TaskFormatError
from clawsdk.plugins import get_registry
from clawsdk.runtime.agent import Agent
from clawsdk.runtime.recorder import Recorder
from clawsdk.runtime.executor import Executor, RolloutJob
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.sandbox.capabilities import check_tasks, default_sandbox
from clawsdk.store.store import Store, default_db_path
from clawsdk.store.writer import StoreWriter
from clawsdk.tasks.model import Task

log = logging.getLogger(__name__)


def rollout_id(run_id: str, task_id: str, sample: int) -> str:
    digest = hashlib.sha256(f"{run_id}\x00{task_id}\x00{sample}".encode()).hexdigest()
    return "r" + digest[:15]


def new_run_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclass
class RolloutOutcome:
    rollout_id: str
    task_id: str
    sample: int
    kind: FailureKind
    reward: float | None
    passed: bool | None
    error: str | None
    duration_s: float
    attempts: int
    category: str | None = None


@dataclass
class RunResult:
    run_id: str
    db: Path
    outcomes: list[RolloutOutcome] = field(default_factory=list)
    skipped: int = 0  # finished before this invocation (resume)
    task_errors: list[TaskFormatError] = field(default_factory=list)
    interrupted: bool = False


class RunConflict(ClawError):
    """A rerun whose tasks or settings differ from the run it would resume."""


def _load_agent(agent: str | Agent, options: dict[str, Any]) -> Agent:
    if isinstance(agent, Agent):
        return agent
    return get_registry().get("agents", agent)(**options)


async def run(
    tasks: Sequence[Task],
    *,
    agent: str | Agent = "oracle",
    agent_options: dict[str, Any] | None = None,
    sandbox: str = "auto",
    sandbox_config: SandboxConfig | None = None,
    samples: int = 1,
    concurrency: int = 8,
    run_id: str | None = None,
    db: str | os.PathLike | None = None,
    retries: int = 2,
    backoff_s: float = 0.5,
    task_errors: Sequence[TaskFormatError] = (),
    on_rollout: Callable[[RolloutOutcome], None] | None = None,
    handle_signals: bool = False,
    executor: str | Executor = "local",
    executor_options: dict[str, Any] | None = None,
) -> RunResult:
    """Run `samples` rollouts of every task and record them in the store at `db`.

    `sandbox="auto"` is bwrap where bubblewrap works, else local (no isolation).
    """
    if samples < 1 or concurrency < 1:
        raise ValueError("samples and concurrency must be at least 1")
    registry = get_registry()
    the_agent = _load_agent(agent, agent_options or {})
    cfg = sandbox_config or SandboxConfig()
    if sandbox == "auto":
        sandbox = default_sandbox()
    # fail now, not in every rollout: an unknown backend, or tasks that need what it cannot give
    check_tasks(tasks, registry.get("sandboxes", sandbox)(cfg).capabilities, sandbox)
    if isinstance(executor, str):
        options = dict(executor_options or {})
        if executor == "local":
            options.setdefault("verifier_concurrency", concurrency)
        executor = registry.get("executors", executor)(**options)
    run_id = run_id or new_run_id()
    db_path = Path(db) if db is not None else default_db_path()
    result = RunResult(run_id=run_id, db=db_path, task_errors=list(task_errors))
    agent_name = getattr(the_agent, "name", type(the_agent).__name__)

    plan, attempts = _plan(db_path, run_id, tasks, samples, agent_name, sandbox, result)
    by_category = {t.id: t.category for t in tasks}
    sandbox_slots = anyio.CapacityLimiter(concurrency)
    agent_by_name = agent if isinstance(agent, str) else None

    async with StoreWriter(db_path) as writer, executor:
        await writer.put("upsert_run", run_id=run_id, status="running", agent=agent_name, sandbox=sandbox,
                         samples=samples, config={"agent": agent_name, "agent_options": agent_options or {},
                                                  "sandbox": sandbox, "samples": samples,
                                                  "concurrency": concurrency, "retries": retries})
        for task in {t.hash: t for t in tasks}.values():
            await writer.put("upsert_task", task=task)
        for err in task_errors:
            await writer.put("record_task_error", run_id=run_id, path=err.path, field=err.field,
                             task_id=err.task_id, message=err.message)

        async def one(task: Task, sample: int) -> None:
            rid = rollout_id(run_id, task.id, sample)
            attempt = attempts.get(rid, -1)
            async with sandbox_slots:
                for retry in range(retries + 1):
                    attempt += 1
                    await writer.put("start_rollout", rollout_id=rid, run_id=run_id, task_id=task.id,
                                     task_hash=task.hash, sample=sample, attempt=attempt, agent=agent_name,
                                     model=getattr(the_agent, "model", None))
                    recorder = Recorder(writer, rid, attempt, keep=True)

                    async def cancelled() -> None:
                        with anyio.CancelScope(shield=True):
                            await writer.put("finish_rollout", rollout_id=rid, attempt=attempt,
                                             status="cancelled", failure_kind=FailureKind.CANCELLED.value,
                                             scored=False, reward=None, passed=None, error="run cancelled",
                                             n_tool_calls=recorder.n_tool_calls,
                                             n_model_calls=recorder.n_model_calls, duration_s=0.0)

                    try:
                        job = RolloutJob(task=task, agent=the_agent, agent_name=agent_by_name,
                                         agent_options=agent_options or {}, sandbox=sandbox, sandbox_config=cfg,
                                         rollout_id=rid, attempt=attempt)
                        res = await executor.attempt(job, recorder)
                    except BaseException:  # cancelled (maybe inside an exception group): not finished
                        await cancelled()
                        raise
                    last = retry == retries or not res.kind.retryable
                    verdict = res.verdict
                    with anyio.CancelScope(shield=True):  # the attempt is over: its ending must land
                        await writer.put(
                            "finish_rollout", rollout_id=rid, attempt=attempt,
                            status="finished" if last else "retrying", failure_kind=res.kind.value,
                            scored=res.kind.scored, reward=verdict.score if verdict and res.kind.scored else None,
                            passed=verdict.passed if verdict and res.kind.scored else None, error=res.error,
                            n_tool_calls=res.n_tool_calls, n_model_calls=res.n_model_calls,
                            duration_s=res.duration_s,
                            verdict=verdict.model_dump(mode="json") if verdict else None,
                        )
                    if last:
                        break
                    log.info("rollout %s: %s, retrying (%d/%d)", rid, res.kind.value, retry + 1, retries)
                    try:
                        await anyio.sleep(backoff_s * (2**retry))
                    except BaseException:
                        await cancelled()
                        raise
            outcome = RolloutOutcome(
                rollout_id=rid, task_id=task.id, sample=sample, kind=res.kind,
                reward=verdict.score if verdict and res.kind.scored else None,
                passed=verdict.passed if verdict and res.kind.scored else None,
                error=res.error, duration_s=res.duration_s, attempts=retry + 1,
                category=by_category.get(task.id),
            )
            result.outcomes.append(outcome)
            if on_rollout is not None:
                on_rollout(outcome)

        try:
            async with anyio.create_task_group() as outer:
                if handle_signals:
                    outer.start_soon(_cancel_on_signal, outer.cancel_scope, result)
                async with anyio.create_task_group() as rollouts:
                    for task, sample in plan:
                        rollouts.start_soon(one, task, sample)
                outer.cancel_scope.cancel()  # all done: stop watching for signals
        finally:
            with anyio.CancelScope(shield=True):
                await writer.put("set_run_status", run_id=run_id,
                                 status="interrupted" if result.interrupted else "finished")
    return result


async def _cancel_on_signal(scope: anyio.CancelScope, result: RunResult) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            result.interrupted = True
            scope.cancel()
            return


def _plan(db_path: Path, run_id: str, tasks: Sequence[Task], samples: int, agent: str, sandbox: str,
          result: RunResult) -> tuple[list[tuple[Task, int]], dict[str, int]]:
    """What is left to do for this run id, and the last attempt number of each rollout."""
    with Store(db_path) as store:
        existing = store.run(run_id)
        if existing and (existing["agent"], existing["sandbox"]) != (agent, sandbox):
            raise RunConflict(
                f"run {run_id} was started with agent {existing['agent']!r} on sandbox {existing['sandbox']!r}; "
                f"resume it with the same, or choose a new --run-id"
            )
        rows = store.query("SELECT id, task_id, task_hash, status, failure_kind, attempt FROM rollouts "
                           "WHERE run_id = ?", [run_id])
    known = {r["id"]: r for r in rows}
    plan: list[tuple[Task, int]] = []
    attempts: dict[str, int] = {}
    for task in tasks:
        for sample in range(samples):
            rid = rollout_id(run_id, task.id, sample)
            row = known.get(rid)
            if row is None:
                plan.append((task, sample))
                continue
            if row["task_hash"] != task.hash:
                raise RunConflict(
                    f"task {task.id!r} changed since run {run_id} started (hash {row['task_hash'][:12]} -> "
                    f"{task.hash[:12]}); choose a new --run-id to run the new version"
                )
            attempts[rid] = row["attempt"]
            if row["status"] == "finished":
                result.skipped += 1
            else:
                plan.append((task, sample))
    return plan, attempts


def run_sync(tasks: Sequence[Task], **kwargs: Any) -> RunResult:
    """`run` from synchronous code."""
    return anyio.run(lambda: run(tasks, **kwargs))
