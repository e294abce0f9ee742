"""The watch app: polls the store on a worker thread and hands what changed to the screens.

The worker only reads and posts a `Polled` message; every widget is touched on the app thread.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType

from clawsdk_tui.data import EventFollower, Rates, RunControl, RunSummary, RunWatch, StoreReader
from clawsdk_tui.messages import ControlDone, DetailUpdate, Polled, PollFailed  # where they were
from clawsdk_tui.render import clean
from clawsdk_tui.widgets import HeaderStats


class WatchApp(App):
    """`clawsdk watch`: runs, their rollouts, and one rollout's live event stream."""

    TITLE = "clawsdk watch"
    CSS = """
    Screen { background: $surface; }
    """
    RUNS_EVERY_S = 5.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("n", "follow_newest", "newest run"),
        Binding("p", "pause", "pause/resume", show=False),
        Binding("plus", "concurrency(1)", "more at once", show=False),
        Binding("minus", "concurrency(-1)", "fewer at once", show=False),
        Binding("A", "auto", "auto concurrency", show=False),
        Binding("R", "requeue", "requeue unscored", show=False),
        Binding("X", "cancel_run", "cancel the run", show=False),
    ]

    def __init__(
        self,
        db: str | os.PathLike,
        *,
        run_id: str | None = None,
        interval: float = 0.5,
        follow: bool = False,
        cursor_blink: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.db = Path(db)
        self.reader = StoreReader(self.db)
        self.start_run = run_id
        self.interval = interval
        self.follow_new = follow  # open each new run as it starts (`clawsdk watch --follow`)
        self.known_runs: set[str] | None = None  # the run ids seen so far (None: not read yet)
        self.newest: str | None = None  # a run that started while the view was open
        self.steering: RunControl | None = None  # the run in focus's last run_control row
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
            self.steering = None
            self.header_stats = HeaderStats(scope=run_id)
            from clawsdk_tui.widgets import LiveHeader

            for header in self.screen.query(LiveHeader):
                header.show(self.header_stats)
        self.poll_now(force=True)

    def _new_runs(self, runs: list[RunSummary]) -> None:
        """A run that started while the view is open is announced, never followed unless asked (`n`, or
        --follow): what the screen shows, and what Enter opens, stays the run the operator is on."""
        ids = {r.id for r in runs}
        if self.known_runs is None:
            self.known_runs = ids
            return
        new = [r.id for r in runs if r.id not in self.known_runs]  # newest first
        self.known_runs |= ids
        if not new:
            return
        self.newest = new[0]
        if self.follow_new:
            self.call_later(self.action_follow_newest)  # once the screens have the new run's row
        else:
            self.notify(f"a new run started: {clean(new[0])} (n: follow it)", timeout=8, markup=False)

    def action_follow_newest(self) -> None:
        """Show the newest run: its row on the runs screen, its rollouts where rollouts are shown."""
        from clawsdk_tui.screens import RolloutsScreen, RunsScreen

        target = self.newest or (self.runs[0].id if self.runs else None)
        if target is None:
            self.notify("no run yet", timeout=2)
            return
        self.newest = None
        screen = self.screen
        if isinstance(screen, RunsScreen):
            screen.select_run(target)
        elif isinstance(screen, RolloutsScreen) and screen.run_id != target:
            for below in self.screen_stack:  # back on the runs, the cursor is on the run followed
                if isinstance(below, RunsScreen):
                    below.select_run(target)
            self.focus_run(target)
            self.switch_screen(RolloutsScreen(target))
        else:
            self.focus_run(target)

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
        control = reader.control(watch.run_id) if watch is not None and changed else None
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
            steering=control,
        )

    def on_polled(self, msg: Polled) -> None:
        self._polling = False
        if not self.is_running:  # shutting down: the screens are going away
            return
        if self.run_watch is None and msg.watch is not None:
            self.run_watch = msg.watch  # nothing chosen yet: the header follows the newest run
        if msg.runs is not None:
            self.runs = msg.runs
            self._new_runs(msg.runs)
        if msg.rows is not None and msg.run_id is not None:
            self.rows[msg.run_id] = msg.rows
        if msg.run_id is not None and self.run_watch is not None and msg.run_id == self.run_watch.run_id:
            if msg.steering is not None:
                self.steering = msg.steering
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
                pass_rate=((msg.pass_rates[-1] if msg.pass_rates else None) if msg.pass_rates is not None
                           else stats.pass_rate),
                concurrency=self.steering.level if self.steering is not None else None,
                paused=self.steering.paused if self.steering is not None else False,
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

    # ---- steering the run in focus (its control channel) ----

    def action_pause(self) -> None:
        paused = self.steering.paused if self.steering is not None else False
        self._steer("resume" if paused else "pause")

    def action_concurrency(self, step: int) -> None:
        level = self.steering.level if self.steering is not None and self.steering.level else None
        if level is None:
            self._steer("status", then_step=step)
            return
        self._steer("set", settings={"concurrency": max(1, level + step * max(1, level // 4))})

    def action_auto(self) -> None:
        self._steer("set", settings={"concurrency": "auto"})

    def action_requeue(self) -> None:
        self._steer("requeue_unscored")

    def action_cancel_run(self) -> None:
        from clawsdk_tui.screens import ConfirmScreen

        run_id = self.run_watch.run_id if self.run_watch else None
        if run_id is None:
            self.notify("no run in focus", timeout=2)
            return
        self.push_screen(ConfirmScreen(f"Cancel run {clean(run_id)}? Rollouts in flight end cancelled; rerun "
                                       "it with --run-id to finish it.  y / n"),
                         lambda yes: self._steer("cancel") if yes else None)

    def _steer(self, op: str, **args) -> None:
        run_id = self.run_watch.run_id if self.run_watch else None
        if run_id is None:
            self.notify("no run in focus", timeout=2)
            return
        self._request(run_id, op, args)

    @work(thread=True, group="control", exit_on_error=False)
    def _request(self, run_id: str, op: str, args: dict) -> None:
        from clawsdk.runtime.control import ControlError, request

        step = args.pop("then_step", None)
        try:
            state = request(self.db, run_id, op, by="clawsdk watch", **args)
            if step is not None:  # the level was not known yet: ask, then set
                level = state["concurrency"]
                op = "set"
                state = request(self.db, run_id, op, by="clawsdk watch",
                                settings={"concurrency": max(1, level + step * max(1, level // 4))})
        except ControlError as e:
            self.post_message(ControlDone(run_id, op, None, str(e)))
            return
        self.post_message(ControlDone(run_id, op, state, None))

    def on_control_done(self, msg: ControlDone) -> None:
        if msg.error:
            self.notify(msg.error, severity="error", timeout=6, markup=False)
            return
        s = msg.state or {}
        said = {"pause": "paused", "resume": "resumed", "cancel": "cancelling",
                "requeue_unscored": f"requeued {s.get('requeued', 0)} unscored rollout(s)"}.get(
            msg.op, f"concurrency {s.get('concurrency')} ({s.get('mode')})")
        self.notify(f"{clean(msg.run_id)}: {said}", timeout=4, markup=False)
        self.poll_now(force=True)

    def copy_rollout_id(self, rollout_id: str | None) -> None:
        if rollout_id:
            self.copy_to_clipboard(rollout_id)
            self.notify(f"copied {clean(rollout_id)}", timeout=2, markup=False)  # an id from the store

    def open_json(self, rollout_id: str | None) -> None:
        from clawsdk_tui.screens import JsonScreen

        if rollout_id:
            self.push_screen(JsonScreen(rollout_id))
