"""The runner: k samples of each task, concurrently, recorded, resumable.

- Concurrency: an anyio task group; named capacity limits for sandboxes and verifiers.
- Infrastructure failures (model, sandbox, verifier) are retried with backoff and, if they
  keep failing, recorded as unscored: never as the agent's zero.
- Resume: a rerun with the same run id skips rollouts that finished; one interrupted in
  flight starts again as a new attempt (its old events stay, under the old attempt number).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import inspect
import json
import logging
import os
import re
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from clawsdk._text import short
from clawsdk.errors import ClawError, FailureKind, TaskFormatError
from clawsdk.plugins import Registry, get_registry
from clawsdk.runtime.agent import Agent
from clawsdk.runtime.concurrency import (
    AUTO,
    DEFAULT_CEILING,
    Controller,
    HostSampler,
    Slots,
    WorkQueue,
    fd_ceiling,
    listen_model_status,
    parse_concurrency,
    vllm_queue_probe,
)
from clawsdk.runtime.control import ControlError, Steering, serve_control, socket_path
from clawsdk.runtime.executor import Executor, LocalExecutor, RolloutJob
from clawsdk.runtime.ids import new_run_id, rollout_id
from clawsdk.runtime.rollout import first_leaf, record_cancelled, record_ending, record_start
from clawsdk.sandbox.base import SandboxConfig, SandboxPlugin
from clawsdk.sandbox.capabilities import check_tasks, choose_sandbox, release_idle, runnable
from clawsdk.sandbox.hostdir import check_root, workspace_root
from clawsdk.store.lifecycle import RunLifecycle
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store, default_db_path, dumps
from clawsdk.tasks.model import Task, category_label

log = logging.getLogger(__name__)


@dataclass(slots=True)  # one per rollout, kept to the end of the run
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
    retried: int = 0  # left unscored by an earlier invocation and run again (retry_unscored)
    task_errors: list[TaskFormatError] = field(default_factory=list)
    interrupted: bool = False
    cancelled_by: str | None = None  # who cancelled it through its control channel


class RunConflict(ClawError):
    """A rerun whose tasks or settings differ from the run it would resume."""


class DuplicateTaskId(ClawError):
    """Two tasks of one run share an id."""


class RunFailed(ClawError):
    """The runner could not go on (the store refused a write, a bug): the run ended `failed`, settled."""

    def __init__(self, message: str, *, run_id: str, result: RunResult):
        super().__init__(message)
        self.run_id = run_id
        self.result = result


def _load_agent(agent: str | Agent, options: dict[str, Any]) -> Agent:
    if isinstance(agent, Agent):
        return agent
    built = _build(get_registry().get("agents", agent), options, f"agent {agent!r}", "--agent-opt")
    if not isinstance(built, Agent):  # the agent contract is the base class: its optional parts have defaults
        raise TypeError(f"agent {agent!r}: its factory made a {type(built).__name__}, not a clawsdk.Agent; "
                        "subclass clawsdk.Agent (docs/plugins.md)")
    return built


def _build(factory: Callable[..., Any], options: dict[str, Any], what: str, flag: str) -> Any:
    """`factory(**options)`, where options a factory does not take are the user's mistake, said as such."""
    try:
        return factory(**options)
    except TypeError as e:
        raise ValueError(f"{flag}: {what} does not accept these options "
                         f"({', '.join(sorted(options)) or 'none'}): {e}") from e


def with_agent_options(cfg: SandboxConfig, agent: Agent, sandbox: str) -> SandboxConfig:
    """`cfg` with what the agent asks of its sandboxes (`Agent.sandbox_options`) added to its options; lists
    (`ro_binds`) are joined, and an option the user set is kept."""
    asked = agent.sandbox_options(sandbox)
    if not asked:
        return cfg
    extra = dict(cfg.extra or {})
    for key, value in asked.items():
        if isinstance(value, list):
            have = extra.get(key) or []
            have = [have] if isinstance(have, str) else list(have)
            extra[key] = have + [v for v in value if v not in have]
        else:
            extra.setdefault(key, value)
    return dataclasses.replace(cfg, extra=extra)


@dataclass(frozen=True)
class RunOptions:
    """How a run goes: the agent and its options, the sandbox backend, how many samples, how many rollouts at
    once, retries, the executor, the control channel. `run(tasks, RunOptions(...))`, or its fields as keywords
    (`run(tasks, agent="oracle", samples=3)`). Rerunning a run id with other options than it was recorded with
    is refused (RunConflict); `concurrency`, `retries` and the control channel may change."""

    agent: str | Agent = "oracle"
    agent_options: dict[str, Any] | None = None
    #: "auto" is bwrap where bubblewrap works, else local (no isolation)
    sandbox: str = "auto"
    sandbox_config: SandboxConfig | None = None
    samples: int = 1
    #: "auto": the controller (clawsdk/runtime/concurrency.py) finds the level, up to `max_concurrency`;
    #: a number fixes it
    concurrency: int | str = "auto"
    max_concurrency: int | None = None
    retries: int = 2
    backoff_s: float = 0.5
    executor: str | Executor = "local"
    executor_options: dict[str, Any] | None = None
    #: a resume also runs again the samples an earlier invocation left unscored (as a next attempt)
    retry_unscored: bool = False
    #: listen on the run's control channel (clawsdk/runtime/control.py: `clawsdk ctl`, the TUI)
    control: bool = True
    #: SIGINT/SIGTERM end the run `interrupted`, its rollouts in flight `cancelled`
    handle_signals: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "concurrency", parse_concurrency(self.concurrency))
        if self.samples < 1:
            raise ValueError("samples must be at least 1")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")

    @property
    def auto(self) -> bool:
        return self.concurrency == AUTO

    @classmethod
    def of(cls, options: RunOptions | None, fields: dict[str, Any]) -> RunOptions:
        """`options` with `fields` replaced; a field RunOptions has not is the caller's mistake, named."""
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"run() got unknown option(s) {', '.join(unknown)}; RunOptions has "
                            f"{', '.join(f.name for f in dataclasses.fields(cls))}")
        return dataclasses.replace(options or cls(), **fields)


async def run(tasks: Sequence[Task], options: RunOptions | None = None, *, run_id: str | None = None,
              db: str | os.PathLike | None = None, task_errors: Sequence[TaskFormatError] = (),
              on_rollout: Callable[[RolloutOutcome], None] | None = None, **fields: Any) -> RunResult:
    """Run `samples` rollouts of every task and record them in the store at `db` (the default store unless
    given), under `run_id` (a new one unless given). `options` (RunOptions) or its fields as keywords say how.

    Rerunning a run id resumes it: finished samples are kept; with `retry_unscored`, those that ended unscored
    (the model server, the sandbox or the verifier failed) are run again, as a next attempt. `task_errors` (the
    task files that could not be loaded) are recorded beside the run; `on_rollout` hears of each rollout's end.
    """
    opts = RunOptions.of(options, fields)
    registry = get_registry()
    the_agent = _load_agent(opts.agent, opts.agent_options or {})
    cfg = opts.sandbox_config or SandboxConfig()
    check_root(cfg.root)  # a root that cannot hold workspaces: one error now, not every rollout unscored
    sandbox = choose_sandbox(opts.sandbox)
    # fail now, not in every rollout: an unknown backend, or tasks that need what it cannot give
    probe = registry.get("sandboxes", sandbox)(cfg)
    check_tasks(tasks, probe.capabilities, sandbox)
    # a task whose image, paths or network policy the backend cannot give is skipped with its line
    tasks, cannot_run = await anyio.to_thread.run_sync(runnable, list(tasks), probe)
    # and what the agent cannot do with these tasks or this sandbox (`preflight(tasks, sandbox)`, optional)
    checked = the_agent.preflight(tasks, sandbox)
    if inspect.isawaitable(checked):  # an agent that asks its model server (CliAgent: --base-url)
        await checked
    cfg = with_agent_options(cfg, the_agent, sandbox)
    executor = opts.executor
    if isinstance(executor, str):
        exec_options = dict(opts.executor_options or {})
        if executor == "local":
            exec_options.setdefault("verifier_concurrency",
                                    opts.max_concurrency or DEFAULT_CEILING if opts.auto else opts.concurrency)
        executor = _build(registry.get("executors", executor), exec_options, f"executor {executor!r}",
                          "--executor-opt")
    run_id = run_id or new_run_id()
    db_path = Path(db) if db is not None else default_db_path()
    tasks, unknown_skills = with_known_skills(tasks, registry)
    task_errors = [*task_errors, *cannot_run, *unknown_skills]
    result = RunResult(run_id=run_id, db=db_path, task_errors=list(task_errors))
    agent_name = the_agent.name

    refuse_duplicate_ids(tasks)
    plan, attempts, before = _plan(db_path, run_id, tasks, opts.samples, agent_name, sandbox,
                                   recorded(opts.agent_options), result, opts.retry_unscored)
    # what the run covers is every invocation's tasks at the most samples asked: a report counts a task
    # that never started as missing, and a resume with more samples is reported with them
    run_tasks = {**(before.get("tasks") or {}), **{t.id: t.hash for t in tasks}}  # task id -> hash
    run_samples = max(opts.samples, int(before.get("samples") or 0))
    by_category = {t.id: category_label(t) or None for t in tasks}
    work = WorkQueue(plan)
    slots = Slots(1 if opts.auto else int(opts.concurrency))
    agent_by_name = opts.agent if isinstance(opts.agent, str) else None
    failure: BaseException | None = None
    lifecycle = RunLifecycle(db_path, run_id, agent=agent_name, sandbox=sandbox, samples=run_samples, config={
        "agent": agent_name, "agent_options": recorded(opts.agent_options), "sandbox": sandbox,
        "samples": run_samples, "concurrency": opts.concurrency, "retries": opts.retries,
        **({"max_concurrency": opts.max_concurrency} if opts.max_concurrency else {}),
        "tasks": dict(sorted(run_tasks.items())),
        "planned": len(run_tasks) * run_samples})  # what progress counts against (`clawsdk watch`)

    try:
        async with lifecycle:
            writer = lifecycle.writer
            try:
                async with executor, _collector_for_runs():
                    await lifecycle.record_tasks(tasks, task_errors)

                    async def record_control(**row: Any) -> None:
                        await writer.record_run_control(run_id=run_id, level=slots.level, paused=slots.paused,
                                                        **row)

                    # a fixed -c has a controller too, that only watches: `clawsdk ctl RUN set concurrency=auto`
                    # wakes it
                    controller = Controller(
                        slots, ceiling=min(opts.max_concurrency or DEFAULT_CEILING, fd_ceiling(), max(1, len(plan))),
                        initial=_start_concurrency(registry.get("sandboxes", sandbox)),
                        sees_sandbox_starts=isinstance(executor, LocalExecutor),
                        sampler=HostSampler([workspace_root(cfg.root), db_path.parent]), backlog=lambda: len(work),
                        queue_probe=_model_queue_probe(opts.agent_options),
                        fixed=None if opts.auto else int(opts.concurrency),
                        on_decision=lambda d: record_control(source="controller", actor="auto", action=d.action,
                                                             reason=d.reason, detail=d.detail))
                    await record_control(source="controller", actor="auto" if opts.auto else "-c", action="start",
                                         reason=controller.reason,
                                         detail={"ceiling": controller.ceiling} if opts.auto else None)

                    async def one(task: Task, sample: int) -> None:
                        rid = rollout_id(run_id, task.id, sample)
                        requeued.discard(rid)
                        attempt = attempts.get(rid, -1)
                        try:
                            lifecycle.started(rid)
                            for retry in range(opts.retries + 1):
                                if retry:  # paused: no new attempt either
                                    await slots.wait_unpaused()
                                attempt += 1
                                await record_start(writer, rollout_id=rid, run_id=run_id, task=task, sample=sample,
                                                   attempt=attempt, agent=agent_name,
                                                   model=the_agent.model)
                                recorder = Recorder(writer, rid, attempt)
                                recorder.gate = slots
                                recorder.observe = controller.observe

                                try:
                                    job = RolloutJob(task=task, agent=the_agent, agent_name=agent_by_name,
                                                     agent_options=opts.agent_options or {}, sandbox=sandbox,
                                                     sandbox_config=cfg, rollout_id=rid, attempt=attempt)
                                    res = await executor.attempt(job, recorder)
                                except BaseException:  # cancelled (maybe inside an exception group): not finished
                                    await record_cancelled(writer, rid, attempt, recorder)
                                    raise
                                last = retry == opts.retries or not res.kind.retryable or not res.retryable
                                verdict = res.verdict
                                controller.rollout_finished(res.kind.value, res.duration_s)
                                await record_ending(writer, rid, attempt, res, last=last)
                                if last:
                                    break
                                log.info("rollout %s: %s, retrying (%d/%d)", rid, res.kind.value, retry + 1,
                                         opts.retries)
                                try:
                                    await anyio.sleep(opts.backoff_s * (2**retry))
                                except BaseException:
                                    await record_cancelled(writer, rid, attempt, recorder)
                                    raise
                        finally:
                            slots.give()
                            work.done()
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

                    requeued: set[str] = set()  # queued again and not started yet: a second requeue skips them

                    async def requeue() -> int:
                        await writer.flush()  # the endings of rollouts that just ended, in the store
                        items = await anyio.to_thread.run_sync(_unscored, db_path, run_id, {t.id: t for t in tasks})
                        items = [(rid, item) for rid, item in items if rid not in requeued]
                        for rid, (task, sample, attempt) in items:
                            try:
                                work.put((task, sample))
                            except RuntimeError as e:
                                raise ControlError(str(e)) from None
                            attempts[rid] = max(attempts.get(rid, -1), attempt)
                            requeued.add(rid)
                        result.retried += len(items)
                        return len(items)

                    async with anyio.create_task_group() as outer:
                        if opts.handle_signals:
                            outer.start_soon(_cancel_on_signal, outer.cancel_scope, result)
                        # nothing more would be recorded: stop rather than run rollouts nobody can see
                        outer.start_soon(lifecycle.on_store_failure, lambda _why: outer.cancel_scope.cancel())

                        def cancel(who: str) -> None:
                            result.interrupted = True
                            result.cancelled_by = who
                            outer.cancel_scope.cancel()

                        steering = Steering(run_id, slots, controller, record=record_control, cancel=cancel,
                                            requeue=requeue, verifiers=executor.verifier_slots)
                        if opts.control:
                            await _open_control(outer, db_path, run_id, steering)
                        outer.start_soon(controller.run)
                        stop_listening = listen_model_status(controller.model_status)
                        try:
                            async with anyio.create_task_group() as rollouts:
                                async for task, sample in work:
                                    try:
                                        await slots.take()
                                    except BaseException:
                                        work.done()
                                        raise
                                    rollouts.start_soon(one, task, sample)
                        finally:
                            stop_listening()
                        outer.cancel_scope.cancel()  # all done: stop watching for signals, the writer and the channel
            except BaseException as e:  # every ending is settled as the lifecycle ends; cancellation is re-raised
                failure = e
            lifecycle.end(*_ending(result, failure))
    except BaseException as e:  # the store could not be opened or the run recorded: nothing was started
        failure = failure or e
        lifecycle.end(*_ending(result, failure))
    finally:
        with anyio.CancelScope(shield=True):
            try:  # warm sandboxes (docker's pool) must not outlive the run
                await release_idle(sandbox)
            except Exception as e:  # what is left goes in the next start's orphan sweep
                log.warning("could not release the %s sandboxes kept warm: %s: %s", sandbox, type(e).__name__, e)
    if failure is not None and not isinstance(first_leaf(failure), Exception):
        raise failure  # cancelled from outside, or KeyboardInterrupt: as it came
    if failure is not None or lifecycle.status == "failed":
        ended = lifecycle.ended
        left = f"{ended} rollout(s) in flight ended cancelled; " if ended else ""
        raise RunFailed(f"run {run_id} failed: {lifecycle.reason}; {left}rerun with --run-id {run_id} to finish it",
                        run_id=run_id, result=result) from failure
    return result


#: the cyclic collector's thresholds while rollouts run: each rollout allocates (tasks, coroutines, MCP messages,
#: pydantic models) at a rate that made the default (700, 10, 10) collect the young generation hundreds of
#: times a second, and the whole heap every 70,000 allocations; at 1,000 concurrent rollouts that was 45% of
#: the run's CPU (benchmarks/load.py: 12.5 s of CPU, 7.4 s with no collector). A young generation of 10,000
#: makes every collection 14x rarer: 9.3 s. Raising the older generations' thresholds too (50, 100) saved
#: 0.7 s more and kept 16 MB more garbage at 1,000 tasks: not worth it.
RUN_GC_THRESHOLDS = (10_000, 10, 10)
_gc_runs = [0, None]  # runs in flight in this process, the thresholds before the first


@contextlib.asynccontextmanager
async def _collector_for_runs():
    if _gc_runs[0] == 0:
        _gc_runs[1] = gc.get_threshold()
        gc.set_threshold(*RUN_GC_THRESHOLDS)
    _gc_runs[0] += 1
    try:
        yield
    finally:
        _gc_runs[0] -= 1
        if _gc_runs[0] == 0 and _gc_runs[1] is not None:
            gc.set_threshold(*_gc_runs[1])


async def _open_control(tg: anyio.abc.TaskGroup, db_path: Path, run_id: str, steering: Steering) -> None:
    """The run's control channel (`clawsdk ctl`); a run that cannot open one goes on without it, and says so."""
    try:
        await tg.start(serve_control, socket_path(db_path, run_id), db_path, steering.handle)
    except (ControlError, OSError) as e:
        log.warning("run %s goes on without its control channel (clawsdk ctl): %s", run_id, e)


def _start_concurrency(factory: Any) -> int | None:
    """Where `-c auto` starts for this sandbox backend: its factory's `start_concurrency()`, if it has one (a
    container engine slows as it creates more at once), else the controller's own default."""
    try:
        start = SandboxPlugin.of(factory).start_concurrency()
        return None if start is None else max(1, int(start))
    except Exception:
        return None


def _model_queue_probe(agent_options: dict[str, Any] | None) -> Callable[[], float | None] | None:
    base_url = (agent_options or {}).get("base_url")
    return vllm_queue_probe(base_url) if isinstance(base_url, str) else None


def _unscored(db_path: Path, run_id: str, tasks: dict[str, Task]) -> list[tuple[str, tuple[Task, int, int]]]:
    """The rollouts of `run_id` that finished unscored, as (rollout id, (task, sample, last attempt)); a task
    this invocation did not load comes from the store."""
    out = []
    with Store(db_path, readonly=True) as store:
        rows = store.query("SELECT id, task_id, task_hash, sample, attempt FROM rollouts WHERE run_id = ? "
                           "AND status = 'finished' AND NOT scored ORDER BY task_id, sample", [run_id])
        for r in rows:
            task = tasks.get(r["task_id"])
            if task is None or task.hash != r["task_hash"]:
                task = store.task(r["task_hash"])
            if task is not None:
                out.append((r["id"], (task, r["sample"], r["attempt"])))
    return out


def _ending(result: RunResult, failure: BaseException | None) -> tuple[str, str | None]:
    """The run's status and, unless it finished, why (a store that refused a write overrides it: RunLifecycle)."""
    if failure is not None:
        leaf = first_leaf(failure)
        if isinstance(leaf, Exception):
            return "failed", f"{type(leaf).__name__}: {short(leaf)}"
        if result.cancelled_by:
            return "interrupted", f"cancelled by {result.cancelled_by}"
        return "interrupted", "cancelled" if not isinstance(leaf, KeyboardInterrupt) else "interrupted (Ctrl-C)"
    if result.interrupted:
        if result.cancelled_by:
            return "interrupted", f"cancelled by {result.cancelled_by}"
        return "interrupted", "interrupted by a signal"
    return "finished", None


def with_known_skills(tasks: Sequence[Task], registry: Registry) -> tuple[list[Task], list[TaskFormatError]]:
    """The tasks whose tool servers are all installed, and an error for each other one, which is skipped:
    it would fail every rollout as an unscored sandbox_error. (Loading a task does not load the skill
    plugins, so it cannot tell.)"""
    skills = registry.names("skills")
    ok, errors = [], []
    unplaceable: dict[str, str | None] = {}
    for task in tasks:
        where = str(task.provenance.get("path") or task.id)
        if unknown := [name for name in task.tools if name not in skills]:
            errors.append(TaskFormatError(
                where, f"no skill named {', '.join(map(repr, unknown))} "
                f"(installed: {', '.join(skills)}; a plugin adds more)", field="tools", task_id=task.id))
            continue
        for name in task.tools:
            if name not in unplaceable:
                unplaceable[name] = boundary_problem(name, registry.get("skills", name), task)
        if problems := [unplaceable[n] for n in task.tools if unplaceable[n]]:
            errors.append(TaskFormatError(where, "; ".join(p for p in problems if p), field="tools", task_id=task.id))
        else:
            ok.append(task)
    return ok, errors


def boundary_problem(name: str, factory: Any, task: Task) -> str | None:
    """Why skill `name`'s tools could not run behind the sandbox's boundary, or None: a tool it does not
    declare safe to run here needs its factory imported inside, by name."""
    from clawsdk.mcp.toolkit import ToolServer
    from clawsdk.sandbox.toolruntime import SkillPlugin

    skill = SkillPlugin.of(factory)
    if skill.server_ref() is not None or skill.mcp_command is not None:
        return None
    try:
        server = factory(None, task)
        names = {t.name for t in server._tool_manager.list_tools()}
    except Exception:
        return None
    if inside := sorted(names - set(server.host_tools if isinstance(server, ToolServer) else ())):
        return (f"skill {name!r}: its tools ({', '.join(inside[:5])}) run inside the sandbox, which imports the "
                f"skill's server factory by name, and {getattr(factory, '__qualname__', factory)!r} cannot be "
                "imported (a closure, or a function of the script run as __main__): define it at the top level "
                "of a module")
    return None


#: option names whose values are credentials
SECRET_OPTION = re.compile(r"(^|_)(api_?key|key|token|secret|password|passwd|authorization|auth|credentials?)$")


def recorded(options: dict[str, Any] | None) -> dict[str, Any]:
    """Agent options as the store keeps them: a key, token, secret or password as "***", a URL without its
    user, password and query (`--agent-opt api_key=sk-...` and http://user:PW@host/v1?key=K were kept in
    the run's config as given)."""
    from clawsdk._http import public_url

    out: dict[str, Any] = {}
    for k, v in (options or {}).items():
        if SECRET_OPTION.search(k.lower()):
            v = "***"
        elif isinstance(v, str) and v.lower().startswith(("http://", "https://")):
            v = public_url(v)
        out[k] = v
    return out


def refuse_duplicate_ids(tasks: Sequence[Task]) -> None:
    """Two tasks with one id would share rollout ids (and clobber each other's rows): refuse before starting."""
    seen: dict[str, Task] = {}
    for task in tasks:
        first = seen.setdefault(task.id, task)
        if first is not task:
            where = [str(t.provenance.get("path") or "?") for t in (first, task)]
            raise DuplicateTaskId(f"task id {task.id!r} is used twice ({where[0]} and {where[1]}); "
                                  "a run needs unique ids: rename one, or run the folders separately")


async def _cancel_on_signal(scope: anyio.CancelScope, result: RunResult) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            result.interrupted = True
            scope.cancel()
            return


def _refuse_conflict(store: Store, run_id: str, agent: str, sandbox: str, options: dict[str, Any]) -> dict:
    """RunConflict if run `run_id` exists with another agent, sandbox or agent options; its config ({} if new)."""
    existing = store.run(run_id)
    if existing and (existing["agent"], existing["sandbox"]) != (agent, sandbox):
        raise RunConflict(
            f"run {run_id} was started with agent {existing['agent']!r} on sandbox {existing['sandbox']!r}; "
            f"resume it with the same, or choose a new --run-id"
        )
    before = json.loads(existing["config"] or "{}") if existing else {}
    then, now_ = before.get("agent_options"), json.loads(dumps(options))
    if then is not None and then != now_:
        # one run's numbers come from one configuration: a resume with another model or temperature
        # would mix two agents in one score
        differ = sorted(k for k in {*then, *now_} if then.get(k) != now_.get(k))
        raise RunConflict(
            f"run {run_id} was started with other agent options ({', '.join(differ)} differ); resume it "
            f"with the same, or choose a new --run-id"
        )
    return before


def check_resume(store: Store, run_id: str, agent: str | Agent, sandbox: str,
                 agent_options: dict[str, Any] | None) -> None:
    """RunConflict now if `run(...)` would refuse to resume `run_id` with this agent, sandbox and options: for
    callers that write to the store first (`bench run` registers the benchmark run)."""
    the_agent = _load_agent(agent, agent_options or {})
    _refuse_conflict(store, run_id, the_agent.name, choose_sandbox(sandbox), recorded(agent_options))


def _plan(db_path: Path, run_id: str, tasks: Sequence[Task], samples: int, agent: str, sandbox: str,
          options: dict[str, Any], result: RunResult,
          retry_unscored: bool) -> tuple[list[tuple[Task, int]], dict[str, int], dict]:
    """What is left to do for this run id, the last attempt number of each rollout, and the config the
    run was started with ({} for a new run)."""
    with Store(db_path) as store:
        before = _refuse_conflict(store, run_id, agent, sandbox, options)
        rows = store.query("SELECT id, task_id, task_hash, status, scored, attempt FROM rollouts "
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
            if row["status"] != "finished":
                plan.append((task, sample))
            elif retry_unscored and not row["scored"]:
                plan.append((task, sample))
                result.retried += 1
            else:
                result.skipped += 1
    return plan, attempts, before


def run_sync(tasks: Sequence[Task], options: RunOptions | None = None, **kwargs: Any) -> RunResult:
    """`run` from synchronous code."""
    return anyio.run(lambda: run(tasks, options, **kwargs))
