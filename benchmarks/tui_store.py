"""How the watch view copes with a big store: 10,000 rollouts and 1,000,000 events.

Fills a store with direct executemany inserts, then measures, on the reading side:
- an idle tick (nothing changed: one PRAGMA data_version),
- a live refresh after another connection commits (new events, rollouts finishing), the way the
  app does it (re-read what can have changed) against the baseline of re-reading everything,
- opening a rollout (its events and verdict),
- and the same through the real app, headless: first screenful, a filter keystroke, a sort, opening
  a rollout, and a live refresh arriving in the table.

    .venv/bin/python benchmarks/tui_store.py                 # 10k rollouts, 1M events
    .venv/bin/python benchmarks/tui_store.py --rollouts 1000 --events 20   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from clawsdk_tui.data import EventFollower, RunWatch, StoreReader
from clawsdk_tui.synthetic import fill_store, ts


def timed(fn, repeat: int = 5) -> float:
    """Median seconds of fn()."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def ms(s: float) -> str:
    return f"{s * 1000:8.2f} ms"


def write_activity(db: Path, run_id: str, step: int, n_events: int = 20, n_finish: int = 5) -> None:
    """Another connection: events for a running rollout, and a few rollouts finishing and starting."""
    conn = sqlite3.connect(db, timeout=30)
    with conn:
        running = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM rollouts WHERE run_id = ? AND status = 'running' LIMIT ?", [run_id, n_finish]
            )
        ]
        rid = running[0]
        base = conn.execute(
            "SELECT COALESCE(MAX(seq), -1) FROM events WHERE rollout_id = ?", [rid]
        ).fetchone()[0]
        conn.executemany(
            "INSERT INTO events (rollout_id, attempt, seq, kind, ts, duration_ms, payload) VALUES (?, 0, ?, ?, ?, NULL, ?)",
            [
                (rid, base + 1 + i, "tool_call", ts(10_000 + step), json.dumps({"tool": "read", "args": {}}))
                for i in range(n_events)
            ],
        )
        conn.executemany(
            "UPDATE rollouts SET status = 'finished', failure_kind = 'ok', scored = 1, reward = 1, "
            "passed = 1, finished_at = ?, duration_s = 3 WHERE id = ?",
            [(ts(10_000 + step), r) for r in running[1:]],
        )
        finished = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM rollouts WHERE run_id = ? AND status = 'finished' ORDER BY rowid LIMIT ? OFFSET ?",
                [run_id, n_finish - 1, step * n_finish],
            )
        ]
        conn.executemany(
            "UPDATE rollouts SET status = 'running', finished_at = NULL, duration_s = NULL, "
            "attempt = attempt WHERE id = ?",
            [(r,) for r in finished],
        )
    conn.close()


def bench_reader(db: Path, run_id: str) -> dict:
    reader = StoreReader(db)
    out = {}
    reader.data_version()
    out["idle tick (data_version)"] = timed(reader.data_version, 200)

    def full() -> None:
        reader.runs()
        RunWatch(reader, run_id).poll()
        reader.max_event_id()

    out["first load: runs + 10k rollouts"] = timed(full, 3)

    watch = RunWatch(reader, run_id, clock=lambda: 0.0)  # never due for a periodic resync
    watch.poll()
    last_id = reader.max_event_id()
    incr, naive = [], []
    for step in range(5):
        write_activity(db, run_id, step)
        t = time.perf_counter()
        reader.data_version()
        reader.runs()
        delta = watch.poll()
        max_id = reader.max_event_id()
        reader.new_tool_calls(last_id, max_id, run_id)
        last_id = max_id
        incr.append(time.perf_counter() - t)
        assert delta.changed, "the refresh saw no change"
        t = time.perf_counter()
        reader.runs()
        RunWatch(reader, run_id).poll()  # baseline: re-read every rollout
        reader._all("SELECT COUNT(*) FROM events WHERE kind = 'tool_call'")  # and recount every event
        naive.append(time.perf_counter() - t)
    out["live refresh (incremental)"] = statistics.median(incr)
    out["live refresh (baseline: re-read all)"] = statistics.median(naive)

    half = reader._all("SELECT COUNT(*) FROM rollouts")[0][0] // 2
    rid = reader._all(
        "SELECT id FROM rollouts WHERE status = 'finished' ORDER BY rowid LIMIT 1 OFFSET ?", [half]
    )[0][0]
    n = reader.count_events(rid, 0)
    out[f"open a rollout ({n} events + verdict)"] = timed(lambda: EventFollower(reader, rid).poll(), 5)
    follower = EventFollower(reader, rid)
    follower.poll()
    out["follow an open rollout (no new events)"] = timed(lambda: follower.poll(), 20)
    reader.close()
    return out


async def bench_app(db: Path, run_id: str) -> dict:
    from clawsdk_tui.app import WatchApp
    from clawsdk_tui.detail import RolloutScreen
    from clawsdk_tui.screens import RolloutsScreen

    out = {}

    async def until(pilot, cond, limit: float = 60.0) -> float:
        t = time.perf_counter()
        while not cond():
            if time.perf_counter() - t > limit:
                raise TimeoutError("the app did not get there")
            await pilot.pause(0.005)
        return time.perf_counter() - t

    t0 = time.perf_counter()
    app = WatchApp(db, run_id=run_id, interval=0.1, cursor_blink=False)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen
        assert isinstance(screen, RolloutsScreen)
        await until(pilot, lambda: len(screen.shown) > 0)
        out["app start to a full rollouts table"] = time.perf_counter() - t0
        total = len(screen.shown)

        t = time.perf_counter()
        await pilot.press("slash", *"timeout")
        await until(pilot, lambda: len(screen.shown) < total)
        out["filter as you type (7 keystrokes)"] = time.perf_counter() - t
        await pilot.press("escape", "escape")
        await until(pilot, lambda: len(screen.shown) == total)

        t = time.perf_counter()
        await pilot.press("o", "o")  # sort by reward
        await pilot.pause()
        out["sort 10k rows (2 keys)"] = time.perf_counter() - t

        t = time.perf_counter()
        write_activity(db, run_id, 7)
        before = {r["id"]: r["status"] for r in screen.shown}
        await until(pilot, lambda: {r["id"]: r["status"] for r in screen.shown} != before)
        out["external write to table updated (0.1 s poll)"] = time.perf_counter() - t

        t = time.perf_counter()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.n_events > 0)
        await pilot.pause()
        out["open a rollout: keypress to events shown"] = time.perf_counter() - t
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100, help="events per rollout")
    parser.add_argument("--dir", default=None, help="where to write the store (default: a temp dir)")
    parser.add_argument("--no-app", action="store_true", help="skip the headless app measurements")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        db = Path(tmp) / "big.db"
        t = time.perf_counter()
        info = fill_store(
            db, rollouts=args.rollouts, events_per_rollout=args.events, running=50, tasks=500, run_id="big"
        )
        fill = time.perf_counter() - t
        size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        print(
            f"store: {info['rollouts']:,} rollouts, {info['events']:,} events, {size:,.0f} MB, "
            f"filled in {fill:.1f} s (executemany)"
        )
        print("\nreading side (StoreReader / RunWatch / EventFollower), median:")
        res = bench_reader(db, "big")
        for k, v in res.items():
            print(f"  {k:<48}{ms(v)}")
        ratio = res["live refresh (baseline: re-read all)"] / res["live refresh (incremental)"]
        print(f"  incremental refresh is {ratio:.1f}x faster than re-reading everything")
        if not args.no_app:
            print("\nthe app, headless (Textual run_test, 160x50):")
            for k, v in asyncio.run(bench_app(db, "big")).items():
                print(f"  {k:<48}{ms(v)}")


if __name__ == "__main__":
    main()
