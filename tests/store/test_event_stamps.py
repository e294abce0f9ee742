"""Event timestamps and payloads as stored: ISO 8601 UTC with microseconds, compact JSON."""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import partial

import anyio
import anyio.lowlevel

from clawsdk.store import store as store_module
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store, dumps, now
from clawsdk.store.writer import StoreWriter

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")


def test_now_is_the_datetime_isoformat_text_across_seconds(monkeypatch):
    # 2026-03-01 00:00:00 UTC minus a microsecond, then the next second, then the next day
    base = int(dt.datetime(2026, 3, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000_000
    for ns in (base - 1_000, base, base + 7_000, base + 86_400 * 1_000_000_000 + 999_999_999, base - 1_000):
        monkeypatch.setattr(store_module.time, "time_ns", lambda ns=ns: ns)
        expected = dt.datetime.fromtimestamp(ns // 1000 / 1e6, dt.UTC)
        assert now() == expected.isoformat(timespec="microseconds")
    monkeypatch.undo()
    before = dt.datetime.now(dt.UTC)
    stamp = now()
    assert ISO.fullmatch(stamp) and before <= dt.datetime.fromisoformat(stamp) <= dt.datetime.now(dt.UTC)


def test_dumps_is_compact_unicode_and_stringifies_the_rest():
    value = {"path": "notes/é.txt", "n": [1, 2.5, None], "when": dt.date(2026, 3, 1)}
    assert dumps(value) == '{"path":"notes/é.txt","n":[1,2.5,null],"when":"2026-03-01"}'
    assert dumps("plain") == '"plain"'


def test_recorded_events_keep_their_stamps_and_payloads(tmp_path):
    db = tmp_path / "s.db"
    payload = {"tool": "write", "args": {"path": "a.txt", "content": "é\n"}}

    async def main():
        async with StoreWriter(db) as writer:
            rec = Recorder(writer, "r1", 0)
            for _ in range(3):
                await rec.record("tool_call", payload)

    before = dt.datetime.now(dt.UTC)
    anyio.run(main)
    with Store(db, readonly=True) as store:
        rows = store.query("SELECT seq, ts, payload FROM events WHERE rollout_id = 'r1' ORDER BY seq")
    assert [r["seq"] for r in rows] == [0, 1, 2]
    stamps = [dt.datetime.fromisoformat(r["ts"]) for r in rows if ISO.fullmatch(r["ts"])]
    assert len(stamps) == 3 and before <= stamps[0] <= stamps[1] <= stamps[2]
    assert all(json.loads(r["payload"]) == payload for r in rows)


def test_concurrent_rollouts_lose_no_event_through_a_small_queue(tmp_path):
    # many rollouts put and record at once through a queue that is often full: every event lands
    db = tmp_path / "s.db"
    n_rollouts, n_events = 30, 120

    async def rollout(writer: StoreWriter, i: int) -> None:
        rid = f"r{i}"
        await writer.start_rollout(rollout_id=rid, run_id="run", task_id="t", task_hash="h", sample=i,
                                   attempt=0, agent=None, model=None)
        rec = Recorder(writer, rid, 0)
        for k in range(n_events):
            await rec.record("note", {"k": k})
            if k % 7 == i % 7:
                await anyio.lowlevel.checkpoint()
            if k % 50 == 0:
                await writer.set_run_status(run_id="run", status="running")
        await writer.flush()

    async def main():
        async with StoreWriter(db, buffer=4) as writer:
            await writer.upsert_run(run_id="run", status="running")
            async with anyio.create_task_group() as tg:
                for i in range(n_rollouts):
                    tg.start_soon(rollout, writer, i)
        assert writer.error is None, writer.error

    anyio.run(main)
    with Store(db, readonly=True) as store:
        rows = store.query("SELECT rollout_id, group_concat(seq) AS seqs FROM "
                           "(SELECT rollout_id, seq FROM events ORDER BY rollout_id, seq) GROUP BY rollout_id")
    assert {r["rollout_id"]: r["seqs"] for r in rows} == {
        f"r{i}": ",".join(map(str, range(n_events))) for i in range(n_rollouts)}


def test_events_recorded_while_another_write_is_queued_are_all_committed(tmp_path):
    # one task queues a write while another records: the batch of events that went just before
    # that write is committed with it, and later events must not join that batch any more
    db = tmp_path / "s.db"

    def row(seq: int) -> tuple:
        return ("r1", 0, seq, "note", now(), None, "{}")

    async def recorder(writer: StoreWriter) -> None:
        await writer.events([row(0)])
        await anyio.sleep(0.5)  # the batch with event 0 is committed meanwhile
        await writer.events([row(1)])
        await writer.events([row(2)])
        await writer.flush()

    async def main():
        async with StoreWriter(db) as writer:
            # keeps the loop busy committing, so the write and event 0 queue up together behind it
            await writer.events([("big", 0, i, "note", now(), None, "{}") for i in range(20_000)])
            await anyio.sleep(0.01)
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(writer.upsert_run, run_id="run", status="running"))
                tg.start_soon(recorder, writer)

    anyio.run(main)
    with Store(db, readonly=True) as store:
        assert [r["seq"] for r in store.query("SELECT seq FROM events WHERE rollout_id = 'r1' ORDER BY seq")] == [0, 1, 2]


def test_a_recorder_that_never_yields_is_held_to_the_queue_bound(tmp_path):
    # batching events into one queue item must not let a tight producer queue more than `buffer`
    db = tmp_path / "s.db"
    peak = 0

    async def main():
        nonlocal peak
        async with StoreWriter(db, buffer=500) as writer:
            rec = Recorder(writer, "r1", 0)
            for k in range(5_000):
                await rec.record("note", {"k": k})
                peak = max(peak, writer.queued_rows)
            await writer.flush()
            assert writer.queued_rows == 0

    anyio.run(main)
    assert 0 < peak <= 500
    with Store(db, readonly=True) as store:
        assert store.query("SELECT COUNT(*) n FROM events")[0]["n"] == 5_000
