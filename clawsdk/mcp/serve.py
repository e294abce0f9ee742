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
the run as `interrupted`.

Transports: stdio (one session; the process ends when it does) and streamable HTTP (bound to
127.0.0.1 unless told otherwise; every request must carry `Authorization: Bearer TOKEN`, and a
malformed body gets 400 with the reason).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from clawsdk.errors import FailureKind, RolloutCancelled, RolloutError
from clawsdk.mcp.http import BearerAuth, ValidBodies, bind, is_loopback, uvicorn_server
from clawsdk.mcp.session import FINISH, ToolSession, ToolSpec
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.recorder import Recorder
from clawsdk.runtime.rollout import (
    AttemptResult, attempt_rollout, list_tools, record_cancelled, record_ending, record_start,
)
from clawsdk.runtime.runner import rollout_id
from clawsdk.sandbox.base import SandboxConfig
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
    max_rollouts: int | None = None  # stop serving after this many rollouts ended

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
            await ctx.recorder.record("note", {"event": "session_ended", "reason": live.end_reason})


class LiveRollout:
    """One MCP client session's rollout: the core state machine (attempt_rollout) with an external agent phase."""

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
        await record_start(writer, rollout_id=self.id, run_id=cfg.run_id, task=task, sample=self.sample, attempt=0,
                           agent=self.agent, model=None)
        make_sandbox = registry.get("sandboxes", cfg.sandbox)
        try:
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
        why = f"this rollout has ended ({self.end_reason or res and res.kind.value})"
        if res is not None and not res.kind.scored:
            why += f"; it could not be scored ({res.kind.value})"
        return why

    async def call(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        await self.ready.wait()
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
        return _text_result(result.text, error=result.is_error, structured=result.structured)

    async def finished(self) -> types.CallToolResult:
        """`finish`'s answer, once the workspace is scored."""
        with anyio.move_on_after(self.host.config.task.limits.verifier_timeout_s + 30):
            await self.done.wait()
        res = self.result
        if res is not None and not res.kind.scored:
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
    the task (`openclaw mcp probe`, a health check) leaves nothing in the store and no pass rate."""

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
        self.lives: list[LiveRollout] = []  # every rollout this host started
        self.next_sample = _next_sample(config.db, config.run_id, config.task.id)
        self.finished: list[LiveRollout] = []
        self.interrupted = False
        self._lock = anyio.Lock()

    def rollout_done(self, live: LiveRollout) -> None:
        self.finished.append(live)
        limit = self.config.max_rollouts
        if limit is not None and len(self.finished) >= limit and self.on_all_done is not None:
            self.on_all_done()

    def stop(self, *, interrupted: bool = False) -> None:
        """End every open session; they are recorded `cancelled` (unscored) as the server goes down."""
        self.interrupted = self.interrupted or interrupted
        for live in self.lives:
            live.end("server stopped")

    async def wait_recorded(self) -> None:
        with anyio.move_on_after(self.config.task.limits.verifier_timeout_s + 30, shield=True):
            for live in list(self.lives):
                await live.done.wait()

    def _disconnected(self, key: int, live: LiveRollout) -> None:
        live.end("disconnect")
        if self.sessions.get(key) is live:
            del self.sessions[key]

    async def live_for(self, ctx: Any) -> LiveRollout:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise ValueError("clawsdk serve keeps one rollout per MCP session: connect with the session "
                             f"(initialize) protocol, one of {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}")
        # the SDK keeps the per-client Connection on the request's session; one rollout per connection
        connection = ctx.session._connection  # noqa: SLF001
        key = id(connection)
        async with self._lock:
            live = self.sessions.get(key)
            if live is None:
                params = connection.client_params
                client = params.client_info.name if params and params.client_info else "unknown"
                live = LiveRollout(self, self.next_sample, f"mcp:{client}")
                self.next_sample += 1
                self.sessions[key] = live
                self.lives.append(live)
                connection.exit_stack.callback(self._disconnected, key, live)
                self.tg.start_soon(live.run)
        return live

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
                return _text_result(self.config.task.instruction)
            live = await self.live_for(ctx)
            return await live.call(params.name, dict(params.arguments or {}))

        async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
            return types.ListPromptsResult(prompts=[types.Prompt(name="task", description="The task to work on")])

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            if params.name != "task":
                raise ValueError(f"no prompt {params.name!r}; the one prompt is 'task'")
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


def _next_sample(db: Path, run_id: str, task_id: str) -> int:
    with Store(db) as store:
        rows = store.query("SELECT MAX(sample) AS m FROM rollouts WHERE run_id = ? AND task_id = ?", [run_id, task_id])
    m = rows[0]["m"] if rows else None
    return 0 if m is None else m + 1


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
    """A RolloutHost with its store writer and task group; on exit, open sessions end (`cancelled`) and are recorded."""
    from clawsdk.plugins import get_registry

    registry = registry or get_registry()
    config.sandbox = resolve_sandbox(config, registry)
    listing = await list_tools(config.task, registry)
    async with StoreWriter(config.db) as writer:
        await writer.put("upsert_run", run_id=config.run_id, status="running", agent="mcp-client",
                         sandbox=config.sandbox, samples=None,
                         config={"served": True, "task": config.task.id, "sandbox": config.sandbox,
                                 "timeout_s": config.time_limit})
        await writer.put("set_run_status", run_id=config.run_id, status="running")
        await writer.put("upsert_task", task=config.task)
        host: RolloutHost | None = None
        try:
            async with anyio.create_task_group() as tg:
                host = RolloutHost(config, writer, registry, tg, on_all_done, listing)
                try:
                    yield host
                finally:
                    host.stop()
        finally:
            with anyio.CancelScope(shield=True):
                stopped = host is not None and host.interrupted
                await writer.put("set_run_status", run_id=config.run_id,
                                 status="interrupted" if stopped else "finished")


async def stop_on_signal(host: RolloutHost, stop: Callable[[], None]) -> None:
    """SIGTERM or SIGINT: open sessions end as `cancelled`, then `stop` brings the transport down."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for sig in signals:
            log.warning("clawsdk serve: %s, stopping", signal.Signals(sig).name)
            host.stop(interrupted=True)
            await host.wait_recorded()
            stop()
            return


class _StdinLines:
    """Lines of a pipe on stdin, read without a thread so that a signal can stop the server.

    (The SDK reads stdin in a worker thread that no cancellation can interrupt.)"""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""
        self.eof = False

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.buffer and not self.eof:
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            self.eof = not chunk
            self.buffer += chunk
        if not self.buffer:
            raise StopAsyncIteration
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on `fd` (epoll refuses regular files and /dev/null)."""
    import select

    if not hasattr(select, "epoll"):
        return False
    ep = select.epoll()
    try:
        ep.register(fd, select.EPOLLIN)
        return True
    except OSError:
        return False
    finally:
        ep.close()


@contextlib.contextmanager
def _claimed_stdin():
    """stdin as `_StdinLines` when it can be polled (a pipe, a socket, a terminal), and fd 0 then reads
    /dev/null so children never eat the wire; None for a regular file, which the SDK reads its own way.

    No O_NONBLOCK: the open file is shared with the process that spawned us. A read after poll says
    readable returns what is there without blocking."""
    if not _pollable(0):
        yield None
        return
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        yield _StdinLines(private)
    finally:
        os.dup2(private, 0)
        os.close(private)


async def serve_stdio(config: ServeConfig) -> RolloutHost:
    """Serve one MCP session over this process's stdin/stdout; returns once its rollout is recorded.

    SIGTERM/SIGINT end the session as `cancelled` and the run as `interrupted`, never left `running`."""
    from mcp.server.stdio import stdio_server

    async with hosting(config) as host:
        server = host.server()
        with _claimed_stdin() as lines:
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop_on_signal, host, tg.cancel_scope.cancel)
                async with stdio_server(stdin=lines) as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                tg.cancel_scope.cancel()
    return host


async def _end_http_sessions(server: Server) -> None:
    """Close every client's MCP session, so that its open event stream ends and uvicorn can stop at once
    (otherwise its graceful shutdown waits on the stream, then cancels it with a traceback in the log).
    The SDK offers no public call for this: it keeps the transports on the app's session manager."""
    manager = getattr(server, "_session_manager", None)
    for transport in list(getattr(manager, "_server_instances", {}).values()):
        try:
            await transport.terminate()
        except Exception as e:  # noqa: BLE001 - the server is going down either way
            log.debug("closing an MCP session failed: %s", e)


async def serve_http(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                     on_ready: Callable[[str, str], None] | None = None, path: str = "/mcp") -> RolloutHost:
    """Serve MCP over streamable HTTP at http://HOST:PORT/mcp until stopped (or max_rollouts ended)."""
    from mcp.server.transport_security import TransportSecuritySettings

    token = token or secrets.token_urlsafe(32)
    sock = bind(host, port)
    actual_port = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{actual_port}{path}"
    stop = anyio.Event()
    async with hosting(config, on_all_done=stop.set) as rollout_host:
        server = rollout_host.server()
        # on loopback, a browser page whose name was rebound to this machine is refused by its Host header
        hosts = sorted({"127.0.0.1", "localhost", "[::1]", url_host}) if is_loopback(host) else []
        security = TransportSecuritySettings(enable_dns_rebinding_protection=bool(hosts),
                                             allowed_hosts=[f"{h}:*" for h in hosts],
                                             allowed_origins=[f"http://{h}:*" for h in hosts])
        app = server.streamable_http_app(streamable_http_path=path, transport_security=security, host=host,
                                         session_idle_timeout=config.time_limit + 60)
        # open event streams would hold a graceful shutdown forever; the rollouts are recorded by then
        uv = uvicorn_server(BearerAuth(ValidBodies(app), token), lifespan="on", timeout_graceful_shutdown=5)

        async def watch() -> None:
            await stop.wait()
            rollout_host.stop()  # before uvicorn closes the sessions, which would read as disconnects
            await rollout_host.wait_recorded()
            uv.should_exit = True  # stops accepting; answers in flight (a `finish`) still go out
            await anyio.sleep(0.5)
            await _end_http_sessions(server)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            tg.start_soon(stop_on_signal, rollout_host, stop.set)
            if on_ready is not None:
                on_ready(url, token)
            try:
                await uv.serve(sockets=[sock])
            finally:
                tg.cancel_scope.cancel()
        rollout_host.stop()
        await rollout_host.wait_recorded()
    return rollout_host
