"""What the tool boundary costs: a skill call behind it against the in-process call it replaced.

Skill tools run in a process inside the sandbox (the tool host; docs/sandboxes.md "Where tools run"). Per
backend, measured in one process, alternating round by round:

- in-process: `calendar_events` through the recorded ToolSession to the calendar server in this process, bound
  to a local sandbox: how every skill call of a rollout ran before the boundary (the baseline);
- warm: the same call through the same ToolSession, to the tool host already running in the sandbox;
- first call: a fresh sandbox's first such call, which starts the tool host;
- per rollout: R oracle rollouts that make one calendar call, against R that read the file instead (a core
  tool, in the runner): the difference is what the tool host adds to a rollout, in wall time and in CPU. CPU
  is the runner's and its children's, so it is shown for `local`, where the tool host is the runner's child:
  bubblewrap's processes are not counted in the runner's children (their CPU never reaches RUSAGE_CHILDREN)
  and docker's are the engine's. The tool host is the same process on every backend (the same interpreter
  and imports).

    python benchmarks/toolhost.py [--backends local,bwrap,docker] [--calls 200] [--rounds 3] [--rollouts 8]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import clawsdk_skills
from clawsdk_plugins.sandboxes.local import LocalSandbox

from clawsdk import Task, run
from clawsdk.mcp.session import ToolSession
from clawsdk.plugins import get_registry
from clawsdk.runtime.rollout import tool_servers
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import File

ICS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n" + "".join(
    f"BEGIN:VEVENT\r\nUID:e{i}\r\nSUMMARY:meeting {i}\r\nDTSTART:202405{1 + i % 28:02d}T{9 + i % 8:02d}0000Z\r\n"
    f"DTEND:202405{1 + i % 28:02d}T{10 + i % 8:02d}0000Z\r\nEND:VEVENT\r\n" for i in range(20))
       + "END:VCALENDAR\r\n")
CALL = ("calendar_events", {"path": "cal.ics", "start": "2024-05-01", "end": "2024-05-08"})


def task(i: int = 0, *, skill: bool = True) -> Task:
    step = {"tool": CALL[0], "args": CALL[1]} if skill else {"tool": "read", "args": {"path": "cal.ics"}}
    return Task(id=f"th-{i:04d}-{'skill' if skill else 'core'}", instruction="list the week's meetings",
                tools=["core", "calendar"], workspace=[File(path="cal.ics", text=ICS)], solution=[step],
                verifier={"checks": [{"type": "file_exists", "path": "cal.ics"}]})


def cpu_s() -> float:
    r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


async def in_process(calls: int) -> list[float]:
    t = task()
    async with LocalSandbox() as sb:
        await sb.start(t)
        server = clawsdk_skills.factory("calendar")(sb, t)
        async with ToolSession.open([("calendar", server)], Recorder(None, "bench"), t.limits) as session:
            await session.call(*CALL)
            out = []
            for _ in range(calls):
                started = time.perf_counter()
                await session.call(*CALL)
                out.append(time.perf_counter() - started)
    return out


async def through_boundary(backend: str, calls: int) -> tuple[float, list[float]]:
    """(the first call, which starts the tool host; then each warm call), seconds."""
    registry = get_registry()
    t = task()
    sb = registry.get("sandboxes", backend)()
    await sb.start(t)
    try:
        async with ToolSession.open(tool_servers(t, sb, registry), Recorder(None, "bench"), t.limits, sandbox=sb,
                                    task=t) as session:
            started = time.perf_counter()
            first = await session.call(*CALL)
            first_s = time.perf_counter() - started
            assert not first.is_error, first.text
            out = []
            for _ in range(calls):
                started = time.perf_counter()
                await session.call(*CALL)
                out.append(time.perf_counter() - started)
    finally:
        await sb.close()
    return first_s, out


def rollouts(backend: str, n: int, skill: bool) -> tuple[float, float]:
    """(wall, cpu) seconds per rollout for n oracle rollouts at concurrency 1."""
    with tempfile.TemporaryDirectory() as d:
        tasks = [task(i, skill=skill) for i in range(n)]
        wall, cpu = time.perf_counter(), cpu_s()
        result = anyio.run(lambda: run(tasks, agent="oracle", sandbox=backend, db=Path(d) / "b.db", concurrency=1,
                                       retries=0))
        wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
        assert all(o.kind.value == "ok" for o in result.outcomes), [o.error for o in result.outcomes]
    return wall / n, cpu / n


def available(backend: str) -> str | None:
    make = get_registry().get("sandboxes", backend)
    why = getattr(make, "available", None)
    return why() if why else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="local,bwrap,docker")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rollouts", type=int, default=8)
    a = ap.parse_args()
    backends = []
    for b in a.backends.split(","):
        why = available(b)
        if why:
            print(f"{b}: skipped ({why})")
        else:
            backends.append(b)
    base: list[float] = []
    warm: dict[str, list[float]] = {b: [] for b in backends}
    first: dict[str, list[float]] = {b: [] for b in backends}
    per: dict[str, dict[bool, list[tuple[float, float]]]] = {b: {True: [], False: []} for b in backends}
    for r in range(a.rounds):
        base += anyio.run(in_process, a.calls)
        for b in backends:
            f, w = anyio.run(through_boundary, b, a.calls)
            first[b].append(f)
            warm[b] += w
            for skill in (r % 2 == 0, r % 2 != 0):  # alternate which goes first
                per[b][skill].append(rollouts(b, a.rollouts, skill))
    ms = 1000
    b_med = statistics.median(base)
    print(f"\nskill call `calendar_events` (20 events), median of {len(base)} calls, {a.rounds} rounds")
    print(f"{'':10} {'in-process (before)':>20} {'warm, boundary':>15} {'ratio':>6} {'first call':>11}")
    for b in backends:
        w = statistics.median(warm[b])
        print(f"{b:10} {b_med * ms:17.2f} ms {w * ms:12.2f} ms {w / b_med:5.1f}x "
              f"{statistics.median(first[b]) * ms:8.0f} ms")
    print(f"\nper rollout (oracle, one call; {a.rollouts} rollouts x {a.rounds} rounds, concurrency 1): the tool "
          "host's cost is the skill rollout minus the core one")
    print(f"{'':10} {'core: wall':>11} {'skill: wall':>12} {'added':>8} {'core: CPU':>10} {'skill: CPU':>11} {'added':>8}")
    for b in backends:
        core = [x for x in per[b][False]]
        skill = [x for x in per[b][True]]
        cw, sw = statistics.median(x[0] for x in core), statistics.median(x[0] for x in skill)
        cc, sc = statistics.median(x[1] for x in core), statistics.median(x[1] for x in skill)
        cpu = f"{cc:8.2f} s {sc:9.2f} s {sc - cc:6.2f} s" if b == "local" else f"{'(not counted here)':>32}"
        print(f"{b:10} {cw:9.2f} s {sw:10.2f} s {sw - cw:6.2f} s {cpu}")


if __name__ == "__main__":
    main()
