"""Per-call latency of a tool call through each way an agent reaches clawsdk's tools, against the bare MCP call.

    .venv/bin/python benchmarks/transports.py [--calls 200] [--json out.json]

- bare: mcp.Client on the core tool server in-process, nothing recorded (the baseline)
- session: clawsdk's ToolSession in-process, every call recorded in memory (what the built-in agents use)
- serve_inproc: the `clawsdk serve` MCP server in-process, every call recorded to the SQLite store
- stdio_bare: the core tool server alone as a stdio subprocess, nothing recorded (the transport's own cost)
- stdio: `clawsdk serve TASK` as a subprocess over stdio, recorded to a SQLite store
- http: `clawsdk serve TASK --http` over streamable HTTP with the bearer token, recorded to the store

Each transport does a `read` of the same small file `--calls` times after a warm-up; the
figures are per call (median and mean, ms) and the ratio of the median to the bare call's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from clawsdk_plugins.sandboxes.local import LocalSandbox
from clawsdk_tools.core import core_server
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from clawsdk.mcp.session import ToolSession
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import File, Task
from clawsdk.tasks.native import save_task

CLAWSDK = str(Path(sys.executable).parent / "clawsdk")
TASK = Task(id="bench", instruction="benchmark", workspace=[File(path="notes.txt", text="hello\n" * 20)],
            verifier={"checks": [{"type": "file_exists", "path": "notes.txt"}]})


async def timed(call, n: int) -> list[float]:
    for _ in range(10):
        await call()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await call()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def bare(n: int) -> tuple[float, list[float]]:
    async with LocalSandbox() as sb:
        await sb.start(TASK)
        t = time.perf_counter()
        async with Client(core_server(sb, TASK)) as c:
            connect = time.perf_counter() - t
            return connect, await timed(lambda: c.call_tool("read", {"path": "notes.txt"}), n)


async def session(n: int) -> tuple[float, list[float]]:
    async with LocalSandbox() as sb:
        await sb.start(TASK)
        t = time.perf_counter()
        async with ToolSession.open([("core", core_server(sb, TASK))], Recorder(None, "bench")) as ts:
            connect = time.perf_counter() - t
            ts.limits = ts.limits.model_copy(update={"max_tool_calls": 10**9})
            return connect, await timed(lambda: ts.call("read", {"path": "notes.txt"}), n)


STDIO_SERVER = """
import anyio
from clawsdk.tasks.model import File, Task
from clawsdk_plugins.sandboxes.local import LocalSandbox
from clawsdk_tools.core import core_server
T = Task(id="b", instruction="b", workspace=[File(path="notes.txt", text="hello\\n" * 20)])
async def main():
    async with LocalSandbox() as sb:
        await sb.start(T)
        await core_server(sb, T).run_stdio_async()
anyio.run(main)
"""


async def stdio_bare(n: int) -> tuple[float, list[float]]:
    params = StdioServerParameters(command=sys.executable, args=["-c", STDIO_SERVER])
    t = time.perf_counter()
    async with Client(params, mode="legacy") as c:
        await c.list_tools()
        connect = time.perf_counter() - t
        return connect, await timed(lambda: c.call_tool("read", {"path": "notes.txt"}), n)


async def serve_inproc(n: int, task: Task, db: Path) -> tuple[float, list[float]]:
    from clawsdk.serve import ServeConfig, hosting

    t = time.perf_counter()
    async with hosting(ServeConfig(task=task, db=db, run_id="bench-inproc", sandbox="local")) as host:
        async with Client(host.server(), mode="legacy") as c:
            await c.list_tools()
            connect = time.perf_counter() - t
            calls = await timed(lambda: c.call_tool("read", {"path": "notes.txt"}), n)
            await c.call_tool("finish", {})
    return connect, calls


async def stdio(n: int, folder: Path, db: Path) -> tuple[float, list[float]]:
    params = StdioServerParameters(command=CLAWSDK, args=["serve", str(folder), "--db", str(db), "--run-id", "bench-stdio",
                                                             "--sandbox", "local"])
    t = time.perf_counter()
    async with Client(params, mode="legacy") as c:
        await c.list_tools()
        connect = time.perf_counter() - t
        calls = await timed(lambda: c.call_tool("read", {"path": "notes.txt"}), n)
        await c.call_tool("finish", {})
        return connect, calls


async def http(n: int, folder: Path, db: Path) -> tuple[float, list[float]]:
    proc = subprocess.Popen([CLAWSDK, "serve", str(folder), "--http", "--port", "0", "--max-rollouts", "1",  # noqa: ASYNC220 - only starts it
                             "--db", str(db), "--run-id", "bench-http"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        t = time.perf_counter()
        info = json.loads(proc.stdout.readline())
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {info['token']}"}, timeout=60) as h:
            async with Client(streamable_http_client(info["url"], http_client=h)) as c:
                await c.list_tools()
                connect = time.perf_counter() - t
                calls = await timed(lambda: c.call_tool("read", {"path": "notes.txt"}), n)
                await c.call_tool("finish", {})
        proc.wait(timeout=60)
        return connect, calls
    finally:
        proc.kill()


async def main(n: int) -> dict:
    limits = TASK.limits.model_copy(update={"max_tool_calls": n + 100})
    task = TASK.model_copy(update={"limits": limits})
    with tempfile.TemporaryDirectory() as tmp:
        folder = save_task(task, Path(tmp) / "bench")
        db = Path(tmp) / "bench.db"
        results = {"bare": await bare(n), "session": await session(n),
                   "serve_inproc": await serve_inproc(n, task, db), "stdio_bare": await stdio_bare(n),
                   "stdio": await stdio(n, folder, db), "http": await http(n, folder, db)}
    base = statistics.median(results["bare"][1])
    out = {}
    print(f"{'transport':12} {'median ms':>10} {'mean ms':>9} {'p95 ms':>8} {'x bare':>7} {'connect s':>10}")
    for name, (connect, calls) in results.items():
        med = statistics.median(calls)
        p95 = sorted(calls)[int(0.95 * len(calls)) - 1]
        out[name] = {"median_ms": round(med, 3), "mean_ms": round(statistics.fmean(calls), 3),
                     "p95_ms": round(p95, 3), "ratio_to_bare": round(med / base, 2), "connect_s": round(connect, 3),
                     "calls": len(calls)}
        print(f"{name:12} {med:10.3f} {statistics.fmean(calls):9.3f} {p95:8.3f} {med / base:7.2f} {connect:10.3f}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", dest="json_out", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    figures = anyio.run(main, args.calls)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2))
