"""The recorder: every model call, tool call, exec and verifier output becomes an ordered event."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from clawsdk.store.store import dumps, now

if TYPE_CHECKING:
    from clawsdk.store.writer import StoreWriter

EVENT_KINDS = (
    "model_request",
    "model_response",
    "tool_call",
    "tool_result",
    "sandbox_exec",
    "verifier",
    "error",
    "note",
)


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
        self.kept: list[dict] = []

    async def record(self, kind: str, payload: dict[str, Any], *, duration_ms: float | None = None) -> int:
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {kind!r}; one of {EVENT_KINDS}")
        seq = self.seq
        self.seq += 1
        if kind == "tool_call":
            self.n_tool_calls += 1
        elif kind == "model_request":
            self.n_model_calls += 1
        ts = now()
        if self.keep:
            self.kept.append({"seq": seq, "kind": kind, "ts": ts, "duration_ms": duration_ms, "payload": payload})
        if self.writer is not None:
            await self.writer.events(
                [(self.rollout_id, self.attempt, seq, kind, ts, duration_ms, dumps(payload))]
            )
        return seq

    def transcript(self) -> list[dict]:
        """The events kept in memory (when `keep` is on)."""
        return list(self.kept)


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000
