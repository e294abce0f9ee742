"""The watch app: polls the store on a worker thread and hands what changed to the screens.

The worker only reads and posts a `Polled` message; every widget is touched on the app thread.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message

from clawsdk_tui.data import EventFollower, EventsChunk, Rates, RunSummary, RunWatch, StoreReader
from clawsdk_tui.render import clean
from clawsdk_tui.widgets import HeaderStats


@dataclass
class DetailUpdate:
    rollout: dict | None
    chunk: EventsChunk | None
    verdict: dict | None
    instruction: str | None = None


class Polled(Message):
    """What one poll found. Fields are None when that part did not change."""

    def __init__(
        self,
        *,
        at: float,
        changed: bool,
        runs: list[RunSummary] | None,
        run_id: str | None,
        rows: list[dict] | None,
        changed_ids: set[str],
        finished: int,
        running: int,
        errors: int,
        tool_calls: int,
        pass_rates: list[float] | None,
        detail: DetailUpdate | None,
        watch: RunWatch | None,
    ) -> None:
        super().__init__()
        self.watch = watch
        self.at = at
        self.changed = changed
        self.runs = runs
        self.run_id = run_id
        self.rows = rows
        self.changed_ids = changed_ids
        self.finished = finished
        self.running = running
        self.errors = errors
        self.tool_calls = tool_calls
        self.pass_rates = pass_rates
        self.detail = detail


class WatchApp(App):
    """`clawsdk watch`: runs, their rollouts, and one rollout's live event stream."""

    TITLE = "clawsdk watch"
    CSS = """
    Screen { background: $surface; }
    """
    RUNS_EVERY_S = 5.0
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
    ]

    def __init__(
        self,
        db: str | os.PathLike,
        *,
        run_id: str | None = None,
        interval: float = 0.5,
        cursor_blink: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.db = Path(db)
        self.reader = StoreReader(self.db)
        self.start_run = run_id
        self.interval = interval
        self.cursor_blink = cursor_blink
        self.clock = clock
        self.runs: list[RunSummary] = []
        self.rows: dict[str, list[dict]] = {}  # run id -> all its rollout rows, as last read
        self.header_stats = HeaderStats()
        self.rates = Rates()
        self.run_watch: RunWatch | None = None
        self.follower: EventFollower | None = None
        self._load_all = False
        self._polling = False
        self._again = False
        self._force = True
        # Worker-thread state: touched only inside _poll, which never runs twice at once.
        self._dv: int | None = None
        self._last_event_id: int | None = None
        self._tool_calls = 0
        self._runs_stale = False
        self._runs_read = -1e9

    # ---- lifecycle ----

    def on_mount(self) -> None:
        from clawsdk_tui.screens import RolloutsScreen, RunsScreen

        self.push_screen(RunsScreen())
        if self.start_run:
            if self.start_run not in {r.id for r in self.reader.runs()}:
                self.notify(
                    f"no run {self.start_run!r} in {self.db} (yet); watching for it",
                    severity="warning",
                    markup=False,
                )
            self.focus_run(self.start_run)
            self.push_screen(RolloutsScreen(self.start_run))
        self.poll_now(force=True)
        self.set_interval(self.interval, self.poll_now)

    def on_unmount(self) -> None:
        self.workers.cancel_all()

    # ---- what is being watched ----

    def focus_run(self, run_id: str) -> None:
        if self.run_watch is None or self.run_watch.run_id != run_id:
            self.run_watch = RunWatch(self.reader, run_id)
            self.rates.reset()
            self._force = True
            self.header_stats = HeaderStats(scope=run_id)
        self.poll_now(force=True)

    def follow(self, rollout_id: str | None, *, load_all: bool = False) -> None:
        self.follower = EventFollower(self.reader, rollout_id) if rollout_id else None
        self._load_all = load_all
        if rollout_id:
            self.poll_now(force=True)

    # ---- polling ----

    def poll_now(self, force: bool = False) -> None:
        self._force = self._force or force
        if self._polling:
            self._again = True
            return
        self._polling = True
        force, self._force = self._force, False
        load_all, self._load_all = self._load_all, False
        # The runs summary aggregates every rollout of every run: read it live only while the runs
        # screen shows it, and every few seconds otherwise.
        from clawsdk_tui.screens import RunsScreen

        now = time.monotonic()
        with_runs = force or isinstance(self.screen, RunsScreen) or now - self._runs_read >= self.RUNS_EVERY_S
        if with_runs:
            self._runs_read = now
        self._poll(force, self.run_watch, self.follower, load_all, with_runs)

    @work(thread=True, group="poll", exit_on_error=False)
    def _poll(
        self,
        force: bool,
        watch: RunWatch | None,
        follower: EventFollower | None,
        load_all: bool,
        with_runs: bool,
    ) -> None:
        try:
            self.post_message(self._read(force, watch, follower, load_all, with_runs))
        except Exception as e:  # a locked or vanished file: say so and keep trying
            self.post_message(PollFailed(str(e)))

    def _read(
        self,
        force: bool,
        watch: RunWatch | None,
        follower: EventFollower | None,
        load_all: bool,
        with_runs: bool,
    ) -> Polled:
        reader = self.reader
        now = self.clock()
        dv = reader.data_version()
        changed = force or dv != self._dv
        self._dv = dv
        if with_runs and self._runs_stale:
            changed, self._runs_stale = True, False
        runs = rows = pass_rates = detail = None
        changed_ids: set[str] = set()
        if changed:
            if with_runs:
                runs = reader.runs()
            else:
                self._runs_stale = True
            if watch is None and runs:
                watch = RunWatch(reader, runs[0].id)
            if watch is not None:
                delta = watch.poll()
                changed_ids = {r["id"] for r in delta.changed}
                if changed_ids or force:
                    rows = list(watch.rows.values())
                    pass_rates = watch.pass_rate_series()
            max_id = reader.max_event_id()
            if self._last_event_id is not None:
                self._tool_calls += reader.new_tool_calls(
                    self._last_event_id, max_id, watch.run_id if watch else None
                )
            self._last_event_id = max_id
            if follower is not None:
                ro, chunk, verdict = follower.poll(load_all=load_all)
                instruction = reader.instruction(follower.rollout_id) if chunk and chunk.reset else None
                detail = DetailUpdate(ro, chunk, verdict, instruction)
        counts = watch.counts() if watch is not None else {}
        return Polled(
            at=now,
            changed=changed,
            runs=runs,
            run_id=watch.run_id if watch else None,
            rows=rows,
            changed_ids=changed_ids,
            finished=counts.get("finished", 0),
            running=counts.get("running", 0),
            errors=counts.get("errors", 0),
            tool_calls=self._tool_calls,
            pass_rates=pass_rates,
            detail=detail,
            watch=watch,
        )

    def on_polled(self, msg: Polled) -> None:
        self._polling = False
        if not self.is_running:  # shutting down: the screens are going away
            return
        if self.run_watch is None and msg.watch is not None:
            self.run_watch = msg.watch  # nothing chosen yet: the header follows the newest run
        if msg.runs is not None:
            self.runs = msg.runs
        if msg.rows is not None and msg.run_id is not None:
            self.rows[msg.run_id] = msg.rows
        if msg.run_id is not None and self.run_watch is not None and msg.run_id == self.run_watch.run_id:
            self.rates.add(msg.at, msg.finished, msg.tool_calls)
            stats = self.header_stats
            self.header_stats = HeaderStats(
                scope=msg.run_id,
                rollouts_per_s=self.rates.rollouts_per_s,
                tool_calls_per_s=self.rates.tool_calls_per_s,
                running=msg.running,
                finished=msg.finished,
                errors=msg.errors,
                pass_rates=tuple(msg.pass_rates) if msg.pass_rates is not None else stats.pass_rates,
                # per task: the series is cumulative, so its last point is the rate so far
                pass_rate=(msg.pass_rates or [None])[-1] if msg.pass_rates is not None else stats.pass_rate,
            )
        from clawsdk_tui.widgets import LiveHeader

        for header in self.screen.query(LiveHeader):
            header.show(self.header_stats)
        for screen in self.screen_stack:
            update = getattr(screen, "store_updated", None)
            if update is not None and getattr(
                screen, "ready", False
            ):  # a new screen reads app state on mount
                update(msg)
        if self._again:
            self._again = False
            self.poll_now()

    def on_poll_failed(self, msg: PollFailed) -> None:
        self._polling = False
        self.notify(f"reading {self.db} failed: {msg.error}", severity="error", timeout=5, markup=False)

    # ---- app-wide actions ----

    def action_help(self) -> None:
        from clawsdk_tui.screens import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def copy_rollout_id(self, rollout_id: str | None) -> None:
        if rollout_id:
            self.copy_to_clipboard(rollout_id)
            self.notify(f"copied {clean(rollout_id)}", timeout=2, markup=False)  # an id from the store

    def open_json(self, rollout_id: str | None) -> None:
        from clawsdk_tui.screens import JsonScreen

        if rollout_id:
            self.push_screen(JsonScreen(rollout_id))


class PollFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error
