"""`make bench`: the figures users wait on and RL pays for, each next to a baseline measured in the same run.

Every measurement runs in a child process of its own (clean CPU time and peak memory), and the
measurements and their baselines alternate round by round, so a machine that gets busier half way
through slows both sides alike. The table reports the best round of each (the least disturbed).

    python benchmarks/suite.py                      # everything but the long items
    python benchmarks/suite.py --rounds 3 --w1 200  # more rounds, another W1 size
    python benchmarks/suite.py --scale              # also W1 at 1,000 vs 10,000 tasks (several minutes)
    python benchmarks/suite.py --inspect-python /tmp/inspect/bin/python   # also W1 in Inspect AI

Rows:
- start-up: `clawsdk --version` and `clawsdk runs` (on the 1,000-rollout W1 store) against `python -c pass`
- W1: N tasks x 10 tool calls through clawsdk (sandbox, MCP tool server, recorder, store, verifier),
  against a bare `mcp.Client` on a stock MCPServer doing the same calls with one session per task and
  nothing recorded, and against plain Python file operations (the floor); with --inspect-python, against
  Inspect AI running the same calls through its own tool execution, log and scorer (benchmarks/inspect_w1.py,
  in an environment of its own that has inspect-ai)
- recording: events/s through `Recorder.record()` against the store's own batched insert
- loading: listing 2,000 ClawGym-format task folders against reading their files
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CALLS = 10


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- measurements (each runs in its own child process) ----------------------------------------


def m_command(argv: list[str], repeat: int = 5) -> dict:
    """Median wall and CPU time of a command, over `repeat` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}


def m_w1(n: int, db: str) -> dict:
    """The clawsdk runtime: scripted agent, local sandbox, core tools, recorder, store, verifier."""
    import anyio

    sys.path.insert(0, str(HERE))
    from clawsdk_plugins.agents.builtin import ScriptedAgent
    from w1 import w1_calls, w1_tasks

    from clawsdk import run

    tasks = w1_tasks(n)
    agent = ScriptedAgent(lambda task: w1_calls(int(task.id.split("-")[1])))
    cpu0, t0 = cpu_s(), time.perf_counter()
    result = anyio.run(lambda: run(tasks, agent=agent, db=db, concurrency=8, run_id=f"w1-{n}-{os.getpid()}",
                                   sandbox="local"))
    wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    passed = sum(1 for o in result.outcomes if o.passed)
    if passed != n:
        raise SystemExit(f"W1: only {passed} of {n} passed")
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": peak_mb(), "per_call_us": cpu / (n * CALLS) * 1e6}


def m_w1_bare(n: int) -> dict:
    """The same calls from a bare mcp.Client, one session per task, on a stock MCPServer; nothing recorded."""
    import anyio
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    sys.path.insert(0, str(HERE))
    from w1 import w1_calls

    def server_for(root: Path) -> MCPServer:
        server = MCPServer("files")

        @server.tool()
        def write(path: str, content: str) -> str:
            """Write a file."""
            p = root / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content)
            return f"wrote {len(content)} bytes to {path}"

        @server.tool()
        def read(path: str) -> str:
            """Read a file."""
            return (root / path).read_text()

        return server

    async def one(i: int, base: Path, limit: anyio.CapacityLimiter) -> None:
        async with limit:
            root = base / f"t{i}"
            root.mkdir()
            async with Client(server_for(root)) as client:
                await client.list_tools()
                for c in w1_calls(i):
                    await client.call_tool(c["tool"], c["args"])

    async def main(base: Path) -> None:
        limit = anyio.CapacityLimiter(8)
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i, base, limit)

    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        cpu0, t0 = cpu_s(), time.perf_counter()
        anyio.run(main, Path(tmp))
        wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": peak_mb(), "per_call_us": cpu / (n * CALLS) * 1e6}


def m_w1_floor(n: int) -> dict:
    """The same file operations in plain Python: what the work itself costs."""
    sys.path.insert(0, str(HERE))
    from w1 import w1_calls

    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        cpu0, t0 = cpu_s(), time.perf_counter()
        for i in range(n):
            root = Path(tmp) / f"t{i}"
            root.mkdir()
            for c in w1_calls(i):
                p = root / c["args"]["path"]
                if c["tool"] == "write":
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_text(c["args"]["content"])
                else:
                    p.read_text()
        wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": peak_mb(), "per_call_us": cpu / (n * CALLS) * 1e6}


def m_recorder(n: int) -> dict:
    """Events/s through Recorder.record() (one rollout, everything committed)."""
    import anyio

    from clawsdk.store.events import ToolCall
    from clawsdk.store.recorder import Recorder
    from clawsdk.store.writer import StoreWriter

    args = {"path": "notes/f1.txt", "content": "task 1 line 1\n" * 4}

    async def main(db: Path) -> float:
        async with StoreWriter(db) as writer:
            rec = Recorder(writer, "bench", 0)
            cpu0 = cpu_s()
            for _ in range(n):  # the event is built in the loop, as an emitter builds one per call
                await rec.record(ToolCall(tool="write", args=args))
            await writer.flush()
            return cpu_s() - cpu0

    with tempfile.TemporaryDirectory() as tmp:
        cpu = anyio.run(main, Path(tmp) / "r.db")
    return {"cpu_s": cpu, "events_per_s": n / cpu}


def m_store_insert(n: int) -> dict:
    """Events/s the store ingests in batches of 2,000 rows (the baseline for recording)."""
    from clawsdk.store.store import Store, dumps, now

    payload = {"tool": "write", "args": {"path": "notes/f1.txt", "content": "task 1 line 1\n" * 4}}
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as store:
        cpu0 = cpu_s()
        for start in range(0, n, 2000):
            rows = [("bench", 0, i, "tool_call", now(), None, dumps(payload)) for i in range(start, min(n, start + 2000))]
            with store.transaction():
                store.insert_events(rows)
        cpu = cpu_s() - cpu0
    return {"cpu_s": cpu, "events_per_s": n / cpu}


def make_clawgym_tasks(folder: Path, n: int) -> None:
    for i in range(n):
        t = folder / f"task_{i:05d}"
        (t / "input_files" / "input").mkdir(parents=True)
        (t / "reward").mkdir()
        (t / "data_entry.json").write_text(json.dumps({
            "task_id": f"task_{i:05d}", "user_query": f"Summarise input/data.csv into report.md ({i}).",
            "input_mount_dir": "/root/.openclaw/workspace",
            "metadata": {"category": "analysis & reasoning", "grading_type": "automated"}}))
        (t / "input_files" / "input" / "data.csv").write_text("a,b\n" + "".join(f"{k},{k * i}\n" for k in range(20)))
        (t / "reward" / "check.py").write_text("import json, sys\nprint(json.dumps({'report': 0.0}))\n")
        (t / "reward" / "reward.sh").write_text("#!/bin/bash\npython3 /root/.openclaw/workspace/reward/check.py "
                                                "/root/.openclaw/workspace | tail -n 1\n")


def m_load(folder: str) -> dict:
    from clawsdk import load_tasks

    cpu0, t0 = cpu_s(), time.perf_counter()
    loaded = load_tasks(f"clawgym:{folder}")
    hashes = {t.hash for t in loaded.tasks}
    wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    if loaded.errors or len(hashes) != len(loaded.tasks):
        raise SystemExit(f"loading: {len(loaded.errors)} errors, {len(hashes)} distinct of {len(loaded.tasks)}")
    return {"wall_s": wall, "cpu_s": cpu, "tasks": len(loaded.tasks)}


def m_load_floor(folder: str) -> dict:
    cpu0, t0 = cpu_s(), time.perf_counter()
    n = 0
    for dirpath, _dirs, files in os.walk(folder):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                fh.read()
            n += 1
    wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "files": n}


MEASURES = {"command": m_command, "w1": m_w1, "w1_bare": m_w1_bare, "w1_floor": m_w1_floor,
            "recorder": m_recorder, "store_insert": m_store_insert, "load": m_load, "load_floor": m_load_floor}


# ---- the parent: rounds, children, table ----------------------------------------------------------


def inspect_child(python: str, n: int) -> dict:
    done = subprocess.run([python, str(HERE / "inspect_w1.py"), str(n)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"inspect W1 failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def child(name: str, *args) -> dict:
    done = subprocess.run([sys.executable, __file__, "--one", name, json.dumps(list(args))],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(results: list[dict], key: str = "cpu_s") -> dict:
    return min(results, key=lambda r: r[key])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("args", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--w1", type=int, default=200, help="W1 tasks per round (default 200)")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--load-tasks", type=int, default=2000)
    ap.add_argument("--scale", action="store_true", help="also W1 at 1,000 and 10,000 tasks")
    ap.add_argument("--inspect-python", metavar="PY", help="a python that has inspect-ai: adds W1 in Inspect AI")
    a = ap.parse_args()
    if a.one:
        print(json.dumps(MEASURES[a.one](*json.loads(a.args))))
        return

    clawsdk = str(Path(sys.executable).parent / "clawsdk")
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "w1.db")
        child("w1", 1000, store)  # the 1,000-rollout store `clawsdk runs` reads
        gym = Path(tmp) / "clawgym"
        make_clawgym_tasks(gym, a.load_tasks)
        r: dict[str, list[dict]] = {k: [] for k in ("py", "version", "runs", "w1", "bare", "floor", "rec", "ins",
                                                     "load", "load_floor", "inspect")}
        for _ in range(a.rounds):
            r["py"].append(child("command", [sys.executable, "-c", "pass"]))
            r["version"].append(child("command", [clawsdk, "--version"]))
            r["runs"].append(child("command", [clawsdk, "runs", "--db", store]))
            r["bare"].append(child("w1_bare", a.w1))
            r["w1"].append(child("w1", a.w1, str(Path(tmp) / f"w1-{len(r['w1'])}.db")))
            r["floor"].append(child("w1_floor", a.w1))
            if a.inspect_python:
                r["inspect"].append(inspect_child(a.inspect_python, a.w1))
            r["ins"].append(child("store_insert", a.events))
            r["rec"].append(child("recorder", a.events))
            r["load_floor"].append(child("load_floor", str(gym)))
            r["load"].append(child("load", str(gym)))
        py, ver, runs = best(r["py"], "wall_s"), best(r["version"], "wall_s"), best(r["runs"], "wall_s")
        rows += [
            ("start-up: python -c pass", f"{py['wall_s']:.2f} s wall, {py['cpu_s']:.2f} s CPU", "baseline"),
            ("start-up: clawsdk --version", f"{ver['wall_s']:.2f} s wall, {ver['cpu_s']:.2f} s CPU",
             f"{ver['wall_s'] / py['wall_s']:.1f}x python (target <= 0.3 s wall)"),
            ("start-up: clawsdk runs (1,000 rollouts)", f"{runs['wall_s']:.2f} s wall, {runs['cpu_s']:.2f} s CPU",
             f"{runs['wall_s'] / py['wall_s']:.1f}x python (target <= 0.6 s wall)"),
        ]
        w1, bare, floor = best(r["w1"]), best(r["bare"]), best(r["floor"])
        rows += [
            (f"W1 {a.w1} tasks: bare mcp.Client, stock server", f"{bare['cpu_s']:.2f} s CPU, "
             f"{bare['per_call_us']:.0f} us/call", "baseline"),
            (f"W1 {a.w1} tasks: clawsdk, recorded and verified", f"{w1['cpu_s']:.2f} s CPU, "
             f"{w1['per_call_us']:.0f} us/call, {w1['peak_mb']:.0f} MB",
             f"{w1['cpu_s'] / bare['cpu_s']:.2f}x bare (target <= 1.0x)"),
            (f"W1 {a.w1} tasks: plain Python file ops", f"{floor['cpu_s']:.3f} s CPU", "the floor"),
        ]
        if r["inspect"]:
            insp = best(r["inspect"])
            rows.append((f"W1 {a.w1} tasks: Inspect AI, logged and scored", f"{insp['cpu_s']:.2f} s CPU, "
                         f"{insp['per_call_us']:.0f} us/call", f"clawsdk is {w1['cpu_s'] / insp['cpu_s']:.2f}x its CPU"))
        rec, ins = max(r["rec"], key=lambda x: x["events_per_s"]), max(r["ins"], key=lambda x: x["events_per_s"])
        rows += [
            ("recording: store batched insert", f"{ins['events_per_s']:,.0f} events/s", "baseline"),
            ("recording: Recorder.record()", f"{rec['events_per_s']:,.0f} events/s",
             f"{rec['events_per_s'] / ins['events_per_s']:.2f}x the store (target >= 100k/s)"),
        ]
        load, lf = best(r["load"], "wall_s"), best(r["load_floor"], "wall_s")
        rows += [
            (f"loading: read {a.load_tasks} ClawGym folders' files", f"{lf['wall_s']:.2f} s wall", "the floor"),
            (f"loading: clawsdk lists {a.load_tasks} ClawGym tasks", f"{load['wall_s']:.2f} s wall, "
             f"{load['cpu_s']:.2f} s CPU", f"{load['wall_s'] / lf['wall_s']:.1f}x the floor (target <= 5 s)"),
        ]
        if a.scale:
            small = child("w1", 1000, str(Path(tmp) / "s1.db"))
            large = child("w1", 10000, str(Path(tmp) / "s2.db"))
            rows += [
                ("W1 1,000 tasks", f"{small['cpu_s']:.1f} s CPU, peak {small['peak_mb']:.0f} MB", "baseline"),
                ("W1 10,000 tasks", f"{large['cpu_s']:.1f} s CPU, peak {large['peak_mb']:.0f} MB",
                 f"{large['cpu_s'] / small['cpu_s']:.2f}x (target <= 10.5x), memory "
                 f"{large['peak_mb'] / small['peak_mb']:.2f}x"),
            ]
    width = max(len(name) for name, _, _ in rows)
    vwidth = max(len(v) for _, v, _ in rows)
    print(f"best of {a.rounds} interleaved round(s); CPU includes child processes")
    for name, value, ratio in rows:
        print(f"{name:<{width}}  {value:<{vwidth}}  {ratio}")


if __name__ == "__main__":
    main()
