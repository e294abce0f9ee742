"""The recorder: every model call, tool call, exec and verifier output becomes an ordered event."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from clawsdk.store.events import EVENT_KINDS, LINKS, Event, StoredEvent, event_of, parse_event
from clawsdk.store.store import dumps, now

if TYPE_CHECKING:
    from clawsdk.store.writer import StoreWriter

__all__ = ["EVENT_KINDS", "Recorder", "Stopwatch"]

#: the types record() takes (typing.get_args of the union, spelled out: a set lookup per event)
_EMITTED = frozenset(Event.__args__)


class Recorder:
    """Numbers the events of one rollout attempt and hands them to the store writer.

    With no writer it only counts and keeps events in memory (validation, tests).
    """

    def __init__(self, writer: StoreWriter | None, rollout_id: str, attempt: int = 0, *, keep: bool = False):
        self.writer = writer
        self.rollout_id = rollout_id
        self.attempt = attempt
        self.seq = 0
        self.n_tool_calls = 0
        self.n_model_calls = 0
        self.keep = keep or writer is None
        self.kept: list[StoredEvent] = []
        self.remote_seqs: dict[int, int] = {}  # record_rows: a seq that moved, where it was recorded -> here
        #: the run's pause gate (`Slots`): a model call waits at its model_request while the run is paused
        self.gate: Any = None
        #: `-c auto`'s controller hears model latencies, errors and sandbox starts here
        self.observe: Callable[[str, float | None, dict | None], None] | None = None
        #: the agent phase's cancel scope, whose deadline a pause pushes back (set by attempt_rollout)
        self.agent_scope: anyio.CancelScope | None = None

    def _number(self, kind: str, ts: str, duration_ms: float | None, payload: dict | None,
                raw: str | None) -> tuple:
        """The next event's store row; counts calls and keeps it in memory when asked."""
        seq = self.seq
        self.seq += 1
        if kind == "tool_call":
            self.n_tool_calls += 1
        elif kind == "model_request":
            self.n_model_calls += 1
        if self.keep:
            self.kept.append(parse_event({"seq": seq, "kind": kind, "ts": ts, "duration_ms": duration_ms,
                                          "payload": payload if payload is not None else raw}))
        return (self.rollout_id, self.attempt, seq, kind, ts, duration_ms, raw)

    async def record(self, event: Event | str, payload: dict[str, Any] | None = None, *,
                     duration_ms: float | None = None) -> int:
        """Record `event` (one of clawsdk.store.events' kinds) as the attempt's next; returns its seq.
        `duration_ms`: how long it took (default: the event's own).

        `record(kind, payload)`, the form of earlier releases, still records: the payload is read as that
        kind's event (its fields and order kept), so agents written against it go on working."""
        if isinstance(event, str):
            event = event_of(event, payload)
        elif type(event) not in _EMITTED:
            raise TypeError(f"record() takes an event of clawsdk.store.events ({', '.join(EVENT_KINDS)}), "
                            f"not {type(event).__name__}")
        kind = event.kind
        if duration_ms is None:
            duration_ms = event.duration_ms
        if kind == "model_request" and self.gate is not None and self.gate.paused:
            await self.wait_unpaused()
        payload = event.payload()
        raw = dumps(payload) if self.writer is not None else None
        row = self._number(kind, now(), duration_ms, payload, raw)
        if self.writer is not None:
            await self.writer.events([row])
        if self.observe is not None and kind in ("model_response", "error"):
            self.observe(kind, duration_ms, payload)
        return row[2]

    async def wait_unpaused(self) -> None:
        """Wait while the run is paused, and give the agent's clock the time back: a pause is not the agent's."""
        scope = self.agent_scope
        if scope is None:
            await self.gate.wait_unpaused()
            return
        deadline, scope.deadline = scope.deadline, math.inf  # the agent's clock stands still while it waits
        paused_at = anyio.current_time()
        try:
            await self.gate.wait_unpaused()
        finally:
            scope.deadline = deadline + (anyio.current_time() - paused_at)

    async def record_rows(self, rows: list[tuple]) -> None:
        """Events recorded elsewhere (store rows from a Ray worker's recorder), as one batch.

        They keep their timestamps, durations and payloads; this recorder numbers them after its own,
        in the order given, and the seqs their payloads name (LINKS) follow.
        """
        out = []
        observe = self.observe
        for _rid, _attempt, seq, kind, ts, ms, raw in rows:
            if seq != self.seq:  # only then can a payload name a seq that moved
                self.remote_seqs[seq] = self.seq
            out.append(self._number(kind, ts, ms, None, self._relinked(kind, raw)))
            if observe is not None and kind in ("model_response", "error"):
                observe(kind, ms, json.loads(raw or "null") if kind == "error" else None)
        if out and self.writer is not None:
            await self.writer.events(out)

    def _relinked(self, kind: str, raw: str | None) -> str | None:
        """`raw` with the seq it names (a result's call, a reply's request) as this recorder numbered it."""
        key = LINKS.get(kind)
        if key is None or raw is None or not self.remote_seqs:  # numbered as here: nothing to parse
            return raw
        payload = json.loads(raw)
        seq = payload.get(key) if isinstance(payload, dict) else None
        if not isinstance(seq, int) or self.remote_seqs.get(seq, seq) == seq:
            return raw
        return dumps({**payload, key: self.remote_seqs[seq]})

    def transcript(self) -> list[StoredEvent]:
        """The events kept in memory (when `keep` is on)."""
        return list(self.kept)

    async def events_so_far(self) -> list[StoredEvent]:
        """Every event of this attempt so far, oldest first: kept in memory, or read back from the store.

        A rollout does not hold its events: they stream to the writer as they happen, so memory stays
        flat however long the agent runs. Verifiers that grade the trajectory ask for it here, once.
        """
        if self.keep or self.writer is None:
            return self.transcript()
        await self.writer.flush()
        return await anyio.to_thread.run_sync(self._read_back)

    def _read_back(self) -> list[StoredEvent]:
        from clawsdk.store.store import Store

        assert self.writer is not None
        with Store(self.writer.path, readonly=True) as store:
            return store.events(self.rollout_id, self.attempt)


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000
