"""The watch app driven with Pilot: navigation, filters, sorting, mouse, copy, JSON, help."""

from __future__ import annotations

import json
import sqlite3

import anyio
from clawsdk_tui.app import WatchApp
from clawsdk_tui.detail import EventItem, RolloutScreen
from clawsdk_tui.screens import HelpScreen, JsonScreen, RolloutsScreen, RunsScreen
from clawsdk_tui.widgets import RolloutTable
from tui_helpers import FIXED_NOW, plain, small_store, wait_for

from clawsdk.runtime.runner import run_sync
from clawsdk.tasks.sources import load_tasks

EXAMPLES = "examples/tasks"


def drive(db, script, **kwargs):
    """Run the app headless on `db` and hand (app, pilot) to the async `script`."""

    async def main():
        app = WatchApp(db, cursor_blink=False, clock=lambda: FIXED_NOW, interval=0.1, **kwargs)
        async with app.run_test(size=(140, 40)) as pilot:
            await script(app, pilot)

    anyio.run(main)


def test_runs_to_rollouts_to_detail_and_back(tmp_path):
    db = tmp_path / "store.db"
    small_store(db)
    small_store(db, run_id="older-run", rollouts=8, running=0)

    async def script(app, pilot):
        await wait_for(pilot, lambda: len(app.runs) == 2)
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("enter")  # the newest run first
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutsScreen) and app.screen.shown)
        screen = app.screen
        assert screen.run_id in {"demo-run", "older-run"} and len(screen.shown) in (40, 8)
        table = screen.query_one(RolloutTable)
        await pilot.press("down", "down")
        chosen = table.current_id
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.n_events > 0)
        assert app.screen.rollout_id == chosen
        kinds = {item.event["kind"] for item in app.screen.query(EventItem)}
        assert {"model_response", "tool_call", "tool_result"} <= kinds
        await pilot.press("escape")
        assert isinstance(app.screen, RolloutsScreen) and table.current_id == chosen
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen)

    drive(db, script)


def test_filters_by_status_category_and_text(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=120, running=4)
    conn = sqlite3.connect(db)
    n_passed = conn.execute("SELECT COUNT(*) FROM rollouts WHERE passed = 1 AND scored = 1").fetchone()[0]
    n_failed = conn.execute("SELECT COUNT(*) FROM rollouts WHERE passed = 0 AND scored = 1").fetchone()[0]
    first_cat = conn.execute("SELECT MIN(category) FROM tasks").fetchone()[0]
    n_cat = conn.execute(
        "SELECT COUNT(*) FROM rollouts o JOIN tasks t ON t.hash = o.task_hash WHERE t.category = ?",
        [first_cat],
    ).fetchone()[0]
    timeouts = conn.execute("SELECT COUNT(*) FROM rollouts WHERE failure_kind = 'agent_timeout'").fetchone()[
        0
    ]

    async def script(app, pilot):
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.shown) == 120)
        await pilot.press("s")  # running
        assert screen.status == "running" and len(screen.shown) == 4
        assert all(r["status"] == "running" for r in screen.shown)
        await pilot.press("s")
        assert len(screen.shown) == n_passed
        await pilot.press("s")
        assert len(screen.shown) == n_failed
        await pilot.press("s", "s")  # unscored, then all again
        assert screen.status == "all" and len(screen.shown) == 120
        await pilot.press("c")
        assert screen.category == first_cat and len(screen.shown) == n_cat
        await pilot.press("escape")  # clears the filters
        assert len(screen.shown) == 120
        await pilot.press("slash", *"agent_timeout")
        assert len(screen.shown) == timeouts
        assert all(r["failure_kind"] == "agent_timeout" for r in screen.shown)
        await pilot.press("enter")  # leave the filter box; the filter stays
        assert isinstance(screen.focused, RolloutTable) and len(screen.shown) == timeouts

    drive(db, script, run_id="demo-run")


def test_sort_by_key_and_by_clicking_a_header(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=60, running=2)

    async def script(app, pilot):
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.shown) == 60)
        tasks = [r["task_id"] for r in screen.shown]
        assert tasks == sorted(tasks)
        await pilot.press("o", "o")  # status, then reward
        assert screen.sort == "reward"
        rewards = [r["reward"] for r in screen.shown if r["reward"] is not None]
        assert rewards == sorted(rewards) and screen.shown[-1]["reward"] is None
        table = screen.query_one(RolloutTable)
        # The reward header sits after status(9) task(24) category(16) k(3) turns(11), one space each.
        x = 10 + 25 + 17 + 4 + 12 + 2  # inside "reward"
        await pilot.click(RolloutTable, offset=(x, 0))
        assert screen.sort == "reward" and screen.reverse  # clicked the sorted column: reversed
        rewards = [r["reward"] for r in screen.shown if r["reward"] is not None]
        assert rewards == sorted(rewards, reverse=True)
        await pilot.click(RolloutTable, offset=(12, 0))
        assert screen.sort == "task_id" and not screen.reverse
        assert table.rows[0]["task_id"] == min(tasks)

    drive(db, script, run_id="demo-run")


def test_jump_to_running_copy_id_and_mouse_open(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=30, running=2)

    async def script(app, pilot):
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.shown) == 30)
        table = screen.query_one(RolloutTable)
        await pilot.press("r")
        first = table.current
        assert first["status"] == "running"
        await pilot.press("r")
        assert table.current["status"] == "running" and table.current_id != first["id"]
        await pilot.press("y")
        assert app.clipboard == table.current_id
        await pilot.click(RolloutTable, offset=(5, 3))  # select the third row...
        assert table.cursor == 2
        target = table.current_id
        await pilot.click(RolloutTable, offset=(5, 3))  # ...and a second click opens it
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen))
        assert app.screen.rollout_id == target

    drive(db, script, run_id="demo-run")


def test_full_json_and_help(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=10, running=0)

    async def script(app, pilot):
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.shown) == 10)
        rid = screen.query_one(RolloutTable).current_id
        await pilot.press("j")
        await wait_for(pilot, lambda: isinstance(app.screen, JsonScreen) and app.screen.text)
        data = json.loads(app.screen.text)
        assert (
            data["rollout"]["id"] == rid
            and len(data["events"]) == 14
            and data["verdict"]["score"] is not None
        )
        await pilot.press("y")
        assert json.loads(app.clipboard)["rollout"]["id"] == rid
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_text = plain(app.screen.query_one("Static"))
        assert "filter" in help_text and "next running" in help_text
        await pilot.press("escape")
        assert isinstance(app.screen, RolloutsScreen)

    drive(db, script, run_id="demo-run")


def test_watch_a_store_the_real_runner_wrote(tmp_path):
    db = tmp_path / "store.db"
    loaded = load_tasks(EXAMPLES)
    result = run_sync(loaded.tasks[:4], agent="oracle", db=db, run_id="oracle-run", concurrency=4)
    assert all(o.passed for o in result.outcomes)

    async def script(app, pilot):
        await wait_for(pilot, lambda: app.runs and app.runs[0].finished == 4)
        run = app.runs[0]
        assert (run.id, run.passed, run.scored, run.failures) == ("oracle-run", 4, 4, {})
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutsScreen) and len(app.screen.shown) == 4)
        assert {r["task_id"] for r in app.screen.shown} == {t.id for t in loaded.tasks[:4]}
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.query("#verdict"))
        detail = app.screen
        kinds = [item.event["kind"] for item in detail.query(EventItem)]
        assert "tool_call" in kinds and "tool_result" in kinds and "verifier" in kinds
        assert detail.n_events == len(kinds)
        verdict = plain(detail.query_one("#verdict"))
        assert "passed" in verdict and "1.00" in verdict
        await pilot.press("e")  # unfold every long output
        foldable = [item for item in detail.query(EventItem) if item.view.foldable]
        assert foldable and all(not item.folded for item in foldable)
        assert all(len(plain(item).splitlines()) > item.view.body_lines for item in foldable)

    drive(db, script)


def test_watch_command_is_wired_and_clawsdk_stays_headless(tmp_path):
    import subprocess
    import sys

    from click.testing import CliRunner

    from clawsdk.cli import cli

    out = CliRunner().invoke(cli, ["watch", "--db", str(tmp_path / "none.db")])
    assert out.exit_code == 2 and "no clawsdk store" in out.output
    code = "import sys, clawsdk.cli.watch_cmd; print('textual' in sys.modules)"
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )


def test_an_empty_store_says_how_to_fill_it(tmp_path):
    from clawsdk.store.store import Store

    db = tmp_path / "store.db"
    Store(db).close()

    async def script(app, pilot):
        await wait_for(pilot, lambda: app._last_event_id is not None, what="the first poll")
        await pilot.pause()
        empty = app.screen.query_one("#empty")
        assert empty.display and "clawsdk run" in plain(empty)

    drive(db, script)


def test_the_pass_rate_shown_is_per_task(tmp_path):
    from test_tui_data import PER_TASK
    from textual.widgets import DataTable
    from tui_helpers import store_of

    db = tmp_path / "store.db"
    store_of(db, PER_TASK)

    async def script(app, pilot):
        await wait_for(pilot, lambda: app.runs and app.header_stats.pass_rates)
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        cells = [str(c) for c in table.get_row_at(0)]
        assert cells[5:7] == ["50% (2 tasks)", "0.60"]  # not 80% (4/5) and 0.84: rollouts
        assert RunsScreen.COLUMNS[5:7] == ("pass@1/task", "reward/task")
        assert app.header_stats.pass_rate == 0.5
        assert app.header_stats.pass_rates == (1.0, 0.5, 0.5, 0.5, 0.5)

    drive(db, script)
