"""One rollout: sandbox -> tool servers -> agent -> hidden files -> verifier -> verdict.

The one state machine of a rollout, shared by `clawsdk run` (the runner and its executors),
`clawsdk serve` (whose agent phase waits for an external MCP client) and every agent,
the harness included:

    start sandbox -> tool session -> agent phase -> verify -> classify -> close -> record ending

Every path out of here (success, agent failure, infrastructure failure, cancellation) closes
the sandbox and says how the rollout ended; `record_start` / `record_ending` /
`record_cancelled` are the store writes around it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mcp import StdioServerParameters

from clawsdk.errors import FailureKind, RolloutError, SandboxError, VerifierError, VerifierTimeout
from clawsdk.mcp.session import ToolSession, ToolSource, ToolSpec
from clawsdk.runtime.agent import AgentContext
from clawsdk.sandbox.toolruntime import SkillPlugin
from clawsdk.store.events import ErrorEvent, Note, StoredEvent
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import McpServer
from clawsdk.verify.verdict import Verdict, VerifierPlugin, VerifyContext

if TYPE_CHECKING:
    from clawsdk.plugins import Registry
    from clawsdk.runtime.agent import Agent
    from clawsdk.sandbox.base import Sandbox
    from clawsdk.store.writer import StoreWriter
    from clawsdk.tasks.model import Task

log = logging.getLogger(__name__)


@dataclass
class AttemptResult:
    kind: FailureKind
    verdict: Verdict | None = None
    error: str | None = None
    duration_s: float = 0.0
    n_tool_calls: int = 0
    n_model_calls: int = 0
    #: False when trying again cannot help (a judge model that is not configured)
    retryable: bool = True


def _cancelled_from_outside(exc: BaseException) -> bool:
    """Whether `exc` is a real cancellation of this task (the run stopping), not one the agent's code
    raised on its own: on asyncio a task being cancelled counts its cancel requests."""
    if not isinstance(first_leaf(exc), anyio.get_cancelled_exc_class()):
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not asyncio: take it as real
        return True
    return task is None or task.cancelling() > 0


def first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def tool_servers(task: Task, sandbox: Sandbox, registry: Registry) -> list[ToolSource]:
    """The MCP servers of the task's tools, bound to its sandbox: its skills, then its own `mcp_servers`.

    A skill pack that declares a stdio server (SKILL.md `metadata.clawsdk.mcp`) is started inside the
    sandbox; any other is built here (it lists the tools), and runs its tools behind the boundary."""
    sources = []
    for name in task.tools:
        skill = SkillPlugin.named(name, registry)
        command = skill.mcp_command
        server = skill(sandbox, task)
        if command is not None:
            sources.append(ToolSource(name=name, server=server, command=command, skill=name))
        elif isinstance(server, StdioServerParameters):  # a program of its own: started inside, as a command
            command = McpServer(command=[server.command, *server.args], env=dict(server.env or {}))
            sources.append(ToolSource(name=name, command=command))
        else:
            sources.append(ToolSource(name=name, server=server, ref=skill.server_ref()))
    sources += [ToolSource(name=name, command=spec) for name, spec in task.mcp_servers.items()]
    return sources


async def verify(task: Task, sandbox: Sandbox, recorder: Recorder, registry: Registry,
                 transcript: list[StoredEvent] | None = None) -> Verdict:
    """End the agent's turn, run the verifier's part that runs the agent's code (its `before_hidden`),
    inject the hidden files, then score the workspace, all within the task's verifier timeout."""
    started = time.perf_counter()
    verifier = VerifierPlugin.named(task.verifier.type, registry).make(task.verifier)
    try:
        # before the verifier's clock: what end_turn has to clean is the agent's (a tree built to be slow to
        # walk ran the verification out of time, unscored), and end_turn keeps to a budget of its own
        await _end_turn(sandbox, recorder)
    except RolloutError:
        raise
    except Exception as e:
        raise VerifierError(f"ending the agent's turn failed: {type(e).__name__}: {e}") from e
    ctx = VerifyContext(task=task, sandbox=sandbox, recorder=recorder, transcript=transcript,
                        deadline=anyio.current_time() + task.limits.verifier_timeout_s)
    try:
        with anyio.fail_after(task.limits.verifier_timeout_s):
            if await verifier.before_hidden(ctx):
                await _end_turn(sandbox, recorder)  # what the agent's code left running must not see them
            await sandbox.start_scoring()  # frees the room kept for scoring: no agent code runs from here
            if task.hidden:
                ctx.hidden_path = await sandbox.inject_hidden(task.hidden)
            verdict = await verifier.verify(ctx)
    except TimeoutError:
        raise VerifierTimeout(f"verifier did not finish within {task.limits.verifier_timeout_s:g} s") from None
    except RolloutError:
        raise
    except Exception as e:
        raise VerifierError(f"verifier {task.verifier.type!r} failed: {type(e).__name__}: {e}") from e
    verdict.duration_s = time.perf_counter() - started
    return verdict


async def _end_turn(sandbox: Sandbox, recorder: Recorder) -> None:
    if removed := await sandbox.end_turn():
        await recorder.record(Note(event="end_turn", extra={
            "removed": removed[:100], "count": len(removed),
            "why": "paths in the workspace: FIFOs, sockets, devices and links out of it the agent left, removed "
                   "(no verifier can read them); ~/ paths: what the agent left in HOME (dot files, folders "
                   "beside the workspace), moved aside (the verifier's commands read their startup files there)"}))


async def list_tools(task: Task, registry: Registry) -> tuple[list[ToolSpec], dict[str, str]]:
    """The tools and server instructions an agent of `task` sees, without a rollout.

    The task's servers are bound to an empty local sandbox just long enough to list them."""
    sandbox = registry.get("sandboxes", "local")()
    await sandbox.start(task.model_copy(update={"workspace": []}))
    try:
        async with ToolSession.open(tool_servers(task, sandbox, registry), Recorder(None, "listing"), task.limits,
                                    task.tool_policy, sandbox=sandbox, task=task) as session:
            return session.tools(), session.instructions()
    finally:
        await sandbox.close()


async def attempt_rollout(task: Task, agent: Agent, make_sandbox: Any, recorder: Recorder,
                          registry: Registry, limiter: anyio.CapacityLimiter | None = None, *,
                          time_limit: float | None = None) -> AttemptResult:
    """Run one attempt. Never raises for a failure of the rollout; re-raises cancellation.

    `time_limit` bounds the agent phase (default: the task's limits.timeout_s)."""
    time_limit = time_limit or task.limits.timeout_s
    started = time.perf_counter()
    kind = FailureKind.OK
    error: str | None = None
    verdict: Verdict | None = None
    retryable = True
    sandbox: Sandbox | None = None
    try:
        try:
            sandbox = make_sandbox()
            t0 = time.perf_counter()
            await sandbox.start(task)
            if recorder.observe is not None:  # `-c auto`: how long sandboxes take to start is host pressure
                recorder.observe("sandbox_start", (time.perf_counter() - t0) * 1000, None)
        except RolloutError:
            raise
        except Exception as e:
            raise SandboxError(f"sandbox failed to start: {type(e).__name__}: {e}") from e
        servers = tool_servers(task, sandbox, registry)
        async with ToolSession.open(servers, recorder, task.limits, task.tool_policy, sandbox=sandbox,
                                    task=task) as tools:
            try:
                # an agent that boots a program first (OpenClaw) gets its boot on top, and keeps its own time
                with anyio.fail_after(time_limit + getattr(agent, "startup_allowance_s", 0.0)) as scope:
                    recorder.agent_scope = scope  # a paused run pushes its deadline back
                    try:
                        await agent.run(AgentContext(task=task, tools=tools, recorder=recorder, sandbox=sandbox))
                    finally:
                        recorder.agent_scope = None
            except TimeoutError:
                kind = FailureKind.AGENT_TIMEOUT
                error = f"agent did not finish within {time_limit:g} s"
            except RolloutError as e:
                if not e.kind.scored:
                    raise
                kind, error = e.kind, str(e)
            except Exception as e:  # the agent's own failure: still scored on what it left
                kind, error = FailureKind.AGENT_ERROR, f"{type(e).__name__}: {e}"
            except BaseException as e:  # sys.exit(), KeyboardInterrupt, a cancellation it raised itself
                if _cancelled_from_outside(e):
                    raise
                leaf = first_leaf(e)
                kind, error = FailureKind.AGENT_ERROR, f"{type(leaf).__name__}: {leaf}"
            if sandbox.failure:  # the agent may have swallowed the error: the sandbox still broke
                raise SandboxError(f"the sandbox broke: {sandbox.failure}")
            if error:
                await recorder.record(ErrorEvent(error_kind=kind.value, message=error))
        # the workspace is scored whatever the agent's ending: it is what the agent left
        if limiter is not None:
            async with limiter:
                verdict = await verify(task, sandbox, recorder, registry)
        else:
            verdict = await verify(task, sandbox, recorder, registry)
    except BaseException as raw:  # MCP clients wrap errors in exception groups: judge the first leaf
        exc = first_leaf(raw)
        if not isinstance(exc, Exception) or isinstance(exc, anyio.get_cancelled_exc_class()):
            raise
        if isinstance(exc, RolloutError):
            kind, error = exc.kind, str(exc)
        else:  # a failure of ours or of a tool server: infrastructure, not the agent
            # one line where the user looks (the CLI never prints a traceback); the traceback with -vv
            log.error("rollout %s failed: %s: %s", recorder.rollout_id, type(exc).__name__, exc)
            log.debug("rollout %s failed", recorder.rollout_id, exc_info=exc)
            kind, error = FailureKind.SANDBOX_ERROR, f"{type(exc).__name__}: {exc}"
        # a verifier that scored part of the work (a hybrid without its judge) keeps that part, unscored
        verdict = getattr(exc, "partial_verdict", None)
        retryable = getattr(exc, "retryable", True)
        # `raw`: what a model backend answered, when that was the problem
        event = ErrorEvent(error_kind=kind.value, message=error, raw=getattr(exc, "raw", None))
        with anyio.CancelScope(shield=True):
            await recorder.record(event)
    finally:
        if sandbox is not None:
            with anyio.CancelScope(shield=True):
                try:
                    await sandbox.close()
                except Exception:  # a failed cleanup must not hide the result
                    log.exception("closing the sandbox of %s failed", recorder.rollout_id)
    return AttemptResult(kind=kind, verdict=verdict, error=error, duration_s=time.perf_counter() - started,
                         n_tool_calls=recorder.n_tool_calls, n_model_calls=recorder.n_model_calls,
                         retryable=retryable)


async def record_start(writer: StoreWriter, *, rollout_id: str, run_id: str, task: Task, sample: int, attempt: int,
                       agent: str, model: str | None) -> None:
    """The rollout row of a new attempt, `running`."""
    await writer.start_rollout(rollout_id=rollout_id, run_id=run_id, task_id=task.id, task_hash=task.hash,
                               sample=sample, attempt=attempt, agent=agent, model=model)


async def record_ending(writer: StoreWriter, rollout_id: str, attempt: int, res: AttemptResult, *,
                        last: bool = True) -> None:
    """How an attempt ended, with its verdict; scored only when the ending is the agent's doing.

    Shielded: once an attempt is over, its ending must land even if the caller is being cancelled."""
    v = res.verdict
    scored = res.kind.scored and v is not None
    status = "cancelled" if res.kind is FailureKind.CANCELLED else "finished" if last else "retrying"
    with anyio.CancelScope(shield=True):
        await writer.finish_rollout(
            rollout_id=rollout_id, attempt=attempt, status=status, failure_kind=res.kind.value,
            scored=scored, reward=v.score if scored and v else None, passed=v.passed if scored and v else None,
            error=res.error, n_tool_calls=res.n_tool_calls, n_model_calls=res.n_model_calls, duration_s=res.duration_s,
            verdict=v.model_dump(mode="json") if v else None,
        )


async def record_cancelled(writer: StoreWriter, rollout_id: str, attempt: int, recorder: Recorder,
                           error: str = "run cancelled") -> None:
    """The ending of an attempt cancelled in flight (Ctrl-C, SIGTERM): unscored, never left `running`."""
    await record_ending(writer, rollout_id, attempt, AttemptResult(
        kind=FailureKind.CANCELLED, error=error, n_tool_calls=recorder.n_tool_calls,
        n_model_calls=recorder.n_model_calls))
