"""Load: N concurrent rollouts of the tool-loop agent against a model that answers after 1 s.

Each rollout makes two model calls (a tool call, then the answer), so the ideal wall time is
2 x the delay, whatever N. Prints wall time against that ideal, the CPU time the runner's process used
(what the wall time comes down to on a machine that other jobs keep busy), rollouts/s, store throughput
(events/s), peak memory, and how many SQLite "database is locked" errors happened (none).

    python benchmarks/load.py --rollouts 1000 --delay 1.0
"""

from __future__ import annotations

import argparse
import logging
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from clawsdk import Store, Task, run

HERE = Path(__file__).parent


class LockCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.locked = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "database is locked" in record.getMessage():
            self.locked += 1


def tasks(n: int) -> list[Task]:
    return [Task(id=f"load-{i:05d}", instruction="Write done.txt containing done.",
                 verifier={"checks": [{"type": "text_contains", "path": "done.txt", "text": "done"}]})
            for i in range(n)]


def run_load(rollouts: int, delay: float, db: Path, concurrency: int | str | None = None) -> dict:
    server = subprocess.Popen([sys.executable, str(HERE / "slow_model_server.py"), "--delay", str(delay)],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        counter = LockCounter()
        logging.getLogger().addHandler(counter)
        t0, cpu0 = time.perf_counter(), time.process_time()
        result = anyio.run(lambda: run(
            tasks(rollouts), agent="tool-loop", sandbox="local", concurrency=concurrency or rollouts, db=db,
            run_id="load", control=False,
            agent_options={"model": "openai:sim", "base_url": f"http://127.0.0.1:{port}/v1",
                           "concurrency": rollouts, "max_turns": 4, "timeout_s": 60},
        ))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        server.kill()
        server.wait()
    with Store(db) as store:
        events = store.query("SELECT COUNT(*) n FROM events")[0]["n"]
        errors = store.query("SELECT error FROM rollouts WHERE error IS NOT NULL")
    locked = counter.locked + sum("locked" in (e["error"] or "") for e in errors)
    return {
        "rollouts": rollouts, "ok": sum(o.kind.value == "ok" and bool(o.passed) for o in result.outcomes),
        "wall_s": wall, "cpu_s": cpu, "ideal_s": 2 * delay, "events": events, "locked": locked,
        "peak_mb": peak_rss_mb(),
        "kinds": sorted({o.kind.value for o in result.outcomes}),
    }


def peak_rss_mb() -> float:
    """This process's peak resident memory. /proc's VmHWM belongs to the process's own memory map; ru_maxrss
    also keeps the high-water mark of what the process was before exec, so a child of a 2 GB parent (the
    test suite) reported 1.8 GB for a load that takes 270 MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--concurrency", "-c", default=None, help="default: all the rollouts at once; or auto, or N")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = run_load(a.rollouts, a.delay, Path(tmp) / "load.db", a.concurrency)
    print(f"load: {r['rollouts']} rollouts (-c {a.concurrency or r['rollouts']}), model delay {a.delay:g} s: "
          f"wall {r['wall_s']:.1f} s "
          f"(ideal {r['ideal_s']:.1f} s, {r['wall_s'] / r['ideal_s']:.1f}x), CPU {r['cpu_s']:.1f} s, "
          f"{r['rollouts'] / r['wall_s']:.1f} "
          f"rollouts/s, {r['events']} events ({r['events'] / r['wall_s']:.0f} events/s), ok {r['ok']}, "
          f"'database is locked' {r['locked']}, peak RSS {r['peak_mb']:.0f} MB, endings {r['kinds']}")


if __name__ == "__main__":
    main()
