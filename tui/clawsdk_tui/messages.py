"""The app's messages: what background workers post to the app thread (screens never import the app)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from clawsdk_tui.data import EventsChunk, RunControl, RunSummary, RunWatch


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
        steering: RunControl | None = None,
    ) -> None:
        super().__init__()
        self.watch = watch
        self.steering = steering  # how the run is steered (run_control); `control` is textual's
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


class PollFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class ControlDone(Message):
    """What a request on a run's control channel (pause, resume, set, ...) answered."""

    def __init__(self, run_id: str, op: str, state: dict | None, error: str | None) -> None:
        super().__init__()
        self.run_id = run_id
        self.op = op
        self.state = state
        self.error = error
