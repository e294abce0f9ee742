"""Long-lived processes behind a sandbox's boundary (`Sandbox.spawn`), for the backends that start them as
host child processes (local, bwrap): pipes to stdin and stdout, the end of stderr kept, killed with all it
started when the context ends."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio

from clawsdk.sandbox.base import ProcessLimits, SandboxProcess

#: how much of a process's stderr is kept for `stderr_tail`
STDERR_KEPT = 8 * 1024


def rlimit_args(limits: ProcessLimits | None) -> list[str]:
    """`prlimit` options for `limits` (none for a limit left at 0)."""
    if limits is None:
        return []
    args = []
    if limits.memory_mb:
        args.append(f"--as={limits.memory_mb * 1024 * 1024}")
    if limits.cpu_s:
        args.append(f"--cpu={limits.cpu_s}")
    return args


def prlimited(argv: Sequence[str], limits: ProcessLimits | None) -> list[str]:
    """`argv` under `prlimit` with `limits`, where there are any."""
    args = rlimit_args(limits)
    if not args:
        return list(argv)
    return [shutil.which("prlimit") or "prlimit", *args, "--", *argv]


class StderrTail:
    """The last STDERR_KEPT bytes a stream gave."""

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.size - len(self.chunks[0]) >= STDERR_KEPT:
            self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        return b"".join(self.chunks)[-STDERR_KEPT:].decode("utf-8", "replace")


class ChildProcess(SandboxProcess):
    """A host child process (its group killed together)."""

    def __init__(self, proc: Any, kill_group: Any):
        self.proc = proc
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self._kill_group = kill_group
        self._stderr = StderrTail()

    @property
    def returncode(self) -> int | None:  # type: ignore[override]  # read-only here: the process sets it
        return self.proc.returncode

    def stderr_tail(self) -> str:
        return self._stderr.text()

    async def drain_stderr(self) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in self.proc.stderr:
                self._stderr.add(chunk)

    async def wait(self) -> int:
        return await self.proc.wait()

    async def kill(self) -> None:
        self._kill_group(self.proc.pid)


#: how long a process behind the boundary has to exit once its stdin is closed, before it is killed
WIND_DOWN_S = 2.0


async def wind_down(proc: SandboxProcess) -> None:
    """MCP's shutdown: close its stdin, give it WIND_DOWN_S to exit (a server exits on end of input, and its
    CPU time is then counted where its parent waits for it), then the caller kills what is left."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(Exception):
        await proc.stdin.aclose()
    with anyio.move_on_after(WIND_DOWN_S):
        await proc.wait()


@contextlib.asynccontextmanager
async def serving(proc: SandboxProcess, pump: Any) -> AsyncIterator[SandboxProcess]:
    """Run `pump` (what moves the process's output) while the caller uses `proc`; then wind it down, kill
    what is left and stop the pump."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        try:
            yield proc
        finally:
            with anyio.CancelScope(shield=True):
                await wind_down(proc)
                await proc.kill()
            tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def child_process(argv: Sequence[str], *, cwd: str, env: dict[str, str], kill_group: Any,
                        groups: set[int] | None = None) -> AsyncIterator[ChildProcess]:
    """Start `argv` as a child in a session of its own; leaving kills its group and reaps it."""
    proc = await anyio.open_process(list(argv), cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
    if groups is not None:
        groups.add(proc.pid)
    child = ChildProcess(proc, kill_group)
    try:
        async with serving(child, child.drain_stderr):
            yield child
    finally:
        kill_group(proc.pid)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await proc.aclose()  # its pipes closed and the process reaped, before the event loop may go
        if groups is not None:
            groups.discard(proc.pid)
