"""The watch view's reading side: read-only, incremental, on real SQLite files."""

from __future__ import annotations

import json
import sqlite3

import pytest
from clawsdk_tui import rows as rowsel
from clawsdk_tui.data import EventFollower, Rates, RunWatch, StoreReader, parse_ts
from tui_helpers import small_store, store_of

from clawsdk.store.store import Store


def test_reader_cannot_write(tmp_path):
    db = tmp_path / "store.db"
    small_store(db)
    reader = StoreReader(db)
    with pytest.raises(sqlite3.OperationalError):
        reader.conn.execute("DELETE FROM rollouts")
    assert reader.runs()[0].total == 40



def test_reader_reads_a_store_in_a_folder_that_cannot_be_written(tmp_path):
    from tests.mounts import read_only

    db = tmp_path / "archive" / "store.db"
    db.parent.mkdir()
    small_store(db)
    with read_only(db.parent):  # mode=ro alone: "unable to open database file" (SQLite makes the WAL's -shm)
        reader = StoreReader(db)
        assert reader.runs()[0].total == 40
        with pytest.raises(sqlite3.OperationalError):
            reader.conn.execute("DELETE FROM rollouts")
        reader.close()

def test_reader_refuses_what_is_not_a_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="no clawsdk store"):
        StoreReader(tmp_path / "missing.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.commit()
    with pytest.raises(ValueError, match="not a clawsdk store"):
        StoreReader(other)


def test_run_summary_counts_progress_pass_rate_and_failures(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=200, running=5)
    run = StoreReader(db).runs()[0]
    conn = sqlite3.connect(db)
    scored, passed = conn.execute(
        "SELECT SUM(scored), SUM(passed) FROM rollouts WHERE status='finished'"
    ).fetchone()
    kinds = dict(
        conn.execute(
            "SELECT failure_kind, COUNT(*) FROM rollouts WHERE status='finished' "
            "AND failure_kind != 'ok' GROUP BY failure_kind"
        )
    )
    assert (run.total, run.finished, run.running) == (200, 195, 5)
    assert (run.scored, run.passed) == (scored, passed)
    assert run.failures == kinds and sum(kinds.values()) > 0
    assert run.status == "running"
    assert run.throughput(now=parse_ts(run.first_started) + 100) == pytest.approx(195 / 100)


def test_run_watch_sees_only_what_changed(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=50, running=4)
    reader = StoreReader(db)
    clock = [0.0]
    watch = RunWatch(reader, "demo-run", clock=lambda: clock[0])
    first = watch.poll()
    assert first.full and len(first.changed) == 50
    assert watch.poll().changed == []  # nothing new

    running = [r for r in watch.rows.values() if r["status"] == "running"]
    with Store(db) as store, store.transaction():  # another connection: one finishes, one starts
        store.db.execute(
            "UPDATE rollouts SET status='finished', failure_kind='ok', scored=1, reward=1, passed=1 "
            "WHERE id = ?",
            [running[0]["id"]],
        )
        store.db.execute(
            "INSERT INTO rollouts (id, run_id, task_id, task_hash, sample, status, started_at) "
            "VALUES ('rnew', 'demo-run', 'new-task', 'h', 0, 'running', '2025-01-06T10:00:00+00:00')"
        )
    delta = watch.poll()
    assert not delta.full
    assert {r["id"] for r in delta.changed} == {running[0]["id"], "rnew"}
    assert watch.rows[running[0]["id"]]["status"] == "finished"
    assert watch.counts()["running"] == 4  # 4 - 1 finished + 1 new


def test_event_follower_reads_new_events_and_new_attempts(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=10, events_per_rollout=15, running=1)
    reader = StoreReader(db)
    rid = reader._all("SELECT id FROM rollouts WHERE status = 'running'")[0][0]
    follower = EventFollower(reader, rid)
    _, chunk, verdict = follower.poll()
    assert chunk.reset and [e["seq"] for e in chunk.events] == list(range(15)) and verdict is None
    with Store(db) as store, store.transaction():
        store.insert_events(
            [
                (
                    rid,
                    0,
                    15,
                    "tool_call",
                    "2025-01-06T10:00:00+00:00",
                    None,
                    json.dumps({"tool": "read", "args": {"path": "a.txt"}}),
                )
            ]
        )
    _, chunk, _ = follower.poll()
    assert not chunk.reset and [e["seq"] for e in chunk.events] == [15]
    assert chunk.events[0]["payload"]["args"]["path"] == "a.txt"
    with Store(db) as store, store.transaction():  # a retry: attempt 1 starts from seq 0
        store.db.execute("UPDATE rollouts SET attempt = 1 WHERE id = ?", [rid])
        store.insert_events([(rid, 1, 0, "note", "2025-01-06T10:01:00+00:00", None, "{}")])
    _, chunk, _ = follower.poll()
    assert chunk.reset and chunk.attempt == 1 and [e["seq"] for e in chunk.events] == [0]


def test_event_follower_first_load_of_a_huge_rollout_is_its_tail(tmp_path):
    db = tmp_path / "store.db"
    small_store(db, rollouts=2, events_per_rollout=1000, running=0)
    reader = StoreReader(db)
    rid = reader._all("SELECT id FROM rollouts LIMIT 1")[0][0]
    _, chunk, verdict = EventFollower(reader, rid).poll()
    assert chunk.total == 1000 and chunk.skipped == 1000 - EventFollower.FIRST_LOAD
    assert chunk.events[-1]["seq"] == 999 and verdict is not None
    _, everything, _ = EventFollower(reader, rid).poll(load_all=True)
    assert len(everything.events) == 1000 and everything.skipped == 0


def test_rates_over_a_window():
    rates = Rates(window_s=10)
    rates.add(0, 0, 0)
    rates.add(5, 10, 50)
    assert rates.rollouts_per_s == 2 and rates.tool_calls_per_s == 10
    rates.add(30, 10, 50)  # quiet since: the window slides past the burst
    assert rates.rollouts_per_s == 0


def test_filter_and_sort_rows():
    rows = [
        {
            "id": "a",
            "task_id": "t2",
            "sample": 0,
            "status": "finished",
            "scored": 1,
            "passed": 1,
            "reward": 1.0,
            "category": "x",
            "failure_kind": "ok",
            "error": None,
            "duration_s": 3.0,
        },
        {
            "id": "b",
            "task_id": "t1",
            "sample": 0,
            "status": "finished",
            "scored": 1,
            "passed": 0,
            "reward": 0.2,
            "category": "y",
            "failure_kind": "agent_timeout",
            "error": "ran out of time",
            "duration_s": 9.0,
        },
        {
            "id": "c",
            "task_id": "t3",
            "sample": 0,
            "status": "running",
            "scored": None,
            "passed": None,
            "reward": None,
            "category": "x",
            "failure_kind": None,
            "error": None,
            "duration_s": None,
            "started_at": None,
        },
    ]

    def ids(rs: list[dict]) -> list[str]:
        return [r["id"] for r in rs]

    assert ids(rowsel.select(rows)) == ["b", "a", "c"]
    assert ids(rowsel.select(rows, status="running")) == ["c"]
    assert ids(rowsel.select(rows, status="failed")) == ["b"]
    assert ids(rowsel.select(rows, category="x")) == ["a", "c"]
    assert ids(rowsel.select(rows, text="OUT OF TIME")) == ["b"]
    assert ids(rowsel.select(rows, sort="reward", reverse=True)) == ["a", "b", "c"]  # no reward stays last
    assert ids(rowsel.select(rows, sort="reward")) == ["b", "a", "c"]


def test_progress_counts_the_rollouts_planned_not_only_those_started(tmp_path):
    from clawsdk.runtime.runner import run_sync
    from clawsdk.tasks.model import Task, VerifierSpec

    # the runner records what it plans: 4 tasks x 2 samples
    db = tmp_path / "real.db"
    tasks = [Task(id=f"t{i}", instruction="Write ok into a.txt.", tools=["core"],
                  verifier=VerifierSpec(checks=[{"type": "file_exists", "path": "a.txt"}]),
                  solution=[{"tool": "write", "args": {"path": "a.txt", "content": "ok"}}]) for i in range(4)]
    run_sync(tasks, agent="oracle", sandbox="local", samples=2, run_id="planned", db=db)
    assert json.loads(sqlite3.connect(db).execute("SELECT config FROM runs").fetchone()[0])["planned"] == 8
    assert StoreReader(db).runs()[0].total == 8
    # a run still starting rollouts: 40 started of 56 planned reads 56, not 40
    synthetic = tmp_path / "store.db"
    small_store(synthetic)
    conn = sqlite3.connect(synthetic)
    conn.execute("UPDATE runs SET config = json_set(config, '$.planned', 56)")
    conn.commit()
    assert StoreReader(synthetic).runs()[0].total == 56


# task A: 4 samples, all pass; B: one fails, one unscored; C: only an unscored sample; D: still running.
# Per rollout that is 4 of 5 scored passed (80%, mean reward 0.84); per task, as Store.runs, A 1 and B 0: 50%.
PER_TASK = [
    ("A", 1.0),
    ("B", 0.2),
    ("A", 1.0),
    ("B", None),
    ("A", 1.0),
    ("C", None),
    ("A", 1.0),
    ("D", "running"),
]


def test_pass_rate_and_mean_reward_are_per_task_as_store_runs_gives_them(tmp_path):
    db = tmp_path / "store.db"
    store_of(db, PER_TASK)
    with Store(db) as store:
        expected = store.runs()[0]
    run = StoreReader(db).runs()[0]
    assert (run.scored, run.passed) == (5, 4)  # the rollouts, still counted
    assert run.pass_rate == expected["pass_rate"] == 0.5
    assert run.mean_reward == pytest.approx(expected["mean_reward"]) == pytest.approx(0.6)
    assert (run.tasks, run.tasks_scored) == (expected["tasks"], expected["tasks_scored"]) == (4, 2)


def test_run_watch_pass_rate_is_per_task_and_the_series_is_it_as_it_evolved(tmp_path):
    db = tmp_path / "store.db"
    store_of(db, PER_TASK)
    watch = RunWatch(StoreReader(db), "run")
    watch.poll()
    assert watch.pass_rate() == 0.5
    # after A passes: 1; B fails: (1 + 0) / 2; then A passes again and again, B and C end unscored: still 0.5
    assert watch.pass_rate_series() == [1.0, 0.5, 0.5, 0.5, 0.5]
    assert watch.pass_rate_series(buckets=2) == [0.5, 0.5]  # the rate at the end of each slice
    assert RunWatch(StoreReader(db), "run").pass_rate() is None  # nothing read yet
