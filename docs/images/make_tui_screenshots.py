"""Regenerate the screenshots in docs/tui.md from the real app (headless), on a real oracle run
plus a synthetic run with failures:  .venv/bin/python docs/images/make_tui_screenshots.py
PNGs need a headless chromium on PATH (apt-get install chromium); the SVGs do not."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

from clawsdk_tui.app import WatchApp
from clawsdk_tui.synthetic import BASE, fill_store

from clawsdk.runtime.runner import run_sync
from clawsdk.tasks.sources import load_tasks

HERE = Path(__file__).parent
SIZE = (130, 36)


async def open_run(app, pilot, run_id: str) -> None:
    await pilot.press(*["up"] * len(app.runs), *["down"] * [r.id for r in app.runs].index(run_id), "enter")
    while getattr(app.screen, "run_id", None) != run_id or not app.screen.shown:
        await pilot.pause(0.05)


async def shoot(db: Path) -> None:
    app = WatchApp(db, cursor_blink=False, clock=lambda: BASE.timestamp() + 3600, interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        while len(app.runs) < 2:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        app.save_screenshot("watch-runs.svg", path=str(HERE))
        await open_run(app, pilot, "nightly-tool-loop")
        await pilot.press("o", "o", "o")  # sort by duration
        await pilot.pause(0.3)
        app.save_screenshot("watch-rollouts.svg", path=str(HERE))
        await pilot.press("escape")
        await open_run(app, pilot, "oracle")
        await pilot.press("enter")
        while not getattr(app.screen, "n_events", 0):
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        app.save_screenshot("watch-detail.svg", path=str(HERE))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        run_sync(load_tasks("examples/tasks").tasks, agent="oracle", db=db, run_id="oracle", concurrency=4)
        fill_store(db, rollouts=2000, events_per_rollout=40, running=6, tasks=200, run_id="nightly-tool-loop")
        asyncio.run(shoot(db))
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    for svg in sorted(HERE.glob("watch-*.svg")):
        if browser:
            subprocess.run(
                [
                    browser,
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    "--window-size=1300,860",
                    f"--screenshot={svg.with_suffix('.png')}",
                    svg.as_uri(),
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
        print(svg)


if __name__ == "__main__":
    main()
