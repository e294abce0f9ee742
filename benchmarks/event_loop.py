"""What one agent's big file call does to every other rollout of the process, and what moving the file
calls of the host-folder sandboxes (local, bwrap, docker) off the event loop costs.

    .venv/bin/python benchmarks/event_loop.py               # 130,000 entries, 3 rounds
    .venv/bin/python benchmarks/event_loop.py --entries 20000

A workspace of ENTRIES files (130,000 is the most an isolated sandbox's inode quota lets an agent
make) is listed recursively while a heartbeat coroutine, standing for the other rollouts of the
runner, ticks every millisecond. Each round prints the heartbeat's worst stall with the list made
on the event loop (`Tree.list` called directly, as `HostDirSandbox.list` did) and in a worker
thread (`HostDirSandbox.list` now), then the cost of the thread hop: 5,000 small reads through the
sandbox against `Tree.read` on the loop. Both sides of each pair run in the same round.
"""

from __future__ import annotations

import argparse
import os
import time

import anyio
from clawsdk_plugins.sandboxes.local import LocalSandbox

from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task


async def worst_stall(work) -> tuple[float, float]:
    """(seconds `work` took, the longest the loop went without running the heartbeat meanwhile)."""
    worst = 0.0
    done = anyio.Event()

    async def heartbeat() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        await anyio.sleep(0.01)
        t = time.perf_counter()
        await work()
        took = time.perf_counter() - t
        done.set()
    return took, worst


async def main(entries: int, rounds: int) -> None:
    sb = LocalSandbox(SandboxConfig())
    await sb.start(Task(id="bench", instruction="x", workspace=[File(path="a.txt", text="a\n")]))
    try:
        ws = sb.workspace
        for d in range(entries // 1000 + 1):
            folder = ws / f"d{d}"
            folder.mkdir()
            for i in range(min(1000, entries - d * 1000)):
                os.close(os.open(folder / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
        for r in range(rounds):
            async def on_loop() -> None:
                sb.files().list(".", recursive=True)

            async def threaded() -> None:
                await sb.list(".", recursive=True)

            loop_took, loop_stall = await worst_stall(on_loop)
            thread_took, thread_stall = await worst_stall(threaded)
            print(f"round {r + 1}: list of {entries:,} entries: on the loop {loop_took:.2f} s, other rollouts "
                  f"stalled {loop_stall * 1e3:.0f} ms; in a thread {thread_took:.2f} s, stalled "
                  f"{thread_stall * 1e3:.0f} ms ({loop_stall / thread_stall:.0f}x shorter)")
            n = 5000
            t = time.perf_counter()
            for _ in range(n):
                sb.files().read("a.txt")
            direct = (time.perf_counter() - t) / n
            t = time.perf_counter()
            for _ in range(n):
                await sb.read("a.txt")
            hop = (time.perf_counter() - t) / n
            print(f"         small read: on the loop {direct * 1e6:.0f} us, in a thread {hop * 1e6:.0f} us "
                  f"(+{(hop - direct) * 1e6:.0f} us a call, {hop / direct:.1f}x)")
    finally:
        await sb.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=130_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    anyio.run(main, a.entries, a.rounds)
