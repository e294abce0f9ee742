"""Another process writes the store while the app runs; the app shows it without a restart."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from clawsdk_tui.app import WatchApp
from clawsdk_tui.detail import EventItem, RolloutScreen
from clawsdk_tui.screens import RolloutsScreen
from clawsdk_tui.widgets import RolloutTable, status_label
from tui_helpers import FIXED_NOW, plain, wait_for

from clawsdk.store.store import Store

# The writer goes through the store's own write API, one phase per line it reads on stdin.
WRITER = textwrap.dedent(
    """
    import json, sys
    from clawsdk.store.store import Store, dumps, now
    from clawsdk.tasks.model import Task

    store = Store(sys.argv[1])
    task = Task.model_validate({"id": "live-task", "category": "live", "instruction": "do it",
                                "verifier": {"checks": [{"type": "file_exists", "path": "x"}]}})

    def event(rid, seq, kind, payload):
        store.insert_events([(rid, 0, seq, kind, now(), 1.0, dumps(payload))])

    for line in sys.stdin:
        phase = line.strip()
        with store.transaction():
            if phase == "1":
                store.upsert_run("live-run", status="running", agent="oracle", sandbox="local", samples=4)
                store.upsert_task(task)
                for k in range(3):
                    store.start_rollout(rollout_id=f"rlive{k}", run_id="live-run", task_id="live-task",
                                        task_hash=task.hash, sample=k, attempt=0, agent="oracle", model=None)
                    event(f"rlive{k}", 0, "tool_call", {"tool": "read", "args": {"path": "notes.md"}})
                    event(f"rlive{k}", 1, "tool_result", {"tool": "read", "content": "hello"})
            elif phase == "2":
                for seq in range(2, 7):
                    event("rlive0", seq, "tool_call", {"tool": "exec", "args": {"command": f"echo phase-two-{seq}"}})
                store.finish_rollout(rollout_id="rlive1", attempt=0, status="finished", failure_kind="ok",
                                     scored=True, reward=1.0, passed=True, error=None, n_tool_calls=1,
                                     n_model_calls=0, duration_s=2.0,
                                     verdict={"verifier": "checks", "score": 1.0, "passed": True,
                                              "subscores": [{"name": "x exists", "score": 1.0}]})
                store.start_rollout(rollout_id="rlive3", run_id="live-run", task_id="live-task",
                                    task_hash=task.hash, sample=3, attempt=0, agent="oracle", model=None)
        print("done", phase, flush=True)
    """
)


class Writer:
    def __init__(self, db):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    async def phase(self, n: int) -> None:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(self.proc.stdout.readline)
        assert line.strip() == f"done {n}", line

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_the_app_follows_another_process_writing(tmp_path):
    db = tmp_path / "store.db"
    Store(db).close()  # an empty store: the run does not exist yet when the app starts
    writer = Writer(db)

    async def main():
        app = WatchApp(db, cursor_blink=False, clock=lambda: FIXED_NOW, interval=0.1)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app._last_event_id is not None, what="the first poll")
            assert app.runs == []
            await writer.phase(1)
            await wait_for(pilot, lambda: [r.id for r in app.runs] == ["live-run"], what="the new run")
            assert app.runs[0].running == 3
            await pilot.press("enter")
            await wait_for(
                pilot, lambda: isinstance(app.screen, RolloutsScreen) and len(app.screen.shown) == 3
            )
            rollouts = app.screen
            await pilot.press("enter")  # rlive0, still running
            await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.n_events == 2)
            detail = app.screen
            assert detail.rollout_id == "rlive0" and detail.follow

            await writer.phase(2)
            await wait_for(pilot, lambda: detail.n_events == 7, what="the new events")
            shown = " ".join(plain(item) for item in detail.query(EventItem))
            assert "phase-two-6" in shown
            assert app.header_stats.running == 3  # rlive1 finished, rlive3 started

            await pilot.press("escape")
            await wait_for(pilot, lambda: len(rollouts.shown) == 4, what="the new rollout in the table")
            labels = {r["id"]: status_label(r) for r in rollouts.query_one(RolloutTable).rows}
            assert labels == {
                "rlive0": "running",
                "rlive1": "passed",
                "rlive2": "running",
                "rlive3": "running",
            }
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.runs[0].finished == 1 and app.runs[0].passed == 1)

    try:
        anyio.run(main)
    finally:
        writer.close()


@pytest.mark.slow
def test_the_app_watches_a_clawsdk_run_in_another_process(tmp_path):
    import sqlite3

    from clawsdk.tasks.sources import load_tasks

    db = tmp_path / "store.db"
    Store(db).close()
    n = len(load_tasks("examples/tasks").tasks)

    async def main():
        app = WatchApp(db, cursor_blink=False, interval=0.1)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app._last_event_id is not None, what="the first poll")
            proc = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "clawsdk"),
                    "run",
                    "examples/tasks",
                    "--db",
                    str(db),
                    "--run-id",
                    "live",
                    "--concurrency",
                    "3",
                    "--json",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                await wait_for(
                    pilot,
                    lambda: (app.runs and app.runs[0].id == "live") or proc.poll() is not None,
                    timeout=120,
                    what="the run appearing",
                )
                assert app.runs, f"clawsdk run exited early: {proc.communicate()[1]}"
                await pilot.press("enter")
                await wait_for(
                    pilot,
                    lambda: app.runs[0].status == "finished" and app.runs[0].finished == n,
                    timeout=240,
                    what="the run finishing",
                )
                screen = app.screen
                assert isinstance(screen, RolloutsScreen)
                await wait_for(
                    pilot,
                    lambda: len(screen.shown) == n and all(r["status"] == "finished" for r in screen.shown),
                    what="every row finished",
                )
            finally:
                _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err
            passed, scored = (
                sqlite3.connect(db)
                .execute("SELECT SUM(passed), SUM(scored) FROM rollouts WHERE run_id = 'live'")
                .fetchone()
            )
            assert (app.runs[0].passed, app.runs[0].scored) == (passed, scored)
            with Store(db) as store:
                per_task = store.runs()[0]["pass_rate"]
            assert app.runs[0].pass_rate == pytest.approx(per_task)
            assert app.header_stats.pass_rate == pytest.approx(per_task)
            assert sum(status_label(r) == "passed" for r in screen.shown) == passed

    anyio.run(main)
