"""The runner's side of the boundary: an MCP client of a process that runs inside the sandbox.

A `ToolHost` is one such process, started through `Sandbox.spawn` the first time one of its tools is
called (or at once, for a server whose tools must be listed), and spoken to over its stdin and stdout. The
runner only moves MCP messages: what a tool does to a file, however hostile the file, costs the process
inside, never the runner, and the kernel bounds it there (memory, CPU). A call past `tool_timeout_s`
kills the process, answers the agent that the tool timed out, and the next call starts a new one; so does
one whose answer is longer than a result may be. The rollout goes on either way.

A start that fails before this backend has ever started a tool host in this process is the sandbox's
failure (sandbox_error, retried): the runtime cannot run there. Once one has started, a failure is the
agent's to read as a tool error, since only what runs in the sandbox (the agent's processes) can stop it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.message import SessionMessage

from clawsdk.errors import SandboxError
from clawsdk.sandbox.base import ProcessLimits

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from clawsdk.sandbox.base import Sandbox, SandboxProcess
    from clawsdk.tasks.model import Limits

log = logging.getLogger(__name__)

#: backends on which a tool host has started in this process: after that, a failure to start is the agent's
_proven: set[str] = set()
#: the most a tool host may take to start (at least the task's tool time limit)
START_TIMEOUT_S = 30.0


def line_limit(output_chars: int) -> int:
    """The longest line the runner reads from a tool host: a result of `output_chars` characters, escaped as
    JSON and with its structured copy, fits; a process that sends more is stopped, and the runner never
    holds more than this of it."""
    return 4 * output_chars + 64 * 1024


@contextlib.asynccontextmanager
async def stdio_transport(proc: SandboxProcess, max_line: int,
                          on_overflow: Any = None) -> AsyncIterator[tuple[Any, Any]]:
    """MCP's stdio framing (one JSON-RPC message per line) over a sandboxed process's pipes, reading at most
    `max_line` bytes of one line; past it `on_overflow()` is called, the process killed and the stream ended."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        buffer = bytearray()
        async with read_writer:
            try:
                while True:
                    try:
                        chunk = await proc.stdout.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        return
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[:end + 1]
                        if not line.strip():
                            continue
                        try:
                            message: SessionMessage | Exception = SessionMessage(
                                types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                        except ValueError as e:
                            message = e
                        await read_writer.send(message)
                    if len(buffer) > max_line:
                        if on_overflow is not None:
                            on_overflow()
                        await proc.kill()
                        return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return

    async def writer() -> None:
        async with write_reader:
            try:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await proc.stdin.send(data.encode("utf-8", "replace"))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            tg.cancel_scope.cancel()


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class ToolHost:
    """One MCP server process behind `sandbox`'s boundary, owned by task group `tg` (the tool session's)."""

    def __init__(self, name: str, sandbox: Sandbox, argv: Sequence[str], *, env: dict[str, str], limits: Limits,
                 tg: TaskGroup, prelude: bytes | Callable[[], bytes] | None = None):
        self.name = name
        self.sandbox = sandbox
        self.argv = list(argv)
        self.env = env
        self.limits = limits
        self.tg = tg
        self.prelude = prelude
        self.client: Client | None = None
        self.proc: SandboxProcess | None = None
        self.instructions: str | None = None
        self.starts = 0
        self._scope: anyio.CancelScope | None = None
        self._stopped: anyio.Event | None = None
        self._lock = anyio.Lock()
        #: why the last process ended, when the runner ended it (a timeout, an answer too long)
        self._why: str | None = None

    @property
    def process_limits(self) -> ProcessLimits:
        lim = self.limits
        return ProcessLimits(memory_mb=lim.tool_memory_mb, cpu_s=math.ceil(lim.timeout_s + lim.tool_timeout_s))

    # ---- the process ---------------------------------------------------------------------------

    def _overflowed(self) -> None:
        self._why = "overflow"

    async def _own(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the process and its MCP client until stopped; in one task, as MCP clients must be."""
        scope = anyio.CancelScope()
        stopped = anyio.Event()
        self._scope, self._stopped = scope, stopped
        started = False
        try:
            with scope:
                async with self.sandbox.spawn(self.argv, env=self.env, limits=self.process_limits) as proc:
                    self.proc = proc
                    if self.prelude is not None:
                        await proc.stdin.send(self.prelude() if callable(self.prelude) else self.prelude)
                    transport = stdio_transport(proc, line_limit(self.limits.tool_output_chars),
                                                on_overflow=self._overflowed)
                    async with Client(transport, read_timeout_seconds=None) as client:
                        self.client = client
                        self.instructions = client.instructions
                        started = True
                        task_status.started()
                        await anyio.sleep_forever()
        except Exception as e:  # the process or its client ended: said at the next call
            if not started:
                raise
            log.debug("tool host %s ended: %s: %s", self.name, type(e).__name__, e)
        finally:
            self.client = None
            stopped.set()

    async def start(self) -> Client:
        """The connected client, starting the process if none runs."""
        async with self._lock:
            if self.client is not None:
                return self.client
            self.starts += 1
            self._why = None
            try:
                await self.tg.start(self._own)
            except Exception as e:
                raise self._start_failed(e) from None
            _proven.add(self.sandbox.name)
            assert self.client is not None
            return self.client

    def _start_failed(self, e: BaseException) -> Exception:
        detail = self._ended()
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        text = f"the {self.name} tool server could not start inside the {self.sandbox.name} sandbox ({why})"
        if detail:
            text += f"; {detail}"
        if isinstance(e, NotImplementedError) or self.sandbox.name not in _proven:
            return SandboxError(text)
        return ToolHostFailed(text)

    def _ended(self) -> str:
        """What the last process said as it ended: its exit and the end of its stderr."""
        proc = self.proc
        if proc is None:
            return ""
        parts = []
        code = proc.returncode
        if code is not None and code < 0:
            sig = -code
            parts.append("it ran out of CPU time" if sig == signal.SIGXCPU else
                         f"it was killed ({signal.Signals(sig).name if sig in signal.valid_signals() else sig})")
        elif code:
            parts.append(f"it exited with {code}")
        tail = proc.stderr_tail().strip()
        if "MemoryError" in tail:
            parts.append(f"it ran out of memory (its limit is {self.limits.tool_memory_mb} MiB)")
        if tail:
            parts.append("its last output: " + tail[-600:])
        return "; ".join(parts)

    async def stop(self) -> None:
        """Kill the process (and what it started); the next call starts a new one."""
        scope, stopped = self._scope, self._stopped
        if scope is None or stopped is None:
            return
        if self.proc is not None:
            with anyio.CancelScope(shield=True):
                await self.proc.kill()
        scope.cancel()
        with anyio.CancelScope(shield=True):
            await stopped.wait()

    # ---- calls ---------------------------------------------------------------------------------

    async def list_tools(self) -> list[types.Tool]:
        client = await self.start()
        return list((await client.list_tools()).tools)

    async def call_tool(self, name: str, args: dict[str, Any],
                        public: str | None = None) -> tuple[types.CallToolResult, float | None]:
        """Call tool `name` inside; a timeout, a crash or an answer too long comes back as an error result
        (`public`: the name the agent knows it by). Returns it with the seconds it took to start the process,
        when this call started it (None otherwise)."""
        cold = self.client is None
        result, start_s = await self._call(name, args, public or name)
        return result, start_s if cold else None

    async def _call(self, name: str, args: dict[str, Any], public: str) -> tuple[types.CallToolResult, float]:
        """The result, and the seconds spent starting the process (0 when it ran already)."""
        timeout = self.limits.tool_timeout_s
        failure: str | None = None
        began = time.perf_counter()
        # starting the process has a budget of its own: the tool's time limit is the tool's (a start takes about
        # a second, several on a loaded machine, and would otherwise eat a short limit)
        with anyio.move_on_after(max(START_TIMEOUT_S, timeout)) as starting:
            try:
                client = await self.start()
            except ToolHostFailed as e:
                failure = str(e)
        if starting.cancelled_caught:
            await self.stop()
            failure = f"it did not start within {max(START_TIMEOUT_S, timeout):g} s"
        start_s = time.perf_counter() - began
        if failure is not None:
            return error_result(f"{public} failed: its tool server could not start ({failure}); the next call "
                                "tries again"), start_s
        with anyio.move_on_after(timeout) as deadline:
            try:
                return await client.call_tool(name, args), start_s
            except Exception as e:  # the process died or broke the protocol mid-call
                failure = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if deadline.cancelled_caught:
            self._why = "timeout"
            await self.stop()
            return error_result(f"{public} did not answer within {timeout:g} s (the task's tool time limit): it "
                                "was stopped; the next call starts it afresh. Ask for less at a time (a smaller "
                                "file, a narrower range or pattern)"), start_s
        if self.proc is not None:  # its exit says why: wait a moment for it
            with anyio.move_on_after(1):
                await self.proc.wait()
        ended = self._ended()
        overflow = self._why == "overflow"
        await self.stop()
        if overflow:
            return error_result(f"{public} answered more than the runner reads of one result "
                                f"({line_limit(self.limits.tool_output_chars):,} bytes): it was stopped; ask "
                                "for less at a time"), start_s
        return error_result(f"{public} failed: its tool server stopped ({ended or failure}); the next call "
                            "starts it afresh"), start_s


class ToolHostFailed(Exception):
    """A tool host could not start once tool hosts were known to start on this backend: the agent's doing."""
