"""Typed events: each kind round-trips from its emitter through the store to a reader with its fields; a payload
another writer gave fields (or a kind) of its own reads back whole; a damaged payload is named, not a crash; a
store recorded before events were typed (tests/fixtures/events_store, commit 1ed5a5d) exports, as SFT JSONL and
ATIF, to the very bytes it did then, and `clawsdk show` prints it as it did; the typed writer persists the rows
that the Store's own methods write."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.data.select import Selection, load_candidates
from clawsdk.store.events import (
    EVENT_KINDS,
    ErrorEvent,
    EventError,
    Foreign,
    ModelRequest,
    ModelResponse,
    Note,
    SandboxExec,
    ToolCall,
    ToolResult,
    Unreadable,
    VerifierScore,
    parse_event,
)
from clawsdk.store.recorder import Recorder
from clawsdk.store.store import Store, dumps
from clawsdk.store.writer import StoreWriter
from tests.conftest import FIXTURES
from tests.data.test_data_select_export import hello_task

STORE = FIXTURES / "events_store"

#: one event of each kind, with every field its emitters write
EVERY_KIND = [
    ModelRequest(model="m", turn=0, messages=[{"role": "user", "content": "hi"}], tools=[], params={"seed": 1}),
    ModelResponse(model="m", turn=0, message={"role": "assistant", "content": "ok"}, usage={"completion_tokens": 1},
                  finish_reason="stop", prompt_token_ids=[1, 2], completion_token_ids=[3], logprobs=[-0.5],
                  request=0, duration_ms=12.5),
    ToolCall(tool="write", args={"path": "a.txt", "content": "x"}),
    ToolResult(tool="write", call=2, is_error=None, content="", cancelled=True, structured={"n": 1},
               tool_host_start_ms=3.5),
    SandboxExec(command="ls", stage="verify", exit_code=0, stdout="a.txt", stderr="", timed_out=False,
                extra={"boot_s": 1.5}),
    VerifierScore(check="text_equals a.txt", score=0.5, detail="close"),
    ErrorEvent(error_kind="model_error", message="no", raw={"status": 500}),
    Note(event="finish", extra={"args": {"summary": "done"}}),
]


def _copy(tmp_path: Path) -> Path:
    db = tmp_path / "store.db"
    shutil.copy(STORE / "store.db", db)
    return db


def test_every_kind_round_trips_from_emitter_to_reader_with_its_fields(tmp_path):
    assert sorted(e.kind for e in EVERY_KIND) == sorted(EVENT_KINDS)
    db = tmp_path / "s.db"

    async def main():
        async with StoreWriter(db) as writer:
            rec = Recorder(writer, "r", 0)
            for e in EVERY_KIND:
                await rec.record(e)

    anyio.run(main)
    with Store(db, readonly=True) as store:
        back = store.events("r", 0)
        raw = [r["payload"] for r in store.query("SELECT payload FROM events ORDER BY seq")]
    assert [type(e) for e in back] == [type(e) for e in EVERY_KIND]
    for seq, (sent, got) in enumerate(zip(EVERY_KIND, back, strict=True)):
        assert got.seq == seq and got.ts and got.payload() == sent.payload()
        assert got == type(sent).from_payload(sent.payload(), seq=seq, ts=got.ts, duration_ms=got.duration_ms)
    assert back[1].duration_ms == 12.5 and back[1].completion_token_ids == [3] and back[1].request == 0
    assert back[3].is_error is None and back[3].cancelled is True and back[3].call == 2
    assert back[4].extra == {"boot_s": 1.5} and back[6].error_kind == "model_error"
    # the stored JSON is the shape it always was: an error's kind is `kind`, a note's fields are top-level,
    # a None left out (but a cancelled result's is_error, which is null on purpose)
    assert json.loads(raw[6]) == {"kind": "model_error", "message": "no", "raw": {"status": 500}}
    assert json.loads(raw[7]) == {"event": "finish", "args": {"summary": "done"}}
    assert json.loads(raw[2]) == {"tool": "write", "args": {"path": "a.txt", "content": "x"}}
    assert json.loads(raw[3])["is_error"] is None


def test_the_form_of_earlier_releases_records_the_same_payload(tmp_path):
    db = tmp_path / "s.db"
    payload = {"tool": "read", "x_vendor": 1, "args": {"path": "a"}}

    async def main():
        async with StoreWriter(db) as writer:
            rec = Recorder(writer, "r", 0)
            await rec.record("tool_call", payload)
            with pytest.raises(ValueError, match="unknown event kind 'span'"):
                await rec.record("span", {})
            with pytest.raises(TypeError, match="not dict"):
                await rec.record({"kind": "note"})  # type: ignore[arg-type]

    anyio.run(main)
    with Store(db, readonly=True) as store:
        (row,) = store.query("SELECT payload FROM events")
    assert row["payload"] == dumps(payload)  # its fields in its order


def test_a_foreign_payload_and_a_foreign_kind_read_back_without_loss(tmp_path):
    with Store(_copy(tmp_path), readonly=True) as store:
        rows = store.query("SELECT * FROM events WHERE rollout_id = 'proxy-r0' ORDER BY seq")
        events = store.events("proxy-r0")
    for row, e in zip(rows, events, strict=True):
        assert dumps(e.payload()) == row["payload"]  # every field, in its order, byte for byte
    call = next(e for e in events if isinstance(e, ToolCall))
    assert call.tool == "write" and call.extra == {"x_vendor": [1, 2]}
    answer = next(e for e in events if isinstance(e, ModelResponse))
    assert answer.request == 0 and answer.extra == {"id": "chatcmpl-1"}
    span = next(e for e in events if e.kind == "span")
    assert isinstance(span, Foreign) and span.extra == {"name": "foreign kind", "depth": 1}
    note = next(e for e in events if isinstance(e, Note))
    assert note.event is None and note.extra == {"vendor": "acme", "trace": {"span": "abc"}}


def _damage(db: Path, seq: int, payload: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET payload = ? WHERE rollout_id = 'proxy-r0' AND seq = ?", [payload, seq])


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]"])
def test_a_damaged_payload_is_named_by_rollout_and_seq_and_shown_as_such(tmp_path, payload):
    db = _copy(tmp_path)
    _damage(db, 2, payload)
    with Store(db, readonly=True) as store:
        events = store.events("proxy-r0")
        assert isinstance(events[2], Unreadable) and events[2].raw == payload and events[2].kind == "tool_call"
        assert isinstance(events[3], ToolResult)  # the others read as ever
        with pytest.raises(EventError, match=r"rollout proxy-r0 attempt 0: the tool_call event at seq 2"):
            store.events("proxy-r0", strict=True)
        # an export leaves that rollout out, saying why; the others stay
        cands = load_candidates(store, Selection(min_reward=0))
    (dropped,) = [c for c in cands if c.rollout["id"] == "proxy-r0"]
    assert dropped.trajectory is None and dropped.reason.startswith("unreadable: rollout proxy-r0")
    assert sum(c.trajectory is not None for c in cands) >= 3
    shown = CliRunner().invoke(cli, ["show", "--db", str(db), "proxy-r0"])
    assert shown.exit_code == 0, shown.output
    assert "unreadable" in shown.output and "wrote 11 bytes" in shown.output


def test_parse_event_keeps_the_rows_stamps():
    e = parse_event({"seq": 4, "kind": "verifier", "ts": "t", "duration_ms": 2.0,
                     "payload": '{"check": "c", "score": 1.0}'})
    assert isinstance(e, VerifierScore) and (e.seq, e.ts, e.duration_ms, e.check, e.score) == (4, "t", 2.0, "c", 1.0)
    assert e["kind"] == "verifier" and e["payload"] == {"check": "c", "score": 1.0}  # the row shape of before


def test_a_store_recorded_before_typed_events_exports_to_the_same_bytes(tmp_path):
    db = _copy(tmp_path)
    runner = CliRunner()
    golden = STORE / "golden"
    for fmt in ("jsonl", "atif"):
        r = runner.invoke(cli, ["data", "export", "--db", str(db), "--name", f"g-{fmt}", "--format", fmt,
                                "-o", str(tmp_path), "--min-reward", "0"])
        assert r.exit_code == 0, r.output
    made = sorted(tmp_path.glob("g-*/data.jsonl")) + sorted(tmp_path.glob("g-*/atif/*.json"))
    names = sorted(f.relative_to(tmp_path).as_posix().replace("/", "__") for f in made)
    assert names == sorted(p.name for p in golden.iterdir() if p.name != "show.json")
    for f in made:
        assert f.read_bytes() == (golden / f.relative_to(tmp_path).as_posix().replace("/", "__")).read_bytes(), f


def test_show_prints_a_store_recorded_before_typed_events_as_it_did(tmp_path):
    db = _copy(tmp_path)
    shows = json.loads((STORE / "golden" / "show.json").read_text())
    runner = CliRunner()
    for key, expected in shows.items():
        rid, *flags = key.split(" ")
        out = runner.invoke(cli, ["show", "--db", str(db), *flags, rid]).output
        if flags:  # --json: the same document; an event's `id` (the table's rowid) is no longer in it
            want = json.loads(expected)
            for e in want["events"]:
                del e["id"]
            assert json.loads(out) == want
        else:
            assert out == expected


def _tables(db: Path) -> dict[str, list[tuple]]:
    """Every row of the tables writes touch, without the columns that hold the time of writing."""
    stamps = {"created_at", "updated_at", "started_at", "finished_at", "ts"}
    out = {}
    with sqlite3.connect(db) as conn:
        for table in ("runs", "tasks", "rollouts", "verdicts", "verdict_scores", "task_errors", "run_control",
                      "events"):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] not in stamps]
            out[table] = conn.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY rowid").fetchall()
    return out


def test_the_typed_writer_persists_the_rows_the_store_methods_write(tmp_path):
    task = hello_task("hello-a")
    writes = [  # (method, args, kwargs): what the runner, serve and the proxy write, in their order
        ("upsert_run", ("run",), {"status": "running", "agent": "a", "sandbox": "local", "samples": 2,
                                  "config": {"k": 1}}),
        ("upsert_task", (task,), {}),
        ("record_task_error", (), {"run_id": "run", "path": "bad/", "field": "id", "task_id": None,
                                   "message": "no id"}),
        ("start_rollout", (), {"rollout_id": "r0", "run_id": "run", "task_id": task.id, "task_hash": task.hash,
                               "sample": 0, "attempt": 0, "agent": "a", "model": None}),
        ("record_run_control", (), {"run_id": "run", "source": "controller", "actor": "auto", "action": "raise",
                                    "level": 4, "paused": False, "reason": "throughput", "detail": {"x": 1}}),
        ("finish_rollout", (), {"rollout_id": "r0", "attempt": 0, "status": "finished", "failure_kind": "ok",
                                "scored": True, "reward": 1.0, "passed": True, "error": None, "n_tool_calls": 1,
                                "n_model_calls": 0, "duration_s": 0.5,
                                "verdict": {"verifier": "checks", "score": 1.0, "passed": True,
                                            "subscores": [{"name": "c", "score": 1.0}]}}),
        ("set_run_status", ("run", "running"), {}),
        ("end_run", ("run", "finished"), {}),
    ]
    typed, direct = tmp_path / "typed.db", tmp_path / "direct.db"

    async def main():
        async with StoreWriter(typed) as writer:
            rec = Recorder(writer, "r0", 0)
            for i, (method, args, kwargs) in enumerate(writes):
                await getattr(writer, method)(*args, **kwargs)
                await rec.record(ToolCall(tool="ls", args={"i": i}))

    anyio.run(main)
    with Store(direct) as store:
        for i, (method, args, kwargs) in enumerate(writes):
            with store.transaction():
                getattr(store, method)(*args, **kwargs)
                store.insert_events([("r0", 0, i, "tool_call", "t", None, dumps({"tool": "ls", "args": {"i": i}}))])
    got, want = _tables(typed), _tables(direct)
    assert got == want
    assert got["runs"][0][1] == "finished" and len(got["events"]) == len(writes) and got["task_errors"]
