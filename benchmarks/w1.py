"""W1: N tasks x 10 tool calls (write then read a small file, alternating) by the scripted agent.

Prints, for the whole runtime (the sandbox named by --sandbox, local by default; core MCP
server, recorder, store writer, verifier): wall time, CPU time, peak memory, time per rollout and per tool call; and, measured
in the same process, the cost of one tool call through the recorded ToolSession against a
bare in-process `mcp.Client` making the same calls.

    python benchmarks/w1.py                 # 200 and 2,000 tasks
    python benchmarks/w1.py --tasks 200     # one size
    python benchmarks/w1.py --tasks 200 --sandbox bwrap
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
from clawsdk_plugins.agents.builtin import ScriptedAgent
from clawsdk_plugins.sandboxes.local import LocalSandbox
from clawsdk_tools.core import core_server
from mcp import Client
from suite import cpu_s, peak_mb  # this folder is on the path: w1 runs as a script, or suite imports it

from clawsdk import Task, run
from clawsdk.mcp.session import ToolSession
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store
from clawsdk.store.writer import StoreWriter

CALLS = 10


def w1_calls(i: int) -> list[dict]:
    calls = []
    for j in range(CALLS // 2):
        calls.append({"tool": "write", "args": {"path": f"notes/f{j}.txt", "content": f"task {i} line {j}\n" * 4}})
        calls.append({"tool": "read", "args": {"path": f"notes/f{j}.txt"}})
    return calls


def w1_tasks(n: int) -> list[Task]:
    return [
        Task(id=f"w1-{i:05d}", instruction=f"Write and read back five notes ({i}).", category="systems & automation",
             verifier={"checks": [{"type": "text_contains", "path": "notes/f4.txt", "text": f"task {i} line 4"}]})
        for i in range(n)
    ]


async def per_call_costs(n_calls: int, db: Path) -> tuple[float, float]:
    """Seconds per call: bare mcp.Client vs the recorded ToolSession, same server, same calls."""
    task = w1_tasks(1)[0]
    calls = w1_calls(0)
    sandbox = LocalSandbox(SandboxConfig())
    await sandbox.start(task)
    try:
        async with Client(core_server(sandbox, task)) as client:
            for c in calls:  # warm up
                await client.call_tool(c["tool"], c["args"])
            t = time.perf_counter()
            for k in range(n_calls):
                c = calls[k % CALLS]
                await client.call_tool(c["tool"], c["args"])
            bare = (time.perf_counter() - t) / n_calls
        task = task.model_copy(update={"limits": task.limits.model_copy(update={"max_tool_calls": n_calls * 2})})
        async with StoreWriter(db) as writer:
            recorder = Recorder(writer, "bench-percall", 0)
            async with ToolSession.open([("core", core_server(sandbox, task))], recorder, task.limits) as tools:
                for c in calls:
                    await tools.call(c["tool"], c["args"])
                t = time.perf_counter()
                for k in range(n_calls):
                    c = calls[k % CALLS]
                    await tools.call(c["tool"], c["args"])
                recorded = (time.perf_counter() - t) / n_calls
    finally:
        await sandbox.close()
    return bare, recorded


def run_w1(n: int, db: Path, concurrency: int, sandbox: str = "local") -> dict:
    tasks = w1_tasks(n)
    agent = ScriptedAgent(lambda task: w1_calls(int(task.id.split("-")[1])))
    cpu0, t0 = cpu_s(), time.perf_counter()
    result = anyio.run(lambda: run(tasks, agent=agent, db=db, concurrency=concurrency, sandbox=sandbox,
                                  run_id=f"w1-{n}-{sandbox}"))
    wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    ok = sum(1 for o in result.outcomes if o.passed)
    with Store(db) as store:
        events = store.query("SELECT COUNT(*) n FROM events e JOIN rollouts r ON r.id = e.rollout_id "
                             "WHERE r.run_id = ?", [f"w1-{n}-{sandbox}"])[0]["n"]
    return {"tasks": n, "passed": ok, "wall_s": wall, "cpu_s": cpu, "events": events,
            "per_rollout_ms": wall / n * 1000, "per_call_ms": wall / (n * CALLS) * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, action="append", help="task counts (default: 200 and 2000)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--calls", type=int, default=2000, help="calls for the per-call comparison")
    ap.add_argument("--sandbox", default="local", help="sandbox backend of the runs (default local, as the "
                    "per-call comparison; `run` itself would pick bwrap where it works)")
    args = ap.parse_args()
    sizes = args.tasks or [200, 2000]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "w1.db"
        bare, recorded = anyio.run(per_call_costs, args.calls, db)
        print(f"per tool call, {args.calls} calls: bare mcp.Client {bare * 1e3:.3f} ms, "
              f"recorded ToolSession {recorded * 1e3:.3f} ms -> ratio {recorded / bare:.2f}x "
              f"(recording overhead {max(recorded - bare, 0) * 1e6:.0f} us per call)")
        rows = []
        for n in sizes:
            r = run_w1(n, db, args.concurrency, args.sandbox)
            rows.append(r)
            print(f"W1 {n:>5} tasks x {CALLS} calls ({args.sandbox}): wall {r['wall_s']:.2f} s, cpu {r['cpu_s']:.2f} s, "
                  f"peak RSS {peak_mb():.0f} MB, {r['per_rollout_ms']:.1f} ms/rollout, "
                  f"{r['per_call_ms']:.2f} ms/tool call (all-in), passed {r['passed']}/{n}, events {r['events']}")
            if r["passed"] != n:
                sys.exit(f"W1 at {n}: only {r['passed']} of {n} passed")
        if len(rows) > 1:
            a, b = rows[0], rows[-1]
            print(f"cost growth {a['tasks']} -> {b['tasks']} tasks ({b['tasks'] / a['tasks']:.0f}x): "
                  f"wall {b['wall_s'] / a['wall_s']:.2f}x, cpu {b['cpu_s'] / a['cpu_s']:.2f}x")


if __name__ == "__main__":
    main()
