"""`-c auto` against a sweep of fixed `-c`, on three workloads, in one run of this script.

    .venv/bin/python benchmarks/concurrency.py                       # all three workloads
    .venv/bin/python benchmarks/concurrency.py --workloads model --rounds 2

Workloads (their sizes and the sweeps are fixed here, before any measurement):
- cpu: 48 rollouts whose one tool call burns about 0.25 s of CPU in the sandbox (`exec python3 -c ...`), then
  writes the deliverable; the default sandbox (bwrap where it works). Bound by the machine's cores.
- model: 600 rollouts of the tool-loop agent against a local model server that answers after 1 s
  (benchmarks/slow_model_server.py); two model calls each, so 2 s of waiting per rollout.
- docker: 32 rollouts in the docker sandbox, each making 3 tool calls; bound by container start and the engine.

Each measurement is a `run()` in a child process of its own (its peak memory is its own), alternating
settings round by round so that a machine that gets busier slows all of them alike; each setting's best
round is reported. For every run the child also records the lowest MemAvailable the machine had while it
ran: `auto` must never exhaust memory. The figure is rollouts/s; `auto` is compared with the best fixed
level of the sweep. Nothing is told to `auto`: it runs with the defaults `clawsdk run` has.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

WORKLOADS = {
    "cpu": {"rollouts": 48, "sweep": [1, 2, 4, 8, 16, 48]},
    "model": {"rollouts": 600, "sweep": [32, 64, 128, 256, 600]},
    "docker": {"rollouts": 32, "sweep": [1, 2, 4, 8, 16, 32]},
}
BURN = "python3 -c 'import time; t = time.process_time(); n = 0\nwhile time.process_time() - t < 0.25: n += 1'"


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tasks(workload: str, n: int):
    from clawsdk import Task

    check = {"checks": [{"type": "text_contains", "path": "done.txt", "text": "done"}]}
    return [Task(id=f"{workload}-{i:04d}", instruction="Write done.txt containing done.", verifier=check)
            for i in range(n)]


def measure(workload: str, concurrency: str, db: str) -> dict:
    """One run in this (child) process."""
    import anyio
    from clawsdk_plugins.agents.builtin import ScriptedAgent

    from clawsdk import Store, run

    n = WORKLOADS[workload]["rollouts"]
    low = [mem_available()]
    stop = threading.Event()

    def watch_memory() -> None:
        while not stop.wait(0.2):
            low[0] = min(low[0], mem_available())

    threading.Thread(target=watch_memory, daemon=True).start()
    server = None
    kwargs: dict = {"sandbox": "auto"}
    if workload == "cpu":
        kwargs["agent"] = ScriptedAgent([{"tool": "exec", "args": {"command": BURN}},
                                         {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}}])
    elif workload == "docker":
        kwargs["sandbox"] = "docker"
        kwargs["agent"] = ScriptedAgent([{"tool": "exec", "args": {"command": "ls -la"}},
                                         {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}},
                                         {"tool": "exec", "args": {"command": "cat done.txt"}}])
    else:
        server = subprocess.Popen([sys.executable, str(HERE / "slow_model_server.py"), "--delay", "1.0"],
                                  stdout=subprocess.PIPE, text=True)
        port = int(server.stdout.readline())
        kwargs["sandbox"] = "local"  # as benchmarks/load.py: the model is what is measured
        kwargs["agent"] = "tool-loop"
        kwargs["agent_options"] = {"model": "openai:sim", "base_url": f"http://127.0.0.1:{port}/v1",
                                   "concurrency": n, "max_turns": 4, "timeout_s": 120}
    try:
        t0 = time.perf_counter()
        result = anyio.run(lambda: run(tasks(workload, n), concurrency=concurrency, db=db, run_id="bench",
                                       control=False, **kwargs))
        wall = time.perf_counter() - t0
    finally:
        stop.set()
        if server is not None:
            server.kill()
            server.wait()
    with Store(db) as store:
        levels = [r["level"] for r in store.run_control("bench") if r["level"] is not None]
        decisions = len(store.run_control("bench"))
    passed = sum(1 for o in result.outcomes if o.passed)
    return {"workload": workload, "concurrency": concurrency, "rollouts": n, "passed": passed, "wall_s": wall,
            "per_s": n / wall, "peak_mb": peak_rss_mb(), "min_available_gib": low[0] / (1 << 30),
            "auto_levels": levels, "decisions": decisions,
            "endings": sorted({o.kind.value for o in result.outcomes})}


def child(workload: str, concurrency: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, __file__, "--one", json.dumps([workload, concurrency,
                                                                              str(Path(tmp) / "b.db")])],
                              capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{workload} -c {concurrency} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--workloads", default="cpu,model,docker")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    if a.one:
        workload, concurrency, db = json.loads(a.one)
        print(json.dumps(measure(workload, concurrency if concurrency == "auto" else int(concurrency), db)))
        return
    print(f"{os.cpu_count()} CPUs, {mem_available() / (1 << 30):.1f} GiB available at the start; "
          f"best of {a.rounds} round(s)")
    verdicts = []
    for workload in a.workloads.split(","):
        spec = WORKLOADS[workload]
        settings = [str(c) for c in spec["sweep"]]
        settings.insert(len(settings) // 2, "auto")  # between the fixed ones, not first or last
        best: dict[str, dict] = {}
        for _ in range(a.rounds):
            for setting in settings:
                r = child(workload, setting)
                if setting not in best or r["per_s"] > best[setting]["per_s"]:
                    best[setting] = r
                print(f"  {workload:<7} -c {setting:<5} {r['wall_s']:7.1f} s  {r['per_s']:7.2f} rollouts/s  "
                      f"passed {r['passed']}/{r['rollouts']}  peak {r['peak_mb']:.0f} MB  "
                      f"min available {r['min_available_gib']:.1f} GiB"
                      + (f"  levels {summarize(r['auto_levels'])}" if setting == "auto" else ""), flush=True)
        fixed = {k: v for k, v in best.items() if k != "auto"}
        top = max(fixed.values(), key=lambda r: r["per_s"])
        auto = best["auto"]
        share = auto["per_s"] / top["per_s"]
        verdicts.append((workload, auto, top, share))
    print()
    print(f"{'workload':<8} {'auto rollouts/s':>16} {'best fixed':>18} {'auto/best':>10} {'auto peak':>10} "
          f"{'min available':>14}  auto's levels")
    for workload, auto, top, share in verdicts:
        print(f"{workload:<8} {auto['per_s']:16.2f} {top['per_s']:11.2f} (-c {top['concurrency']:<3}) "
              f"{share:9.0%} {auto['peak_mb']:8.0f} MB {auto['min_available_gib']:11.1f} GiB  "
              f"{summarize(auto['auto_levels'])}")


def summarize(levels: list[int]) -> str:
    if not levels:
        return "-"
    return f"{levels[0]} -> max {max(levels)} -> {levels[-1]} ({len(levels)} rows)"


if __name__ == "__main__":
    main()
