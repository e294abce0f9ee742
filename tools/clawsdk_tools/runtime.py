"""OpenClaw's runtime group: `exec` (foreground, or background) and `process` (start/list/poll/log/write/kill).

A background process is one `sandbox.exec` call run by a task the tool server owns for its
lifetime: its output goes to a log file in the sandbox's home (outside the workspace, so the
verifier never sees it), `poll` reads what is new, and `kill` cancels the call, which kills
the command's whole process tree. When the tool server closes, every process it started goes.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from clawsdk.mcp.toolkit import tool_errors, truncate

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from clawsdk.sandbox.base import Sandbox
    from clawsdk.tasks.model import Task

MAX_STREAM_CHARS = 30_000
PROC_DIR = '"${HOME:-/tmp}/.clawsdk-proc"'


class ExecOutput(BaseModel):
    exit_code: int | None = Field(None, description="None while a background command runs")
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = Field(False, description="stdout or stderr was cut; the note at the end says how much")
    sessionId: str | None = Field(None, description="background=true: follow it with the process tool")
    status: str | None = None


class ProcessInfo(BaseModel):
    sessionId: str
    command: str
    status: Literal["running", "exited", "killed", "timed_out"]
    exit_code: int | None = None
    runtime_s: float


class ProcessResult(BaseModel):
    sessionId: str | None = None
    command: str | None = None
    status: str | None = None
    exit_code: int | None = None
    runtime_s: float | None = None
    output: str | None = Field(None, description="stdout and stderr, interleaved, from `offset` on")
    offset: int | None = Field(None, description="pass it as offset to the next poll to get only newer output")
    truncated: bool = False
    processes: list[ProcessInfo] | None = Field(None, description="action='list': every process")


def _cut(text: str) -> tuple[str, bool]:
    cut = truncate(text, MAX_STREAM_CHARS, hint="redirect to a file and read it in parts")
    return cut, cut is not text


@dataclass
class _Proc:
    id: str
    command: str
    started: float
    scope: anyio.CancelScope
    status: str = "running"
    exit_code: int | None = None
    ended: float | None = None
    done: anyio.Event | None = None

    def info(self) -> ProcessInfo:
        end = self.ended or time.monotonic()
        return ProcessInfo(sessionId=self.id, command=self.command, status=self.status,
                           exit_code=self.exit_code, runtime_s=round(end - self.started, 3))


class ProcessManager:
    """The background processes of one tool server; lives as long as the server's lifespan."""

    def __init__(self, sandbox: Sandbox, max_lifetime_s: float):
        self.sandbox = sandbox
        self.max_lifetime_s = max_lifetime_s
        self.procs: dict[str, _Proc] = {}
        self.tg: TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ProcessManager]:
        async with anyio.create_task_group() as tg:
            self.tg = tg
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()  # the server is closing: its processes go with it
                self.tg = None

    async def start(self, command: str, workdir: str | None, timeout: float | None) -> ProcessInfo:
        if self.tg is None:
            raise ToolError("background processes are not available on this server connection")
        pid = secrets.token_hex(4)
        limit = min(timeout or self.max_lifetime_s, self.max_lifetime_s)
        log, inp = f"{PROC_DIR}/{pid}.log", f"{PROC_DIR}/{pid}.in"
        # stdin is a FIFO held open read-write by the wrapper, so `write` can feed it and it never blocks
        wrapped = (f"mkdir -p {PROC_DIR} && mkfifo {inp} && exec 3<>{inp} && "
                   f"exec bash -c {shlex.quote(command)} <&3 >{log} 2>&1")
        proc = _Proc(pid, command, time.monotonic(), anyio.CancelScope(), done=anyio.Event())
        self.procs[pid] = proc

        async def run() -> None:
            try:
                with proc.scope:
                    result = await self.sandbox.exec(wrapped, timeout=limit, cwd=workdir)
                    proc.exit_code = result.exit_code
                    proc.status = "timed_out" if result.timed_out else "exited"
                if proc.scope.cancelled_caught:
                    proc.status = "killed"
            except Exception as e:  # the failure is the process's result
                proc.status, proc.exit_code = "exited", -1
                proc.command += f"  [failed to run: {e}]"
            finally:
                proc.ended = time.monotonic()
                assert proc.done is not None
                proc.done.set()

        self.tg.start_soon(run)
        return proc.info()

    def get(self, session_id: str | None) -> _Proc:
        if not session_id:
            raise ToolError("give the sessionId that exec(background=true) or process(action='start') returned")
        proc = self.procs.get(session_id)
        if proc is None:
            known = ", ".join(self.procs) or "none"
            raise ToolError(f"no background process {session_id!r} (running or finished: {known})")
        return proc

    async def read_log(self, proc: _Proc, offset: int) -> ProcessResult:
        # the status as it was before the log is read: a process that ended while `tail` ran was reported
        # exited with the output it wrote last missing, and an agent that polls until exit never saw it
        info = proc.info()
        res = await self.sandbox.exec(f"tail -c +{max(offset, 0) + 1} {PROC_DIR}/{proc.id}.log 2>/dev/null",
                                      timeout=30)
        out, cut = _cut(res.stdout)
        return ProcessResult(**info.model_dump(), output=out, truncated=cut,
                             offset=max(offset, 0) + len(res.stdout.encode("utf-8")))

    async def kill(self, proc: _Proc) -> ProcessInfo:
        if proc.status == "running":
            proc.scope.cancel()
            assert proc.done is not None
            with anyio.fail_after(10):
                await proc.done.wait()
        return proc.info()

    async def write(self, proc: _Proc, data: str) -> ProcessInfo:
        if proc.status != "running":
            raise ToolError(f"process {proc.id} has {proc.status}; it reads no more input")
        # the process may not have made its stdin fifo yet (start returns at once): a `cat >` before it made a
        # plain file there, mkfifo then failed and the process exited with no output; wait for the fifo
        res = await self.sandbox.exec(
            f'f={PROC_DIR}/{proc.id}.in; for _ in $(seq 100); do [ -p "$f" ] && break; sleep 0.1; done; '
            f'[ -p "$f" ] || {{ echo "its stdin is not ready" >&2; exit 1; }}; cat > "$f"',
            timeout=30, stdin=data.encode("utf-8"))
        if res.exit_code != 0:
            raise ToolError(f"could not write to process {proc.id}: {res.stderr.strip()}")
        return proc.info()


def process_lifespan(manager: ProcessManager):
    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict]:
        async with manager.running():
            yield {}

    return lifespan


def add_runtime_tools(server: MCPServer, sandbox: Sandbox, task: Task | None, procs: ProcessManager) -> None:
    """exec and process."""
    default_timeout = task.limits.tool_timeout_s if task else 60.0

    @server.tool()
    @tool_errors
    async def exec(command: str, timeout: float | None = None, workdir: str | None = None,
                   background: bool = False) -> ExecOutput:
        """Run a bash command in the workspace; returns exit_code, stdout, stderr. With background=true it
        returns a sessionId at once; follow it with the process tool (poll, log, write, kill)."""
        if background:
            info = await procs.start(command, workdir, timeout)
            return ExecOutput(sessionId=info.sessionId, status=info.status)
        limit = min(timeout or default_timeout, default_timeout)
        result = await sandbox.exec(command, timeout=limit, cwd=workdir)
        stdout, cut_out = _cut(result.stdout)
        stderr, cut_err = _cut(result.stderr)
        return ExecOutput(exit_code=result.exit_code, stdout=stdout, stderr=stderr, timed_out=result.timed_out,
                          truncated=cut_out or cut_err or result.truncated)

    @server.tool()
    @tool_errors
    async def process(action: Literal["start", "list", "poll", "log", "write", "kill"],
                      sessionId: str | None = None, command: str | None = None,  # OpenClaw's name
                      workdir: str | None = None, timeout: float | None = None, data: str | None = None,
                      offset: int = 0) -> ProcessResult:
        """Manage background processes. start: run `command` in the background (returns sessionId);
        list: every process; poll/log: status and output from byte `offset` (poll returns the next
        offset); write: send `data` to its stdin; kill: stop it and everything it started."""
        if action == "start":
            if not command:
                raise ToolError("process(action='start') needs a command")
            return ProcessResult(**(await procs.start(command, workdir, timeout)).model_dump())
        if action == "list":
            return ProcessResult(processes=[p.info() for p in procs.procs.values()])
        proc = procs.get(sessionId)
        if action in ("poll", "log"):
            return await procs.read_log(proc, offset)
        if action == "write":
            return ProcessResult(**(await procs.write(proc, data or "")).model_dump())
        return ProcessResult(**(await procs.kill(proc)).model_dump())
