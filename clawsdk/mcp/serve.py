"""`clawsdk serve`: a task's tools, bound to a fresh sandbox per MCP client session, for any external agent.

Each MCP client session is one rollout, recorded in the store like the runner's: the sandbox
starts with the task's workspace on the session's first request, every tool call goes through
a ToolSession (so the recorder sees it exactly as it sees the built-in agent's), and the
rollout ends when the client calls `finish`, disconnects, or runs out of time. Then the hidden
files go in, the verifier scores the workspace, and the verdict is stored.

Transports: stdio (one session; the process ends when it does) and streamable HTTP (bound to
127.0.0.1 unless told otherwise; every request must carry `Authorization: Bearer TOKEN`).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from clawsdk.errors import AgentError, FailureKind, RolloutError, SandboxError
from clawsdk.mcp.session import ToolSession
from clawsdk.runtime.recorder import Recorder
from clawsdk.runtime.rollout import first_leaf, tool_servers, verify
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

FINISH_TOOL = types.Tool(
    name="finish",
    description="Call this when the task is done: it ends this session's rollout and scores the workspace. "
                "No tool works after it.",
    input_schema={"type": "object", "properties": {
        "summary": {"type": "string", "description": "what you did, for the record"}}},
)


@dataclass
class ServeConfig:
    task: Task
    db: Path
    run_id: str
    sandbox: str = "local"
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


class LiveRollout:
    """One MCP client session's rollout: sandbox, tool session and recorder, owned by one task."""

    def __init__(self, host: RolloutHost, sample: int, agent: str):
        self.host = host
        self.sample = sample
        self.agent = agent
        self.id = rollout_id(host.config.run_id, host.config.task.id, sample)
        self.recorder = Recorder(host.writer, self.id, 0, keep=True)
        self.tools: ToolSession | None = None
        self.ready = anyio.Event()
        self.ended = anyio.Event()
        self.done = anyio.Event()
        self.end_reason: str | None = None
        self.summary: str | None = None
        self.failure: str | None = None
        self.kind = FailureKind.OK
        self.verdict: Verdict | None = None
        self.in_flight = 0
        self.idle = anyio.Event()
        self.idle.set()

    def end(self, reason: str) -> None:
        if not self.ended.is_set():
            self.end_reason = reason
            self.ended.set()

    async def run(self) -> None:
        cfg, task = self.host.config, self.host.config.task
        writer, registry = self.host.writer, self.host.registry
        await writer.put("start_rollout", rollout_id=self.id, run_id=cfg.run_id, task_id=task.id,
                         task_hash=task.hash, sample=self.sample, attempt=0, agent=self.agent, model=None)
        started = time.perf_counter()
        error: str | None = None
        sandbox = None
        try:
            try:
                sandbox = registry.get("sandboxes", cfg.sandbox)(cfg.sandbox_config)
                await sandbox.start(task)
            except RolloutError:
                raise
            except Exception as e:
                raise SandboxError(f"sandbox failed to start: {type(e).__name__}: {e}") from e
            servers = tool_servers(task, sandbox, registry)
            async with ToolSession.open(servers, self.recorder, task.limits, task.tool_policy,
                                        sandbox=sandbox) as tools:
                self.tools = tools
                self.ready.set()
                with anyio.move_on_after(cfg.time_limit) as scope:
                    await self.ended.wait()
                if scope.cancelled_caught:
                    self.end("timeout")
                    self.kind = FailureKind.AGENT_TIMEOUT
                    error = f"the session did not finish within {cfg.time_limit:g} s"
                with anyio.move_on_after(task.limits.tool_timeout_s + 5):
                    await self.idle.wait()  # let calls in flight answer before the tools close
                self.tools = None
            await self.recorder.record("note", {"ended": self.end_reason, "summary": self.summary})
            if error:
                await self.recorder.record("error", {"kind": self.kind.value, "message": error})
            self.verdict = await verify(task, sandbox, self.recorder, registry, self.recorder.transcript() or None)
        except BaseException as raw:
            exc = first_leaf(raw)
            cancelled = not isinstance(exc, Exception) or isinstance(exc, anyio.get_cancelled_exc_class())
            if cancelled:
                self.kind, error = FailureKind.CANCELLED, "the server stopped before the session ended"
            elif isinstance(exc, RolloutError):
                self.kind, error = exc.kind, str(exc)
            else:
                log.error("served rollout %s failed", self.id, exc_info=exc)
                self.kind, error = FailureKind.SANDBOX_ERROR, f"{type(exc).__name__}: {exc}"
            self.failure = error
            self.verdict = None
            with anyio.CancelScope(shield=True):
                await self.recorder.record("error", {"kind": self.kind.value, "message": error})
            if cancelled:
                raise
        finally:
            self.tools = None
            self.ready.set()
            with anyio.CancelScope(shield=True):
                if sandbox is not None:
                    try:
                        await sandbox.close()
                    except Exception:  # noqa: BLE001
                        log.exception("closing the sandbox of %s failed", self.id)
                v = self.verdict
                scored = self.kind.scored and v is not None
                await writer.put(
                    "finish_rollout", rollout_id=self.id, attempt=0, status="finished",
                    failure_kind=self.kind.value, scored=scored, reward=v.score if scored else None,
                    passed=v.passed if scored else None, error=error or self.failure,
                    n_tool_calls=self.recorder.n_tool_calls, n_model_calls=self.recorder.n_model_calls,
                    duration_s=time.perf_counter() - started, verdict=v.model_dump(mode="json") if v else None)
                await writer.flush()
                self.done.set()
                self.host.rollout_done(self)

    async def call(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        await self.ready.wait()
        if name == "finish":
            return await self.finish(args.get("summary"))
        tools = self.tools
        if tools is None or self.ended.is_set():
            why = self.failure or f"this rollout has ended ({self.end_reason})"
            return _text_result(f"{why}; open a new MCP session for a new rollout", error=True)
        self.in_flight += 1
        self.idle = anyio.Event() if self.in_flight == 1 else self.idle
        try:
            result = await tools.call(name, args)
        except RolloutError as e:  # the tool-call budget is spent, or the sandbox broke: the rollout ends here
            self.kind = e.kind
            self.failure = str(e)
            self.end("budget" if isinstance(e, AgentError) else "error")
            return _text_result(f"{e}; the rollout has ended", error=True)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()
        return _text_result(result.text, error=result.is_error, structured=result.structured)

    async def finish(self, summary: str | None) -> types.CallToolResult:
        self.summary = summary
        self.end("finish")
        with anyio.move_on_after(self.host.config.task.limits.verifier_timeout_s + 30):
            await self.done.wait()
        if self.failure and self.kind.scored is False:
            return _text_result(f"rollout {self.id} ended; it could not be scored: {self.failure}", error=True)
        text = f"rollout {self.id} finished; the workspace has been scored."
        if self.host.config.reveal_verdict and self.verdict is not None:
            text += f" score {self.verdict.score:.2f} ({'passed' if self.verdict.passed else 'not passed'})"
        return _text_result(text)


class RolloutHost:
    """Maps MCP client sessions (connections) to live rollouts and builds the MCP server they talk to."""

    def __init__(self, config: ServeConfig, writer: StoreWriter, registry: Registry, tg: TaskGroup,
                 on_all_done: Callable[[], None] | None = None):
        self.config = config
        self.writer = writer
        self.registry = registry
        self.tg = tg
        self.on_all_done = on_all_done
        self.sessions: dict[int, LiveRollout] = {}
        self.next_sample = _next_sample(config.db, config.run_id, config.task.id)
        self.finished: list[LiveRollout] = []
        self._lock = anyio.Lock()

    def rollout_done(self, live: LiveRollout) -> None:
        self.finished.append(live)
        limit = self.config.max_rollouts
        if limit is not None and len(self.finished) >= limit and self.on_all_done is not None:
            self.on_all_done()

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
                connection.exit_stack.callback(live.end, "disconnect")
                self.tg.start_soon(live.run)
        return live

    def instructions(self) -> str:
        """The task's instruction and the instructions of its tool servers, for the client's system prompt."""
        task = self.config.task
        parts = [f"Your task (workspace task {task.id}):\n{task.instruction.strip()}",
                 "Work in the workspace through these tools. Call `finish` when you are done."]
        try:
            probe = self.registry.get("sandboxes", self.config.sandbox)(self.config.sandbox_config)
            for name, server in tool_servers(task, probe, self.registry):
                text = getattr(server, "instructions", None)
                if text:
                    parts.append(f"## {name}\n{text.strip()}")
        except Exception as e:  # noqa: BLE001 - instructions are a courtesy; the tools still work
            log.warning("could not collect the tool servers' instructions: %s", e)
        return "\n\n".join(parts)

    def server(self) -> Server:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            live = await self.live_for(ctx)
            await live.ready.wait()
            tools = [types.Tool(name=s.name, description=s.description, input_schema=s.input_schema)
                     for s in (live.tools.tools() if live.tools else [])]
            return types.ListToolsResult(tools=[*tools, FINISH_TOOL])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            live = await self.live_for(ctx)
            return await live.call(params.name, dict(params.arguments or {}))

        async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
            return types.ListPromptsResult(prompts=[types.Prompt(name="task", description="The task to work on")])

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            if params.name != "task":
                raise ValueError(f"no prompt {params.name!r}; the one prompt is 'task'")
            return types.GetPromptResult(messages=[types.PromptMessage(
                role="user", content=types.TextContent(type="text", text=self.config.task.instruction))])

        server = Server("clawsdk", instructions=self.instructions(), on_list_tools=list_tools,
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


@contextlib.asynccontextmanager
async def hosting(config: ServeConfig, registry: Registry | None = None,
                  on_all_done: Callable[[], None] | None = None) -> AsyncIterator[RolloutHost]:
    """A RolloutHost with its store writer and task group; on exit, live rollouts end and are recorded."""
    from clawsdk.plugins import get_registry

    registry = registry or get_registry()
    registry.get("sandboxes", config.sandbox)  # fail early on an unknown name
    async with StoreWriter(config.db) as writer:
        await writer.put("upsert_run", run_id=config.run_id, status="running", agent="mcp-client",
                         sandbox=config.sandbox, samples=None,
                         config={"served": True, "task": config.task.id, "sandbox": config.sandbox,
                                 "timeout_s": config.time_limit})
        await writer.put("set_run_status", run_id=config.run_id, status="running")
        await writer.put("upsert_task", task=config.task)
        try:
            async with anyio.create_task_group() as tg:
                host = RolloutHost(config, writer, registry, tg, on_all_done)
                try:
                    yield host
                finally:
                    for live in host.sessions.values():  # rollouts still open end as disconnected
                        live.end("server stopped")
        finally:
            with anyio.CancelScope(shield=True):
                await writer.put("set_run_status", run_id=config.run_id, status="finished")


async def serve_stdio(config: ServeConfig) -> RolloutHost:
    """Serve one MCP session over this process's stdin/stdout; returns once its rollout is recorded."""
    from mcp.server.stdio import stdio_server

    async with hosting(config) as host:
        server = host.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    return host


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer TOKEN` (compared in constant time)."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = json.dumps({"error": "missing or wrong bearer token; send Authorization: Bearer TOKEN "
                                            "(printed by clawsdk serve when it started)"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="clawsdk"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_http(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                     on_ready: Callable[[str, str], None] | None = None, path: str = "/mcp") -> RolloutHost:
    """Serve MCP over streamable HTTP at http://HOST:PORT/mcp until stopped (or max_rollouts ended)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    token = token or secrets.token_urlsafe(32)
    sock = bind(host, port)
    actual_port = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{actual_port}{path}"
    stop = anyio.Event()
    async with hosting(config, on_all_done=stop.set) as rollout_host:
        server = rollout_host.server()
        loopback = host in ("127.0.0.1", "localhost", "::1")
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=loopback,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"] if loopback else [],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"] if loopback else [])
        app = server.streamable_http_app(streamable_http_path=path, transport_security=security, host=host,
                                         session_idle_timeout=config.time_limit + 60)
        uv = uvicorn.Server(uvicorn.Config(BearerAuth(app, token), log_level="warning", lifespan="on"))

        async def watch() -> None:
            await stop.wait()
            uv.should_exit = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            if on_ready is not None:
                on_ready(url, token)
            try:
                await uv.serve(sockets=[sock])
            finally:
                tg.cancel_scope.cancel()
        with anyio.move_on_after(config.task.limits.verifier_timeout_s + 30, shield=True):
            for live in list(rollout_host.sessions.values()):
                live.end("server stopped")
                await live.done.wait()
    return rollout_host
