"""A new run starting while the view shows another: the view stays on the run it shows (cursor, header and
what Enter opens agree), says that a run started, and follows it only when asked (n, or --follow). And the
run in focus is steered from the view through its control channel (p, +, -, A, R, X)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import anyio
from clawsdk_tui.app import WatchApp
from clawsdk_tui.screens import ConfirmScreen, RolloutsScreen, RunsScreen
from clawsdk_tui.widgets import LiveHeader
from textual.widgets import DataTable
from tui_helpers import FIXED_NOW, small_store, wait_for

from tests.conftest import make_task


def start_new_run(db) -> None:
    small_store(db, run_id="new-run", rollouts=5, running=2)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET created_at = '2030-01-01T00:00:00+00:00' WHERE id = 'new-run'")  # the newest
    con.commit()
    con.close()


def drive(db, script, **kwargs):
    async def main():
        app = WatchApp(db, cursor_blink=False, clock=lambda: FIXED_NOW, interval=0.1, **kwargs)
        said: list[str] = []
        notify = app.notify
        app.notify = lambda message, *a, **k: (said.append(str(message)), notify(message, *a, **k))[1]
        async with app.run_test(size=(140, 40)) as pilot:
            await script(app, pilot, said)

    anyio.run(main)


def cursor_run(app) -> str:
    table = app.screen.query_one(DataTable)
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


def header_run(app) -> str:
    return app.screen.query_one(LiveHeader).stats.scope


def test_on_the_runs_screen_a_new_run_is_announced_and_enter_opens_the_run_shown(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, run_id="older-run", rollouts=8, running=2)

    async def script(app, pilot, said):
        await wait_for(pilot, lambda: len(app.runs) == 1)
        assert cursor_run(app) == header_run(app) == "older-run"
        start_new_run(db)
        await wait_for(pilot, lambda: len(app.runs) == 2 and any("new-run" in s for s in said), what="the news")
        await pilot.pause(0.3)
        assert [r.id for r in app.runs] == ["new-run", "older-run"]  # on top, and not followed
        assert cursor_run(app) == header_run(app) == "older-run"
        assert any("a new run started: new-run (n: follow it)" in s for s in said)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutsScreen) and app.screen.shown)
        assert app.screen.run_id == "older-run" and {r["run_id"] for r in app.screen.shown} == {"older-run"}
        await pilot.press("escape")
        await pilot.press("n")  # asked: now it follows
        await wait_for(pilot, lambda: cursor_run(app) == "new-run" and header_run(app) == "new-run")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutsScreen) and app.screen.shown)
        assert app.screen.run_id == "new-run" and {r["run_id"] for r in app.screen.shown} == {"new-run"}
        await pilot.press("escape")
        await pilot.press("down")  # the header names the run under the cursor, the one Enter opens
        await wait_for(pilot, lambda: header_run(app) == "older-run" == cursor_run(app))

    drive(db, script)


def test_on_a_runs_rollouts_a_new_run_leaves_the_view_where_it_is(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, run_id="older-run", rollouts=8, running=2)

    async def script(app, pilot, said):
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.shown) == 8)
        start_new_run(db)
        await wait_for(pilot, lambda: any("new-run" in s for s in said), what="the news")
        await pilot.pause(0.3)
        assert app.screen is screen and screen.run_id == "older-run" and header_run(app) == "older-run"
        assert {r["run_id"] for r in screen.shown} == {"older-run"}
        await pilot.press("enter")  # a rollout of the run shown
        await wait_for(pilot, lambda: getattr(app.screen, "rollout_id", None) is not None)
        assert app.screen.rollout_id in {r["id"] for r in screen.shown}
        await pilot.press("escape")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutsScreen) and app.screen.run_id == "new-run"
                       and len(app.screen.shown) == 5)
        assert header_run(app) == "new-run"

    drive(db, script, run_id="older-run")


def test_with_follow_each_new_run_is_shown_as_it_starts(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, run_id="older-run", rollouts=8, running=2)

    async def script(app, pilot, said):
        await wait_for(pilot, lambda: len(app.runs) == 1)
        start_new_run(db)
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and cursor_run(app) == "new-run"
                       and header_run(app) == "new-run")

    drive(db, script, follow=True)


WAITER = "- tool: exec\n  args: {command: 'while [ ! -f %s ]; do sleep 0.05; done; echo done > done.txt'}\n"


def test_the_view_steers_the_run_in_focus(tmp_path):
    """p pauses and resumes, + raises the level, X (confirmed) cancels: through the run's control channel,
    recorded with the view as the client; the header and the control line show what is in force."""
    for i in range(4):
        make_task(tmp_path / "tasks", f"t{i}", steps=[], extra={"limits": {"tool_timeout_s": 900}})
    (tmp_path / "script.yaml").write_text(WAITER % (tmp_path / "go"))
    db = tmp_path / "store.db"
    proc = subprocess.Popen([sys.executable, "-m", "clawsdk", "run", "tasks", "--agent", "scripted", "--agent-opt",
                             "script=script.yaml", "--sandbox", "local", "-c", "2", "--db", str(db),
                             "--run-id", "live"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (db.exists() and _rows(db, "SELECT 1 FROM rollouts WHERE status = 'running'")):
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.1)

        async def script(app, pilot, said):
            screen = app.screen
            await wait_for(pilot, lambda: screen.shown)
            await pilot.press("p")
            await wait_for(pilot, lambda: app.steering is not None and app.steering.paused, what="the pause")
            assert app.screen.query_one(LiveHeader).stats.paused
            assert "paused" in str(screen.query_one("#control").render())
            await pilot.press("p")
            await wait_for(pilot, lambda: app.steering is not None and not app.steering.paused)
            await pilot.press("plus")
            await wait_for(pilot, lambda: app.steering is not None and app.steering.level == 3, what="+1")
            assert app.screen.query_one(LiveHeader).stats.concurrency == 3
            await pilot.press("X")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await wait_for(pilot, lambda: proc.poll() is not None, timeout=60, what="the cancelled run's end")

        drive(db, script, run_id="live")
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    rows = _rows(db, "SELECT action, actor FROM run_control WHERE source = 'operator' ORDER BY id")
    assert [r[0] for r in rows] == ["pause", "resume", "set", "cancel"]
    assert all("clawsdk watch" in r[1] for r in rows)


def _rows(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
