"""Sandbox backends side by side: create + exec + end_turn + close latency, and 64 concurrent rollouts.

    .venv/bin/python benchmarks/sandboxes.py                 # local, bwrap, docker (those that run here)
    .venv/bin/python benchmarks/sandboxes.py --backends local,bwrap --rollouts 32
    .venv/bin/python benchmarks/sandboxes.py --backends local,docker,docker:pool_size=0 --waves 2

A backend may carry sandbox options after a colon (`docker:pool_size=0` is docker without its
warm pool), so one run compares them; `--waves 2` runs twice the rollouts at the same concurrency,
so the second wave can take the first one's warm containers.

Each figure is printed with its ratio to `local` measured in the same run (local isolates
nothing, so it is the floor). Rollouts use the scripted agent: 10 tool calls each (5 exec,
3 write, 2 read) through the real MCP tool server, recorded into a temp SQLite store.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from clawsdk.plugins import get_registry
from clawsdk.runtime.runner import run
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Limits, Task, VerifierSpec

CALLS = [
    {"tool": "exec", "args": {"command": "ls -la"}},
    {"tool": "write", "args": {"path": "a.txt", "content": "alpha\n"}},
    {"tool": "exec", "args": {"command": "cat a.txt notes.md | wc -l"}},
    {"tool": "read", "args": {"path": "notes.md"}},
    {"tool": "write", "args": {"path": "out/b.txt", "content": "beta\n"}},
    {"tool": "exec", "args": {"command": "python3 -c 'print(sum(range(1000)))'"}},
    {"tool": "read", "args": {"path": "out/b.txt"}},
    {"tool": "exec", "args": {"command": "grep -r beta ."}},
    {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}},
    {"tool": "exec", "args": {"command": "test -f done.txt && echo ok"}},
]


def tiny_task(i: int) -> Task:
    return Task(id=f"bench-{i:03d}", instruction="Write done.txt.", workspace=[File(path="notes.md", text="hi\n")],
                verifier=VerifierSpec(checks=[{"type": "file_exists", "path": "done.txt"}]),
                limits=Limits(timeout_s=600, tool_timeout_s=60))


def spec(backend: str) -> tuple[str, SandboxConfig]:
    """`name` or `name:key=value;key=value` -> (name, config with those options)."""
    name, _, opts = backend.partition(":")
    extra = dict(kv.split("=", 1) for kv in opts.split(";") if kv)
    return name, SandboxConfig(extra=extra)


def available(backend: str) -> str | None:
    backend = spec(backend)[0]
    if backend == "bwrap":
        from clawsdk_plugins.sandboxes.bwrap import available as why
        return why()
    if backend == "docker":
        from clawsdk_plugins.sandboxes.docker import available as why
        return why()
    return None


async def latency(backend: str, n: int) -> dict[str, float]:
    name, config = spec(backend)
    make = get_registry().get("sandboxes", name)
    task = tiny_task(0)
    starts, execs, ends, closes, totals = [], [], [], [], []
    for _ in range(n + 1):  # the first warms caches and probes; not counted
        t0 = time.perf_counter()
        sb = make(config)
        await sb.start(task)
        t1 = time.perf_counter()
        r = await sb.exec("true")
        assert r.exit_code == 0, r.stderr
        t2 = time.perf_counter()
        await sb.end_turn()  # what every rollout does before scoring
        t3 = time.perf_counter()
        await sb.close()
        t4 = time.perf_counter()
        starts.append(t1 - t0)
        execs.append(t2 - t1)
        ends.append(t3 - t2)
        closes.append(t4 - t3)
        totals.append(t4 - t0)
    def med(xs: list[float]) -> float:
        return statistics.median(xs[1:]) * 1000

    return {"create": med(starts), "exec": med(execs), "end_turn": med(ends), "close": med(closes),
            "total": med(totals)}


async def rollouts(backend: str, n: int, waves: int, db: Path) -> dict[str, float]:
    name, config = spec(backend)
    tasks = [tiny_task(i) for i in range(n * waves)]
    t0 = time.perf_counter()
    result = await run(tasks, agent="scripted", agent_options={"calls": CALLS}, sandbox=name, sandbox_config=config,
                       concurrency=n, db=db, retries=0)
    wall = time.perf_counter() - t0
    ok = sum(1 for o in result.outcomes if o.kind.value == "ok" and o.passed)
    per = sorted(o.duration_s for o in result.outcomes)
    for o in [o for o in result.outcomes if not (o.kind.value == "ok" and o.passed)][:3]:
        print(f"  {backend} {o.task_id}: {o.kind.value} {o.error or 'verifier said no'}", file=sys.stderr)
    return {"wall": wall, "ok": ok, "per_s": len(tasks) / wall, "p50": per[len(per) // 2], "p95": per[int(len(per) * 0.95) - 1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default="local,bwrap,docker")
    ap.add_argument("--n", type=int, default=10, help="latency samples per backend")
    ap.add_argument("--rollouts", type=int, default=64, help="concurrent rollouts per backend")
    ap.add_argument("--waves", type=int, default=1, help="run waves x rollouts in all, at that concurrency")
    args = ap.parse_args()
    backends = []
    for b in args.backends.split(","):
        why = available(b)
        if why:
            print(f"skip {b}: {why}", file=sys.stderr)
        else:
            backends.append(b)

    lat = {b: anyio.run(latency, b, args.n) for b in backends}
    base = lat.get("local")
    print(f"\ncreate + exec('true') + end_turn + close, median of {args.n} (ms)")
    width = max(8, *(len(b) for b in backends))
    print(f"{'backend':{width}} {'create':>8} {'exec':>8} {'end_turn':>8} {'close':>8} {'total':>8}  vs local")
    for b, m in lat.items():
        ratio = f"{m['total'] / base['total']:.1f}x" if base else "-"
        print(f"{b:{width}} {m['create']:8.1f} {m['exec']:8.1f} {m['end_turn']:8.1f} {m['close']:8.1f} "
              f"{m['total']:8.1f}  {ratio}")

    total = args.rollouts * args.waves
    print(f"\n{total} rollouts, {args.rollouts} at a time, scripted agent, {len(CALLS)} tool calls each")
    print(f"{'backend':{width}} {'wall s':>8} {'rollouts/s':>11} {'p50 s':>7} {'p95 s':>7} {'passed':>7}  vs local")
    rb = {}
    with tempfile.TemporaryDirectory() as tmp:
        for b in backends:
            rb[b] = m = anyio.run(rollouts, b, args.rollouts, args.waves, Path(tmp) / f"{len(rb)}.db")
            ratio = f"{m['wall'] / rb['local']['wall']:.1f}x" if "local" in rb else "-"
            print(f"{b:{width}} {m['wall']:8.2f} {m['per_s']:11.1f} {m['p50']:7.2f} {m['p95']:7.2f} "
                  f"{m['ok']:>4}/{total}  {ratio}")


if __name__ == "__main__":
    main()
