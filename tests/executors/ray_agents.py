"""Agents for the Ray executor tests; they run inside Ray worker processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio

from clawsdk.runtime.agent import Agent


class KillsItsWorker(Agent):
    """Writes the deliverable, lets the events stream out, then SIGKILLs its own worker process.

    With `once`, only the first attempt dies (a marker file remembers it); later attempts finish.
    """

    name = "kills-its-worker"

    def __init__(self, marker: str, driver_pid: int, once: bool = True):
        self.marker = marker
        self.driver_pid = driver_pid
        self.once = once

    async def run(self, ctx):
        await ctx.recorder.record("note", {"pid": os.getpid()})
        await ctx.tools.call("write", {"path": "done.txt", "content": "done\n"})
        assert os.getpid() != self.driver_pid, "this agent must run on a Ray worker, not in the test process"
        if self.once:
            try:  # exactly one rollout of the run dies, even when several reach this point at once
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
        await anyio.sleep(0.5)  # the batch streams out before the worker dies (batches leave every 50 ms)
        os.kill(os.getpid(), signal.SIGKILL)


class WaitsForGo(Agent):
    """Makes one tool call, then waits until the test creates a file; records where it ran."""

    name = "waits-for-go"

    def __init__(self, go: str, cancelled: str | None = None):
        self.go = go
        self.cancelled = cancelled

    async def run(self, ctx):
        import ray

        assigned = ray.get_runtime_context().get_assigned_resources()
        await ctx.recorder.record("note", {"pid": os.getpid(), "resources": assigned})
        await ctx.tools.call("write", {"path": "done.txt", "content": "done\n"})
        try:
            while not Path(self.go).exists():
                await anyio.sleep(0.02)
        except anyio.get_cancelled_exc_class():
            if self.cancelled:
                Path(self.cancelled).write_text(str(os.getpid()))
            raise


class Chatty(Agent):
    """Records many events as fast as it can and publishes how many it has made (for backpressure)."""

    name = "chatty"

    def __init__(self, n: int, progress: str):
        self.n = n
        self.progress = progress

    async def run(self, ctx):
        for i in range(self.n):
            await ctx.recorder.record("note", {"i": i})
            if i % 10 == 0:
                tmp = self.progress + ".tmp"
                Path(tmp).write_text(str(i + 1))
                os.replace(tmp, self.progress)
        await ctx.tools.call("write", {"path": "done.txt", "content": "done\n"})


class WhereAmI(Agent):
    """Records where it runs (node, pid, working directory), what install prefix it sees, and its option."""

    name = "where-am-i"

    def __init__(self, home: str = ""):
        self.home = home

    async def run(self, ctx):
        import ray

        context = ray.get_runtime_context()
        await ctx.recorder.record("note", {
            "pid": os.getpid(), "node": context.get_node_id(), "cwd": os.getcwd(),
            "resources": context.get_assigned_resources(), "home_option": self.home,
            "prefix_env": os.environ.get("CLAWSDK_PROBE_HOME"), "secret_env": os.environ.get("CLAWSDK_PROBE_TOKEN")})
        await ctx.tools.call("write", {"path": "done.txt", "content": "done\n"})
