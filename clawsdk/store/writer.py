"""The one writer: a task that drains a queue of writes and commits them in batches.

Recording never waits on SQLite: producers put writes on a bounded queue (back-pressure only
when it is full); the writer applies everything queued so far in one transaction, in order,
on a worker thread with its own connection. A rollout's finishing write is queued after its
events, so a committed finished rollout always has all of its events.

A batch the store refuses (a constraint, a full disk) is rolled back whole and ends the writer:
`error` says why and `failed` is set, later writes are dropped instead of raising in every
producer, and the owner (the runner) stops and settles what it started on a fresh connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from clawsdk.store.store import Store

log = logging.getLogger(__name__)

MAX_BATCH = 2000
#: at most this many events join one queued batch (the queue's bound times this bounds memory)
TAIL_ROWS = 256
#: when little is queued, wait this long for more before committing: fewer, larger transactions
LINGER_S = 0.002


class _Flush:
    def __init__(self) -> None:
        self.done = anyio.Event()


class _Events(list):
    """A batch of event rows, (rollout_id, attempt, seq, kind, ts, duration_ms, payload JSON), as one queue
    item: recording appends to the newest one while the loop has not taken it."""

    __slots__ = ()


#: a queue item: a batch of events, a write (called with the store in the batch's transaction), a flush marker
_Item = _Events | Callable[[Store], object] | _Flush


class StoreWriter:
    """Use as ``async with StoreWriter(path) as writer``; every queued write is committed on exit."""

    def __init__(self, path: str | Path, *, buffer: int = 10_000):
        self.path = Path(path)
        self._send, self._receive = anyio.create_memory_object_stream[_Item](buffer)
        self._tg: TaskGroup | None = None
        self._store: Store | None = None
        self.committed_batches = 0
        self.committed_writes = 0
        #: the write the store refused, once it has; nothing is committed after it
        self.error: BaseException | None = None
        self.failed = anyio.Event()
        self.dropped = 0
        #: the rows of the newest queued batch of events, while the loop has not taken it
        self._tail: _Events | None = None
        #: events queued and not yet taken by the loop; recording waits above `buffer` of them, so
        #: batching events into one queue item does not loosen the bound on memory
        self.queued_rows = 0
        self._row_limit = buffer
        self._room: anyio.Event | None = None

    async def __aenter__(self) -> StoreWriter:
        self._store = await anyio.to_thread.run_sync(Store, self.path)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._loop)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        # The loop is shielded: it commits everything queued, then ends when the stream closes,
        # even when a cancellation is what ends the run.
        self._send.close()
        assert self._tg is not None
        try:
            return await self._tg.__aexit__(*exc)
        finally:
            if self._store is not None:
                self._store.close()

    async def _put(self, write: Callable[[Store], object]) -> None:
        """Queue `write`, called with the store inside the batch's transaction."""
        await self._send.send(write)
        # later events queue after this write, never into a batch before it (send() yields first:
        # another task may have queued a batch of events just before it)
        self._tail = None

    # ---- the writes: each queues the `Store` method of its name (see there), applied in order -------------

    async def upsert_run(self, run_id: str, *, status: str, agent: str | None = None, sandbox: str | None = None,
                         samples: int | None = None, config: dict | None = None) -> None:
        await self._put(lambda store: store.upsert_run(run_id, status=status, agent=agent, sandbox=sandbox,
                                                       samples=samples, config=config))

    async def set_run_status(self, run_id: str, status: str, error: str | None = None) -> None:
        await self._put(lambda store: store.set_run_status(run_id, status, error))

    async def end_run(self, run_id: str, status: str) -> None:
        await self._put(lambda store: store.end_run(run_id, status))

    async def upsert_task(self, task: Any, source: str | None = None) -> None:
        await self._put(lambda store: store.upsert_task(task, source))

    async def start_rollout(self, *, rollout_id: str, run_id: str, task_id: str, task_hash: str, sample: int,
                            attempt: int, agent: str | None, model: str | None) -> None:
        await self._put(lambda store: store.start_rollout(
            rollout_id=rollout_id, run_id=run_id, task_id=task_id, task_hash=task_hash, sample=sample,
            attempt=attempt, agent=agent, model=model))

    async def finish_rollout(self, *, rollout_id: str, attempt: int, status: str, failure_kind: str,
                             scored: bool, reward: float | None, passed: bool | None, error: str | None,
                             n_tool_calls: int, n_model_calls: int, duration_s: float,
                             verdict: dict | None = None) -> None:
        await self._put(lambda store: store.finish_rollout(
            rollout_id=rollout_id, attempt=attempt, status=status, failure_kind=failure_kind, scored=scored,
            reward=reward, passed=passed, error=error, n_tool_calls=n_tool_calls, n_model_calls=n_model_calls,
            duration_s=duration_s, verdict=verdict))

    async def record_task_error(self, *, run_id: str | None, path: str, message: str, field: str | None = None,
                                task_id: str | None = None) -> None:
        await self._put(lambda store: store.record_task_error(run_id=run_id, path=path, message=message,
                                                              field=field, task_id=task_id))

    async def record_run_control(self, *, run_id: str, source: str, actor: str, action: str, level: int | None,
                                 paused: bool, reason: str | None, detail: dict | None = None) -> None:
        await self._put(lambda store: store.record_run_control(run_id=run_id, source=source, actor=actor,
                                                               action=action, level=level, paused=paused,
                                                               reason=reason, detail=detail))

    async def events(self, rows: list[tuple]) -> None:
        # The hot path of recording. Events join the last queued batch of events while the loop has
        # not taken it (nothing else queued after it, so the order of writes holds): one list append
        # instead of a queue item per event. No scheduler round trip while the queue has room;
        # back-pressure only when it is full.
        while self.queued_rows >= self._row_limit:
            if self._room is None:
                self._room = anyio.Event()
            await self._room.wait()
        self.queued_rows += len(rows)
        tail = self._tail
        if tail is not None and len(tail) < TAIL_ROWS:
            tail.extend(rows)
            return
        batch = _Events(rows)
        self._tail = None
        try:
            self._send.send_nowait(batch)
        except anyio.WouldBlock:
            # the loop may have taken (and be committing) it by the time this returns: never extended
            await self._send.send(batch)
            self._tail = None
            return
        self._tail = batch

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed."""
        marker = _Flush()
        await self._send.send(marker)
        self._tail = None
        await marker.done.wait()

    async def _loop(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._drain()

    async def _drain(self) -> None:
        async with self._receive:
            while True:
                try:
                    first = await self._receive.receive()
                except anyio.EndOfStream:
                    return
                batch = [first]
                self._gather(batch, 0)
                if len(batch) < 64 and not isinstance(batch[-1], _Flush):
                    await anyio.sleep(LINGER_S)
                    self._gather(batch, len(batch))
                if self.error is None:
                    try:
                        await anyio.to_thread.run_sync(self._apply, batch)
                    except Exception as e:  # reported through `error`; the owner settles
                        log.error("the store at %s refused a write: %s: %s", self.path, type(e).__name__, e)
                        self.error = e
                        self.failed.set()
                if self.error is not None:
                    self.dropped += sum(not isinstance(item, _Flush) for item in batch)
                for item in batch:
                    if isinstance(item, _Flush):
                        item.done.set()

    def _gather(self, batch: list[_Item], start: int) -> None:
        """Take what is queued into `batch`, whose items from `start` on are newly taken."""
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self._receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        self.queued_rows -= sum(len(item) for item in batch[start:] if isinstance(item, _Events))
        if self._room is not None and self.queued_rows < self._row_limit:
            self._room.set()
            self._room = None
        tail = self._tail
        # once the loop has the open batch of events (the newest item, so the last it took), later
        # events start a new one: this batch goes to the worker thread as it is
        if tail is not None and any(item is tail for item in reversed(batch)):
            self._tail = None

    def _apply(self, batch: list[_Item]) -> None:
        store = self._store
        assert store is not None
        writes = [item for item in batch if not isinstance(item, _Flush)]
        if not writes:
            return
        with store.transaction():
            pending_events: list[tuple] = []
            for write in writes:
                if isinstance(write, _Events):
                    pending_events.extend(write)
                    continue
                if pending_events:
                    store.insert_events(pending_events)
                    pending_events = []
                write(store)
            if pending_events:
                store.insert_events(pending_events)
        self.committed_batches += 1
        self.committed_writes += len(writes)
