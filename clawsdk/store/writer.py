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


class StoreWriter:
    """Use as ``async with StoreWriter(path) as writer``; every queued write is committed on exit."""

    def __init__(self, path: str | Path, *, buffer: int = 10_000):
        self.path = Path(path)
        self._send, self._receive = anyio.create_memory_object_stream[Any](buffer)
        self._tg: TaskGroup | None = None
        self._store: Store | None = None
        self.committed_batches = 0
        self.committed_writes = 0
        #: the write the store refused, once it has; nothing is committed after it
        self.error: BaseException | None = None
        self.failed = anyio.Event()
        self.dropped = 0
        #: the rows of the newest queued batch of events, while the loop has not taken it
        self._tail: list[tuple] | None = None
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

    async def put(self, method: str, **kwargs: Any) -> None:
        """Queue a call of ``Store.<method>(**kwargs)``."""
        await self._send.send((method, kwargs))
        # later events queue after this write, never into a batch before it (send() yields first:
        # another task may have queued a batch of events just before it)
        self._tail = None

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
        batch = list(rows)
        self._tail = None
        try:
            self._send.send_nowait(("insert_events", {"rows": batch}))
        except anyio.WouldBlock:
            # the loop may have taken (and be committing) it by the time this returns: never extended
            await self._send.send(("insert_events", {"rows": batch}))
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

    def _gather(self, batch: list[Any], start: int) -> None:
        """Take what is queued into `batch`, whose items from `start` on are newly taken."""
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self._receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        self.queued_rows -= sum(len(item[1]["rows"]) for item in batch[start:]
                                if not isinstance(item, _Flush) and item[0] == "insert_events")
        if self._room is not None and self.queued_rows < self._row_limit:
            self._room.set()
            self._room = None
        tail = self._tail
        # once the loop has the open batch of events (the newest item, so the last it took), later
        # events start a new one: this batch goes to the worker thread as it is
        if tail is not None and any(not isinstance(item, _Flush) and item[1].get("rows") is tail
                                    for item in reversed(batch)):
            self._tail = None

    def _apply(self, batch: list[Any]) -> None:
        store = self._store
        assert store is not None
        writes = [item for item in batch if not isinstance(item, _Flush)]
        if not writes:
            return
        with store.transaction():
            pending_events: list[tuple] = []
            for method, kwargs in writes:
                if method == "insert_events":
                    pending_events.extend(kwargs["rows"])
                    continue
                if pending_events:
                    store.insert_events(pending_events)
                    pending_events = []
                getattr(store, method)(**kwargs)
            if pending_events:
                store.insert_events(pending_events)
        self.committed_batches += 1
        self.committed_writes += len(writes)
