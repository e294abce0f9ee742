"""SVG snapshots of each screen, cursor blink off, on a deterministic synthetic store and a fixed clock.

CLAWSDK_UPDATE_SNAPSHOTS=1 rewrites them after an intended change; look at the SVGs before committing.
"""

from __future__ import annotations

import anyio
from clawsdk_tui.app import WatchApp
from clawsdk_tui.detail import RolloutScreen
from clawsdk_tui.screens import HelpScreen, RolloutsScreen
from tui_helpers import FIXED_NOW, assert_snapshot, small_store, wait_for

SIZE = (120, 34)


def snap(tmp_path, name, script, **app_kwargs):
    db = tmp_path / "store.db"
    small_store(db)
    small_store(db, run_id="nightly-baseline", rollouts=24, running=0, seed=3)

    async def main():
        app = WatchApp(db, cursor_blink=False, clock=lambda: FIXED_NOW, interval=0.1, **app_kwargs)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: len(app.runs) == 2)
            await script(app, pilot)
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()
            svg = app.export_screenshot()
        assert_snapshot(svg, name, tmp_path)

    anyio.run(main)


def test_snapshot_runs(tmp_path):
    async def script(app, pilot):
        await wait_for(pilot, lambda: app.header_stats.pass_rates)

    snap(tmp_path, "runs", script)


def test_snapshot_rollouts_filtered(tmp_path):
    async def script(app, pilot):
        screen = app.screen
        await wait_for(pilot, lambda: isinstance(screen, RolloutsScreen) and len(screen.shown) == 40)
        await pilot.press("o", "o", "O")  # by reward, highest first
        await pilot.press("slash", *"report")
        await wait_for(pilot, lambda: len(screen.shown) < 40)

    snap(tmp_path, "rollouts_filtered", script, run_id="demo-run")


def test_snapshot_rollout_detail(tmp_path):
    async def script(app, pilot):
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.shown) == 40)
        await pilot.press("end", "enter")  # a running rollout, events still coming
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.n_events > 0)

    snap(tmp_path, "rollout_detail", script, run_id="demo-run")


def test_snapshot_help(tmp_path):
    async def script(app, pilot):
        await wait_for(pilot, lambda: len(app.screen.shown) == 40)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))

    snap(tmp_path, "help", script, run_id="demo-run")
