"""The agent's one door to its sandbox: MCP clients for the task's tool servers, every call recorded.

The recorder sits here, on the client side, so built-in agents and external runtimes that
reach the same servers are recorded the same way. Each MCP client is entered and exited in
the task that owns the rollout.
"""

from __future__ import annotations

import contextlib
import logging
import math
import reprlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import Client

from clawsdk._text import printable, printable_data
from clawsdk.errors import AgentError, SandboxError
from clawsdk.mcp.toolhost.boundary import Boundary
from clawsdk.mcp.toolhost.inside import SEPARATOR as HOSTED_SEPARATOR
from clawsdk.mcp.toolkit import bounded_result
from clawsdk.models.prompt import FINISH_TOOL
from clawsdk.sandbox.toolruntime import ServerRef
from clawsdk.store.events import ErrorEvent, Note, ToolCall
from clawsdk.store.events import ToolResult as ToolResultEvent
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Limits, McpServer, Task, ToolPolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    server: str
    remote_name: str
    #: the process behind the sandbox's boundary that runs the tool (clawsdk.mcp.toolhost); None: this one
    host: Any = field(default=None, compare=False, repr=False)

    def openai(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling shape."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }


#: The core's `finish` tool (clawsdk.models.prompt.FINISH_TOOL, the one definition) as a tool of the session:
#: ToolSession answers it itself, so ending by `finish` is recorded the same way by every agent and `serve`.
#: how deep a tool call's arguments may nest; the MCP client cannot even encode ~250 levels
MAX_ARGUMENT_DEPTH = 64


def arguments_problem(args: Any) -> str | None:
    """Why `args` cannot go to a tool server as its arguments (a JSON object of plain JSON values, nested
    at most MAX_ARGUMENT_DEPTH deep, numbers finite), or None. Checked before the call: the client failing to
    encode a request would otherwise read as a broken tool server (sandbox_error), an agent's doing made
    unscored. NaN and Infinity are not JSON (`serve` and the proxy refuse them as they parse a request)."""
    if not isinstance(args, dict):
        return f"are {type(args).__name__}, not an object"
    stack: list[tuple[Any, int]] = [(args, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            return f"nest deeper than {MAX_ARGUMENT_DEPTH} levels"
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                return "have a key that is not a string"
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, float) and not math.isfinite(value):
            return f"hold {value!r}, which is not a finite number (JSON has no NaN or Infinity)"
        elif not (value is None or isinstance(value, (str, int, float, bool))):
            return f"hold a {type(value).__name__}, which is not a JSON value"
    return None


FINISH = ToolSpec(name=FINISH_TOOL["function"]["name"], description=FINISH_TOOL["function"]["description"],
                  input_schema=FINISH_TOOL["function"]["parameters"], server="clawsdk", remote_name="finish")


@dataclass
class ToolResult:
    text: str
    is_error: bool = False
    structured: Any = None
    #: seconds this call spent starting the tool host inside the sandbox (its first call), not the tool's
    host_start_s: float | None = None


def _text_of(result: Any) -> str:
    parts = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        parts.append(text if text is not None else f"[{getattr(item, 'type', 'content')}]")
    return "\n".join(parts)


@dataclass
class ToolSource:
    """One MCP server of a task's tools, as the rollout gets it.

    `server` is built in the runner, bound to the sandbox: it lists the tools, and runs those of them its
    `host_tools` names (clawsdk.mcp.toolkit.ToolServer; byte-level file tools). Every other tool runs behind
    the sandbox's boundary, in the tool host, which imports the server from `ref`. A `command` source is a
    stdio MCP server started inside the sandbox (a task's `mcp_servers`, a skill pack that declares one)."""

    name: str
    server: Any = None
    ref: ServerRef | None = None
    command: McpServer | None = None
    #: {skill_dir} in `command`: the skill's folder (a skill pack's own server)
    skill: str | None = None
    #: every tool runs in this process (a server handed to ToolSession.open as a (name, server) pair)
    in_process: bool = False

    def host_tools(self) -> frozenset[str] | None:
        """The tools that run in the runner; None: all of them."""
        if self.in_process:
            return None
        return frozenset(getattr(self.server, "host_tools", ()) or ())


class ToolSession:
    """Connected MCP clients and the tools they offer, under one name space."""

    def __init__(self, recorder: Recorder, limits: Limits):
        self.recorder = recorder
        self.limits = limits
        self.clients: dict[str, Client] = {}
        self.specs: dict[str, ToolSpec] = {}
        #: server name -> its instructions, for servers with no client here (inside the sandbox)
        self._instructions: dict[str, str] = {}
        #: the rollout's sandbox: a call after which it reports a failure ends the rollout as sandbox_error
        self.sandbox: Any = None
        #: set once the agent called `finish`; later calls are refused
        self.finished = anyio.Event()

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, servers: Sequence[tuple[str, Any] | ToolSource], recorder: Recorder, limits: Limits | None = None,
        policy: ToolPolicy | None = None, sandbox: Any = None, task: Task | None = None,
    ) -> AsyncIterator[ToolSession]:
        """Connect to each server in order; a later tool whose name is taken becomes SERVER__NAME.

        A (name, server) pair runs all its tools in this process (a test, a benchmark, a server you trust); a
        ToolSource runs behind `sandbox`'s boundary whatever its server does not declare safe to run here
        (clawsdk.mcp.toolhost). `policy` (the task's tool_policy) leaves out the tools it does not allow."""
        from clawsdk.tasks.policy import tool_allowed

        session = cls(recorder, limits or Limits())
        session.sandbox = sandbox
        sources = [s if isinstance(s, ToolSource) else ToolSource(name=s[0], server=s[1], in_process=True)
                   for s in servers]
        async with contextlib.AsyncExitStack() as stack:
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)  # the tool hosts inside the sandbox stop with the session
            boundary = Boundary(session, sandbox, task, tg) if sandbox is not None else None

            def add(server_name: str, tool: Any, host: Any = None, remote: str | None = None) -> None:
                if not tool_allowed(policy, tool.name, server_name):
                    return
                name = tool.name if tool.name not in session.specs else f"{server_name}__{tool.name}"
                session.specs[name] = ToolSpec(name=name, description=tool.description or "",
                                               input_schema=dict(tool.input_schema or {}), server=server_name,
                                               remote_name=remote or tool.name, host=host)

            for src in sources:
                if src.command is not None:
                    if boundary is None:
                        raise SandboxError(f"tool server {src.name!r} runs inside a sandbox; none was given")
                    host = boundary.command_host(src)
                    for tool in await host.list_tools():
                        add(src.name, tool, host)
                    # a skill pack's SKILL.md speaks for its server; a task's server speaks for itself
                    said = getattr(src.server, "instructions", None) or host.instructions
                    if said:
                        session._instructions[src.name] = said
                    continue
                client = await stack.enter_async_context(Client(src.server))
                session.clients[src.name] = client
                here = src.host_tools()
                for tool in (await client.list_tools()).tools:
                    if here is None or tool.name in here:
                        add(src.name, tool)
                    else:
                        if boundary is None:
                            raise SandboxError(f"tool {tool.name!r} of {src.name!r} runs behind a sandbox's "
                                               "boundary; none was given")
                        add(src.name, tool, boundary.hosted(src), f"{src.name}{HOSTED_SEPARATOR}{tool.name}")
            yield session

    def tools(self) -> list[ToolSpec]:
        return list(self.specs.values())

    def instructions(self) -> dict[str, str]:
        """Each server's instructions (a skill's SKILL.md text), for the agent's system prompt."""
        found = {name: c.instructions for name, c in self.clients.items() if c.instructions}
        return found | self._instructions

    def offers_finish(self) -> bool:
        """Whether `finish` is the core's (a task's own tool of that name takes precedence)."""
        return FINISH.name not in self.specs

    async def finish(self, args: Any = None) -> ToolResult:
        """End the agent's work: recorded as a `finish` note; every later call is refused."""
        if self.finished.is_set():
            return ToolResult("finish was already called; the rollout has ended", is_error=True)
        await self.recorder.record(Note(event="finish", extra={"args": args if args is not None else {}}))
        self.finished.set()
        return ToolResult("finished")

    async def _answer(self, name: str, args: dict[str, Any], problem: str | None) -> ToolResult:
        """What the call answers: the tool's result, or an error result the agent can read."""
        if not isinstance(name, str) or not name.strip():
            return ToolResult(f"a tool call needs a name; the tools are: {', '.join(self.specs)}",
                              is_error=True)
        spec = self.specs.get(name)
        if problem:
            return ToolResult(f"the arguments of {name!r} {problem}; send a JSON object", is_error=True)
        if spec is None:
            return ToolResult(f"unknown tool {name!r}; available: {', '.join(self.specs)}", is_error=True)
        # a little past the tool's own timeout, so a tool that honours it can report first; a tool behind the
        # boundary is held to its time there (its process's start has a budget of its own)
        outer = math.inf if spec.host is not None else self.limits.tool_timeout_s + 5
        host_start_s = None
        with anyio.move_on_after(outer) as scope:
            try:
                if spec.host is not None:  # behind the boundary: a timeout or a crash there is a tool error
                    raw, host_start_s = await spec.host.call_tool(spec.remote_name, args, public=name)
                else:
                    raw = await self.clients[spec.server].call_tool(spec.remote_name, args)
            except Exception as e:  # tool errors come back as results; an exception is a broken server
                await self.recorder.record(ErrorEvent(error_kind="sandbox_error", message=f"{e}"))
                raise SandboxError(f"tool server {spec.server!r} failed during {name}: "
                                   f"{type(e).__name__}: {e}") from e
        if scope.cancelled_caught:
            return ToolResult(f"tool {name!r} did not answer within {self.limits.tool_timeout_s:g} s",
                              is_error=True)
        # a listed name that is not UTF-8 holds a lone surrogate: no model request could carry it
        text, structured = bounded_result(_text_of(raw), raw.structured_content, self.limits.tool_output_chars)
        text, structured = printable(text), printable_data(structured)
        if structured == {"result": text}:  # a plain-text tool: the text says it all
            structured = None
        return ToolResult(text, bool(raw.is_error), structured, host_start_s)

    async def _record_result(self, call: int, name: str, result: ToolResult, started: float, *,
                             cancelled: bool = False) -> None:
        """The `tool_result` event; `call` is the seq of its `tool_call`, so that results of calls made
        concurrently, which land in the order they finish, still pair with their calls. A call `cancelled`
        before its tool answered is neither failed nor succeeded: `is_error` null, `cancelled` true."""
        host_ms = None if result.host_start_s is None else round(result.host_start_s * 1000, 1)
        event = ToolResultEvent(tool=name, call=call, is_error=None if cancelled else result.is_error,
                                content=result.text, cancelled=True if cancelled else None,
                                structured=result.structured, tool_host_start_ms=host_ms,
                                duration_ms=(time.perf_counter() - started) * 1000)
        with anyio.CancelScope(shield=True):  # a cancellation here would lose a result the call already has
            await self.recorder.record(event)

    async def call(self, name: str, args: dict[str, Any] | None = None) -> ToolResult:
        """Call a tool; unknown tools, bad arguments and timeouts come back as error results.

        `finish` (unless the task has its own tool of that name) ends the agent's work."""
        if name == FINISH.name and self.offers_finish():
            return await self.finish(args)
        if self.finished.is_set():
            return ToolResult(f"the rollout has ended (finish); {name} was not run", is_error=True)
        args = {} if args is None else args
        if self.recorder.n_tool_calls >= self.limits.max_tool_calls:
            raise AgentError(f"tool call budget of {self.limits.max_tool_calls} calls exhausted")
        problem = arguments_problem(args)
        if problem:  # recorded in outline (reprlib caps depth and length): it may not even encode
            args = {"unreadable": reprlib.repr(args)}
        call = await self.recorder.record(ToolCall(tool=name, args=args))
        started = time.perf_counter()
        try:
            result = await self._answer(name, args, problem)
        except anyio.get_cancelled_exc_class():
            # an external client gave up on the request (notifications/cancelled), the agent stopped waiting,
            # or the rollout is being cancelled. The MCP client passes the cancellation on and the tool stops
            # (exec kills its processes), but what it did until then stays: the call still gets its result,
            # or the store keeps a call that never answered, and never as a failure, or an agent could cancel
            # each call once its work was done and leave a trajectory of failed calls that passed
            ran_s = time.perf_counter() - started
            cancelled = ToolResult(f"the call of {name!r} was cancelled after {ran_s:.1f} s, before the tool "
                                   "answered; what it did until then may have taken effect")
            try:
                await self._record_result(call, name, cancelled, started, cancelled=True)
            except Exception as e:  # a store already closed must not replace the cancellation
                log.warning("the cancelled call of %r was not recorded: %s: %s", name, type(e).__name__, e)
            raise
        await self._record_result(call, name, result, started)
        failure = getattr(self.sandbox, "failure", None)
        if failure:
            raise SandboxError(f"the sandbox broke during {name}: {failure}")
        return result
