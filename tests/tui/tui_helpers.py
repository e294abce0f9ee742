"""Shared by the TUI tests: stores to watch, waiting on the app, SVG snapshots."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from clawsdk_tui.synthetic import BASE, fill_store

SNAPSHOTS = Path(__file__).parent / "snapshots"
FIXED_NOW = BASE.timestamp() + 3600.0  # an hour after the synthetic run began


def small_store(path: Path, **kwargs) -> dict:
    opts = {"rollouts": 40, "events_per_rollout": 14, "running": 3, "tasks": 10, "run_id": "demo-run"}
    opts.update(kwargs)
    return fill_store(path, **opts)


async def wait_for(pilot, cond: Callable[[], bool], timeout: float = 20.0, what: str = "the app") -> None:
    """Let the app run until cond() holds; fail after `timeout` seconds."""
    try:
        with anyio.fail_after(timeout):
            while not cond():
                await pilot.pause(0.02)
    except TimeoutError:
        pytest.fail(f"{what} did not get there within {timeout} s")


def assert_snapshot(svg: str, name: str, tmp_path: Path) -> None:
    """Compare with tests/tui/snapshots/NAME.svg; CLAWSDK_UPDATE_SNAPSHOTS=1 rewrites it."""
    SNAPSHOTS.mkdir(exist_ok=True)
    stored = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("CLAWSDK_UPDATE_SNAPSHOTS") == "1":
        stored.write_text(svg, encoding="utf-8")
        return
    if not stored.exists():
        stored.write_text(svg, encoding="utf-8")
        pytest.fail(f"no snapshot {stored.name} yet: wrote it; look at it, then rerun")
    if stored.read_text(encoding="utf-8") != svg:
        actual = tmp_path / f"{name}.actual.svg"
        actual.write_text(svg, encoding="utf-8")
        pytest.fail(
            f"screen differs from {stored}: see {actual} (CLAWSDK_UPDATE_SNAPSHOTS=1 accepts the new one)"
        )


def plain(static) -> str:
    """The text a Static shows, whatever it holds (a str, rich Text or Table, Textual Content)."""
    import io

    from rich.console import Console

    content = static.content
    if isinstance(content, str):
        return content
    if hasattr(content, "plain"):
        return content.plain
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(content)
    return console.file.getvalue()


def store_of(path: Path, rollouts: list[tuple], *, run_id: str = "run", agent: str = "agent") -> None:
    """A store with one run whose rollouts are (task, ending) in finishing order; the ending is a reward
    (passed at 1.0), None (unscored: a sandbox error) or "running"."""
    from clawsdk.store.store import Store

    with Store(path) as store, store.transaction():
        conn = store.db.conn
        conn.execute(
            "INSERT INTO runs (id, created_at, status, agent, sandbox, samples, config) "
            "VALUES (?, ?, 'running', ?, 'local', 1, '{}')",
            [run_id, BASE.isoformat(), agent],
        )
        samples: dict[str, int] = {}
        for i, (task, ending) in enumerate(rollouts):
            conn.execute(
                "INSERT OR IGNORE INTO tasks (hash, id, category, source, instruction, data) "
                "VALUES (?, ?, 'cat', 'test', 'do it', '{}')",
                [f"h-{task}", task],
            )
            sample = samples[task] = samples.get(task, -1) + 1
            finished = ending != "running"
            scored = finished and ending is not None
            conn.execute(
                "INSERT INTO rollouts (id, run_id, task_id, task_hash, sample, status, failure_kind, scored, "
                "reward, passed, started_at, finished_at, duration_s) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    f"r{i:03d}",
                    run_id,
                    task,
                    f"h-{task}",
                    sample,
                    "finished" if finished else "running",
                    None if not finished else ("ok" if scored else "sandbox_error"),
                    None if not finished else int(scored),
                    ending if scored else None,
                    int(ending >= 1.0) if scored else None,
                    BASE.isoformat(),
                    f"2025-01-06T09:{i:02d}:00+00:00" if finished else None,
                    60.0 if finished else None,
                ],
            )
