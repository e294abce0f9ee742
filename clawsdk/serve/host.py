"""`clawsdk serve`: a task's tools, bound to a fresh sandbox per MCP client session, for any external agent.

Each MCP client session that makes a tool call is one rollout, run by the same state machine as
`clawsdk run` (clawsdk.runtime.rollout.attempt_rollout) with an external agent phase: the sandbox
starts with the task's workspace at the session's first tool call, every call goes through the
rollout's ToolSession (so the recorder sees it exactly as it sees the built-in agent's), and the
agent phase ends when the client calls `finish`, disconnects, or runs out of time. Then the hidden
files go in, the verifier scores the workspace, and the ending is stored as the runner stores it.

A session that only lists tools or reads the task (a probe) is not a rollout. The instruction reaches
clients that drop server instructions through the `task` prompt and the `task` tool (listed first,
the instruction in its description). SIGTERM/SIGINT end open sessions as `cancelled` (unscored) and
the run as `interrupted`. A store that refuses a write stops the server: calls are answered with
an error saying nothing is recorded, the run is settled `failed`, and serve_* raise StoreError.

Samples are claimed in the store when a rollout starts (Store.claim_rollout), so servers that share
a run id and a store (one stdio process per agent run) never give two rollouts one id.

Transports: stdio (one session; the process ends when it does; a line that is not one JSON-RPC
message, or is longer than the HTTP transport's body limit, is answered with a JSON-RPC error and
skipped) and streamable HTTP (bound to 127.0.0.1 unless told otherwise; every request must carry
`Authorization: Bearer TOKEN`, and a malformed body gets 400 with the reason).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from clawsdk.errors import FailureKind, RolloutCancelled, RolloutError, StoreError
from clawsdk.mcp.session import FINISH, ToolSession, ToolSpec
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.ids import rollout_id
from clawsdk.runtime.rollout import (
    AttemptResult,
    attempt_rollout,
    list_tools,
    record_cancelled,
    record_ending,
)
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.events import Note
from clawsdk.store.lifecycle import RunLifecycle
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store
from clawsdk.store.writer import StoreWriter

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from clawsdk.plugins import Registry
    from clawsdk.tasks.model import Task
    from clawsdk.verify.verdict import Verdict

log = logging.getLogger(__name__)

#: Names the task for clients that never show the model the server's instructions (OpenClaw):
#: listed first, its description carries the instruction, and calling it returns it.
TASK_TOOL_NAME = "task"
DESCRIPTION_LIMIT = 4000

#: What to tell an agent whose runtime drops MCP server instructions (docs/external-agents.md).
MESSAGE_TEMPLATE = ("Call the {server} `task` tool to read your task, do it with the {server} tools only "
                    "(they act on the task's workspace), then call the {server} `finish` tool.")

#: The longest the end of the agent's turn may take before the verifier's clock starts (Sandbox.end_turn
#: gives its script 60 s; the host-side scrub keeps to 30 s, then clears HOME).
END_TURN_S = 60.0
#: What a rollout's ending may take on top of its calls in flight, the end of its turn and its verifier:
#: closing the sandbox and the tool servers, and the store committing the ending.
ENDING_SLACK_S = 30.0


def default_stdio_db() -> Path:
    """Where a stdio server keeps its store unless told (--db, $CLAWSDK_DB): the user's data folder, not the
    working directory of whatever agent runtime spawned it."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "clawsdk" / "clawsdk.db"


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema)


@dataclass
class ServeConfig:
    task: Task
    db: Path
    run_id: str
    sandbox: str = "auto"  # bwrap where it works, as `clawsdk run`; `local` only when asked for
    sandbox_config: SandboxConfig = field(default_factory=SandboxConfig)
    timeout_s: float | None = None  # default: the task's limits.timeout_s
    reveal_verdict: bool = False  # tell the agent its score when it finishes
    max_rollouts: int | None = None  # serve this many rollouts, then stop once they have ended
    #: with an upstream, the server is also the recording model proxy of its rollouts (HTTP: /v1/...)
    upstream: str | None = None
    upstream_key: str | None = None

    @property
    def time_limit(self) -> float:
        return self.timeout_s or self.task.limits.timeout_s


def _text_result(text: str, *, error: bool = False, structured: Any = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error,
                                structured_content=structured if isinstance(structured, dict) else None)


class ExternalSession(Agent):
    """The agent phase of a served rollout: the external MCP client works through the tool session
    until it calls `finish`, disconnects, or the rollout's time limit cuts it off."""

    name = "mcp-client"

    def __init__(self, live: LiveRollout):
        self.live = live

    async def run(self, ctx: AgentContext) -> None:
        live = self.live
        live.tools = ctx.tools
        live.ready.set()
        try:
            await live.ended.wait()
        finally:
            live.end("timeout")  # a no-op unless the time limit cut the wait short
            with anyio.move_on_after(ctx.task.limits.tool_timeout_s + 5, shield=True):
                await live.idle.wait()  # calls in flight answer before the tools close
            live.tools = None
        if live.stop_error is not None:  # a call ended the rollout (budget spent, broken sandbox)
            raise live.stop_error
        if live.end_reason == "server stopped":
            raise RolloutCancelled("the server stopped before the session ended")
        if live.end_reason != "finish":
            await ctx.recorder.record(Note(event="session_ended", extra={"reason": live.end_reason}))


class LiveRollout:
    """One MCP client session's rollout: the core state machine (attempt_rollout) with an external agent phase.

    Its row is in the store before it is made: its sample was claimed there (RolloutHost.claim)."""

    def __init__(self, host: RolloutHost, sample: int, agent: str):
        self.host = host
        self.sample = sample
        self.agent = agent
        self.id = rollout_id(host.config.run_id, host.config.task.id, sample)
        self.recorder = Recorder(host.writer, self.id, 0)
        self.tools: ToolSession | None = None
        self.ready = anyio.Event()  # the tool session is up, or the rollout ended before it was
        self.ended = anyio.Event()
        self.done = anyio.Event()  # the ending is in the store
        self.end_reason: str | None = None
        self.stop_error: RolloutError | None = None
        self.result: AttemptResult | None = None
        self.in_flight = 0
        self.idle = anyio.Event()
        self.idle.set()

    @property
    def kind(self) -> FailureKind | None:
        return self.result.kind if self.result else None

    @property
    def verdict(self) -> Verdict | None:
        return self.result.verdict if self.result else None

    def end(self, reason: str) -> None:
        if not self.ended.is_set():
            self.end_reason = reason
            self.ended.set()

    async def run(self) -> None:
        cfg, task, writer, registry = self.host.config, self.host.config.task, self.host.writer, self.host.registry
        make_sandbox = registry.get("sandboxes", cfg.sandbox)
        try:  # the row is the claim's (RolloutHost.claim), `running`
            self.result = await attempt_rollout(task, ExternalSession(self), lambda: make_sandbox(cfg.sandbox_config),
                                                self.recorder, registry, time_limit=cfg.time_limit)
            await record_ending(writer, self.id, 0, self.result)
            if not self.result.kind.scored:  # the client is told the kind only (finished())
                log.warning("rollout %s could not be scored (%s): %s", self.id, self.result.kind.value,
                            self.result.error)
        except BaseException:  # cancelled: the ending still lands, unscored
            why = "the server stopped before the session ended"
            self.result = AttemptResult(kind=FailureKind.CANCELLED, error=why)
            await record_cancelled(writer, self.id, 0, self.recorder, why)
            raise
        finally:
            self.tools = None
            self.ready.set()
            with anyio.CancelScope(shield=True):
                await writer.flush()
            self.done.set()
            self.host.rollout_done(self)

    def why_ended(self) -> str:
        res = self.result
        why = f"this rollout has ended ({self.end_reason or (res and res.kind.value)})"
        if res is not None and not res.kind.scored:
            why += f"; it could not be scored ({res.kind.value})"
        return why

    async def call(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        await self.ready.wait()
        host = self.host
        if host.failure is not None:
            return host.failure_result()
        tools = self.tools
        if tools is None or self.ended.is_set():
            return _text_result(f"{self.why_ended()}; open a new MCP session for a new rollout", error=True)
        if name == FINISH.name and tools.offers_finish():
            await tools.finish(args)
            self.end("finish")
            return await self.finished()
        self.in_flight += 1
        self.idle = anyio.Event() if self.in_flight == 1 else self.idle
        try:
            result = await tools.call(name, args)
        except RolloutError as e:  # the tool-call budget is spent, or the sandbox broke: the rollout ends here
            self.stop_error = e
            self.end("error")
            return _text_result(f"{e}; the rollout has ended", error=True)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()
        if host.failure is not None:  # the store failed while the call ran: nothing of it is recorded
            return host.failure_result(during=name)
        return _text_result(result.text, error=result.is_error, structured=result.structured)

    async def finished(self) -> types.CallToolResult:
        """`finish`'s answer, once the workspace is scored (or once it should have been)."""
        with anyio.move_on_after(self.host.ending_s()):
            await self.done.wait()
        if self.host.failure is not None:
            return self.host.failure_result()
        res = self.result
        if res is None:  # never "scored" without a verdict in hand: say where the ending will be
            return _text_result(
                f"rollout {self.id} has ended (finish) and is still being scored; `clawsdk show {self.id} "
                f"--db {self.host.config.db}` shows its ending once it is recorded")
        if not res.kind.scored:
            # only the kind: a verifier's or judge's error can quote what the task author expects (the
            # judge's answer, grade()'s output); the reason is in the store and on the server's log
            return _text_result(f"rollout {self.id} ended; it could not be scored ({res.kind.value})", error=True)
        text = f"rollout {self.id} finished; the workspace has been scored."
        if self.host.config.reveal_verdict and self.verdict is not None:
            text += f" score {self.verdict.score:.2f} ({'passed' if self.verdict.passed else 'not passed'})"
        return _text_result(text)


class RolloutHost:
    """Maps MCP client sessions (connections) to live rollouts and builds the MCP server they talk to.

    A session becomes a rollout at its first tool call: a client that only lists the tools or reads
    the task (`openclaw mcp probe`, a health check) leaves nothing in the store and no pass rate.
    With `max_rollouts` N, the first N sessions to make a tool call are its rollouts; a later session's
    calls are refused (an error result) and the host is done once those N have ended."""

    def __init__(self, config: ServeConfig, writer: StoreWriter, registry: Registry, tg: TaskGroup,
                 on_all_done: Callable[[], None] | None = None, listing: tuple[list[ToolSpec], dict[str, str]] = ([], {})):
        self.config = config
        self.writer = writer
        self.registry = registry
        self.tg = tg
        self.on_all_done = on_all_done
        self.specs, self.server_instructions = listing
        names = {s.name for s in self.specs}
        self.offers_task = TASK_TOOL_NAME not in names
        self.offers_finish = FINISH.name not in names
        #: the rollout of each open connection (keyed by id: an ended connection's key is dropped, since a
        #: new connection may get the same id once the old one is gone)
        self.sessions: dict[int, LiveRollout] = {}
        self.lives: list[LiveRollout] = []  # every rollout this host started (admitted)
        self.finished: list[LiveRollout] = []
        self.interrupted = False
        self.stopping = False  # no new sessions from here on
        #: why the store failed, once it has: nothing more can be recorded, and the host stops
        self.failure: str | None = None
        self.failed = anyio.Event()
        self._lock = anyio.Lock()
        #: a rollout a model call started before any session made a tool call: the next session's
        self.unattached: LiveRollout | None = None

    def rollout_done(self, live: LiveRollout) -> None:
        self.finished.append(live)
        limit = self.config.max_rollouts
        if limit is not None and len(self.finished) >= limit and self.on_all_done is not None:
            self.on_all_done()

    def stop(self, *, interrupted: bool = False) -> None:
        """End every open session; they are recorded `cancelled` (unscored) as the server goes down."""
        self.interrupted = self.interrupted or interrupted
        self.stopping = True
        for live in self.lives:
            live.end("server stopped")

    def fail(self, reason: str) -> None:
        """The store failed: nothing more can be recorded. Open sessions end, new ones are refused, every call
        is answered with an error saying so, and the transport stops (it waits on `failed`)."""
        if self.failure is not None:
            return
        self.failure = reason
        log.error("clawsdk serve: %s; stopping, as nothing more can be recorded in %s", reason,
                  self.config.db)
        self.stop()
        self.failed.set()

    def failure_result(self, during: str | None = None) -> types.CallToolResult:
        what = (f"the store failed while {during!r} ran, so its result is not recorded" if during else
                "the store failed, so this call was not run")
        return _text_result(f"clawsdk serve cannot record anything more: {what}. Nothing more of this "
                            "session is recorded; the server is stopping and its run is marked failed.",
                            error=True)

    async def claim(self, agent: str) -> int:
        """A new rollout's row, at a sample no other rollout of the run holds (another server on the same run
        id and store included): claimed in the store on a connection of its own, never taken over. Returns
        the sample; StoreError (and the host fails) if the store cannot take it."""
        cfg = self.config

        def insert() -> tuple[int, str]:
            with Store(cfg.db) as store:
                return store.claim_rollout(run_id=cfg.run_id, task_id=cfg.task.id, task_hash=cfg.task.hash,
                                           agent=agent, model=None,
                                           make_id=lambda sample: rollout_id(cfg.run_id, cfg.task.id, sample))

        try:
            with anyio.CancelScope(shield=True):  # a row claimed is a rollout to run: its ending must land
                sample, _ = await anyio.to_thread.run_sync(insert)
            return sample
        except Exception as e:
            self.fail(f"the store refused a write ({type(e).__name__}: {e})")
            raise StoreError(self.failure or str(e)) from e

    def ending_s(self) -> float:
        """How long a rollout may take from the end of its session to its ending in the store: its calls in
        flight, the end of the agent's turn, the verifier, then the sandbox closing and the store."""
        limits = self.config.task.limits
        return limits.tool_timeout_s + 5 + END_TURN_S + limits.verifier_timeout_s + ENDING_SLACK_S

    async def wait_recorded(self) -> None:
        with anyio.move_on_after(self.ending_s(), shield=True):
            for live in list(self.lives):
                await live.done.wait()

    def _disconnected(self, key: int, live: LiveRollout) -> None:
        live.end("disconnect")
        if self.sessions.get(key) is live:
            del self.sessions[key]

    def _refusal(self) -> types.CallToolResult | None:
        """Why a new session cannot be a rollout, as the error result its calls get; None if it can."""
        if self.failure is not None:
            return self.failure_result()
        if self.stopping:
            return _text_result("clawsdk serve is stopping and takes no new sessions; nothing of this "
                                "session is recorded", error=True)
        limit = self.config.max_rollouts
        if limit is not None and len(self.lives) >= limit:
            rollouts = f"{limit} rollout{'s' if limit != 1 else ''}"
            return _text_result(
                f"this server serves {rollouts} (--max-rollouts {limit}) and all have started; this session "
                "is not a rollout and nothing it does is recorded. The server stops once they have ended.",
                error=True)
        return None

    async def live_for(self, ctx: Any) -> LiveRollout | types.CallToolResult:
        """The session's rollout (started at its first tool call), or the error result its calls get when the
        host takes no more rollouts."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise ValueError("clawsdk serve keeps one rollout per MCP session: connect with the session "
                             f"(initialize) protocol, one of {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}")
        # the SDK keeps the per-client Connection on the request's session; one rollout per connection
        connection = ctx.session._connection
        key = id(connection)
        async with self._lock:
            live = self.sessions.get(key)
            if live is None and self.unattached is not None:  # the rollout its model calls started
                live, self.unattached = self.unattached, None
                self.sessions[key] = live
                connection.exit_stack.callback(self._disconnected, key, live)
            if live is None:
                refused = self._refusal()
                if refused is not None:
                    return refused
                params = connection.client_params
                agent = f"mcp:{params.client_info.name if params and params.client_info else 'unknown'}"
                try:
                    sample = await self.claim(agent)
                except StoreError:
                    return self.failure_result()
                # from the claim to start_soon no checkpoint: a request cancelled meanwhile still leaves a
                # rollout that runs and ends, never a row left `running`
                live = LiveRollout(self, sample, agent)
                self.sessions[key] = live
                self.lives.append(live)
                connection.exit_stack.callback(self._disconnected, key, live)
                self.tg.start_soon(live.run)
        return live

    async def live_for_model(self) -> LiveRollout | str:
        """The rollout a model call through this server's proxy belongs to: the one rollout in progress, or a new one
        (its session's first tool call takes it over); a string says why the call belongs to none."""
        async with self._lock:
            open_ = [live for live in self.lives if not live.ended.is_set()]
            if len(open_) > 1:
                return (f"{len(open_)} rollouts are in progress, so a model call cannot say which it belongs to: "
                        "serve one rollout at a time (--max-rollouts 1, or one server per agent run)")
            if open_:
                return open_[0]
            refused = self._refusal()
            if refused is not None:
                return refused.content[0].text  # type: ignore[union-attr]
            try:
                sample = await self.claim("mcp:proxy")
            except StoreError:
                return self.failure or "the store failed"
            live = LiveRollout(self, sample, "mcp:proxy")
            self.lives.append(live)
            self.unattached = live
            self.tg.start_soon(live.run)
            return live

    async def _note_task_read(self, ctx: Any, via: str) -> None:
        """A session that is a rollout read the task again (the `task` tool or prompt): a `note` event."""
        connection = getattr(getattr(ctx, "session", None), "_connection", None)
        live = self.sessions.get(id(connection)) if connection is not None else None
        if live is None or live.ended.is_set() or self.failure is not None:
            return
        await live.recorder.record(Note(event="task_read", extra={"via": via}))

    def instructions(self) -> str:
        """The task's instruction and the instructions of its tool servers, for the client's system prompt."""
        task = self.config.task
        parts = [f"Your task (workspace task {task.id}):\n{task.instruction.strip()}",
                 "Work in the workspace through these tools. Call `finish` when you are done."]
        parts += [f"## {name}\n{text.strip()}" for name, text in self.server_instructions.items()]
        return "\n\n".join(parts)

    def task_tool(self) -> types.Tool:
        text = self.config.task.instruction.strip()
        if len(text) > DESCRIPTION_LIMIT:
            text = text[:DESCRIPTION_LIMIT] + " [...] (call this tool for the whole task)"
        return types.Tool(
            name=TASK_TOOL_NAME,
            description=f"Your task, to do in this server's workspace: {text}\n\nDo it with the other tools of "
                        "this server, then call `finish`. Calling this tool returns the task again.",
            input_schema={"type": "object", "properties": {}})

    def server(self) -> Server:
        async def list_tools_(ctx: Any, params: Any) -> types.ListToolsResult:
            tools = [_tool(s) for s in self.specs]
            if self.offers_task:
                tools.insert(0, self.task_tool())
            if self.offers_finish:
                tools.append(_tool(FINISH))
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            if params.name == TASK_TOOL_NAME and self.offers_task:  # reading the task starts no rollout
                await self._note_task_read(ctx, "tool")
                return _text_result(self.config.task.instruction)
            live = await self.live_for(ctx)
            if isinstance(live, types.CallToolResult):  # refused: not a rollout
                return live
            return await live.call(params.name, dict(params.arguments or {}))

        async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
            return types.ListPromptsResult(prompts=[types.Prompt(name="task", description="The task to work on")])

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            if params.name != "task":
                raise ValueError(f"no prompt {params.name!r}; the one prompt is 'task'")
            await self._note_task_read(ctx, "prompt")
            return types.GetPromptResult(messages=[types.PromptMessage(
                role="user", content=types.TextContent(type="text", text=self.config.task.instruction))])

        server = Server("clawsdk", instructions=self.instructions(), on_list_tools=list_tools_,
                        on_call_tool=call_tool, on_list_prompts=list_prompts, on_get_prompt=get_prompt)

        async def discover(ctx: Any, params: Any) -> types.DiscoverResult:
            # advertise the session protocol only, so clients open a session (= one rollout)
            return types.DiscoverResult(supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
                                        capabilities=server.get_capabilities(protocol_version=ctx.protocol_version),
                                        instructions=server.instructions)

        server.add_request_handler("server/discover", types.RequestParams, discover)
        return server


def resolve_sandbox(config: ServeConfig, registry: Registry) -> str:
    """The backend sessions get: `auto` is bwrap where it works (as for `clawsdk run`); refuses a backend
    that cannot give the task what it needs, before any client connects."""
    from clawsdk.sandbox.capabilities import check_tasks, choose_sandbox

    name = choose_sandbox(config.sandbox)
    check_tasks([config.task], registry.get("sandboxes", name)(config.sandbox_config).capabilities, name)
    return name


@contextlib.asynccontextmanager
async def hosting(config: ServeConfig, registry: Registry | None = None,
                  on_all_done: Callable[[], None] | None = None) -> AsyncIterator[RolloutHost]:
    """A RolloutHost with its store writer and task group; on exit, open sessions end (`cancelled`) and are
    recorded.

    A store that fails (the writer's `failed`, or a rollout's claim) makes the host fail (RolloutHost.fail:
    the transport is expected to stop on `host.failed`); on exit the run is then settled `failed` on a
    connection of its own, and StoreError is raised."""
    from clawsdk.plugins import get_registry

    registry = registry or get_registry()
    config.sandbox = resolve_sandbox(config, registry)
    listing = await list_tools(config.task, registry)
    host: RolloutHost | None = None
    lifecycle = RunLifecycle(config.db, config.run_id, agent="mcp-client", sandbox=config.sandbox, shared=True,
                             config={"served": True, "task": config.task.id, "sandbox": config.sandbox,
                                     "timeout_s": config.time_limit})
    async with lifecycle:
        # the run and the task are in before a rollout claims its row beside them
        await lifecycle.record_tasks([config.task])
        try:
            async with anyio.create_task_group() as tg:
                host = RolloutHost(config, lifecycle.writer, registry, tg, on_all_done, listing)
                watching = anyio.CancelScope()

                async def watch_store(host: RolloutHost) -> None:
                    with watching:
                        await lifecycle.on_store_failure(host.fail)

                tg.start_soon(watch_store, host)
                try:
                    yield host
                finally:
                    host.stop()
                    watching.cancel()
        finally:
            if host is not None:
                for live in host.lives:
                    lifecycle.started(live.id)
                if host.failure is not None:
                    lifecycle.end("failed", host.failure)
                elif host.interrupted:  # unless another server still records into the run (RunLifecycle)
                    lifecycle.end("interrupted")
    if lifecycle.status == "failed":
        raise StoreError(f"{lifecycle.reason}; clawsdk serve stopped, as nothing more could be recorded in "
                         f"{config.db} (run {config.run_id} is marked failed)")


async def stop_on_store_failure(host: RolloutHost, stop: Callable[[], None]) -> None:
    """The store failed (RolloutHost.fail): once the open sessions have ended and the calls in flight have
    been answered (each saying that nothing is recorded), `stop` brings the transport down."""
    await host.failed.wait()
    await host.wait_recorded()
    await anyio.sleep(0.5)
    stop()


async def stop_on_signal(host: RolloutHost, stop: Callable[[], None]) -> None:
    """SIGTERM or SIGINT: open sessions end as `cancelled`, then `stop` brings the transport down."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for sig in signals:
            log.warning("clawsdk serve: %s, stopping", signal.Signals(sig).name)
            host.stop(interrupted=True)
            await host.wait_recorded()
            stop()
            return
