import sqlite3

import anyio
import pytest
import sqlite_utils

from clawsdk.errors import StoreError
from clawsdk.store import migrations
from clawsdk.store.store import Store
from clawsdk.store.writer import StoreWriter
from tests.mounts import read_only


def test_migrates_from_blank_and_records_each_migration(db):
    with Store(db) as store:
        names = [r["name"] for r in store.query("SELECT name FROM _migrations")]
        assert names == [name for name, _ in migrations.MIGRATIONS]
        assert {"runs", "tasks", "rollouts", "events", "verdicts", "verdict_scores", "task_errors"} <= set(
            store.db.table_names())
        assert store.query("PRAGMA journal_mode")[0]["journal_mode"] == "wal"
    with Store(db) as store:  # reopening applies nothing twice
        assert len(store.query("SELECT * FROM _migrations")) == len(migrations.MIGRATIONS)


def test_a_failing_migration_leaves_the_old_schema(db, monkeypatch):
    Store(db).close()

    def broken(d):
        d.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS + [("m999_broken", broken)])
    with pytest.raises(RuntimeError):
        Store(db)
    con = sqlite3.connect(db)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "half_done" not in tables
    assert "m999_broken" not in {r[0] for r in con.execute("SELECT name FROM _migrations")}


def test_a_store_from_a_newer_clawsdk_is_refused(db):
    Store(db).close()
    sqlite_utils.Database(db).execute("INSERT INTO _migrations VALUES ('m500_future', 'x')")
    with pytest.raises(StoreError, match=r"newer clawsdk .*; upgrade clawsdk"):
        Store(db)


def test_a_sqlite_database_that_is_not_a_store_is_refused_and_left_as_it_was(tmp_path):
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.commit()
    for readonly in (False, True):
        with pytest.raises(StoreError, match=r"other.db: not a clawsdk store .*\(notes\); give --db"):
            Store(other, readonly=readonly, wait_s=0)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["notes"]
    con.close()


def test_writer_commits_everything_queued_even_when_cancelled(db):
    Store(db).close()

    async def main():
        with anyio.CancelScope() as scope:
            async with StoreWriter(db) as w:
                await w.upsert_run(run_id="r", status="running")
                for i in range(5000):
                    await w.events([("ro", 0, i, "note", "ts", None, "{}")])
                scope.cancel()
                await anyio.sleep(1)  # cancelled here; the queued writes must still land
        return w

    w = anyio.run(main)
    with Store(db) as store:
        assert store.query("SELECT COUNT(*) n FROM events")[0]["n"] == 5000
    assert w.committed_batches < 5000 / 10, "writes were not batched"


def test_readonly_store_needs_an_existing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no clawsdk store"):
        Store(tmp_path / "nope.db", readonly=True)


def test_a_rollout_streams_its_events_and_reads_them_back_in_order(db):
    """Events go to the writer as they happen (nothing held per rollout); a verifier that grades
    the trajectory gets all of them back, in order, this attempt's only."""
    from clawsdk.store.recorder import Recorder

    async def main():
        async with StoreWriter(db) as writer:
            other = Recorder(writer, "r1", 0)
            await other.record("note", {"i": -1})
            rec = Recorder(writer, "r1", 1)
            for i in range(5000):
                await rec.record("tool_call" if i % 2 else "tool_result", {"i": i})
            assert rec.kept == []
            events = await rec.events_so_far()
        assert [e["payload"]["i"] for e in events] == list(range(5000))
        assert [e["seq"] for e in events] == list(range(5000))
        assert events[1]["kind"] == "tool_call" and rec.n_tool_calls == 2500

    anyio.run(main)


def test_a_run_shared_by_processes_ends_when_the_last_rollout_of_it_has(db):
    """end_run leaves a run running while a rollout of it still runs (another process on the same run id), and
    a rollout claimed in a run some process had ended marks it running again."""
    with Store(db) as s:
        s.upsert_run("shared", status="running")
        s.upsert_task(task=_task())
        claim = dict(run_id="shared", task_id="t", task_hash=_task().hash, agent="a", model=None,
                     make_id=lambda n: f"r{n}")
        s.claim_rollout(**claim)
        assert s.end_run("shared", "finished") is False and s.run("shared")["status"] == "running"
        s.finish_rollout(rollout_id="r0", attempt=0, status="finished", failure_kind="ok", scored=False,
                         reward=None, passed=None, error=None, n_tool_calls=0, n_model_calls=0, duration_s=1)
        assert s.end_run("shared", "finished") is True and s.run("shared")["status"] == "finished"
        s.claim_rollout(**claim)
        assert s.run("shared")["status"] == "running"


def _task():
    from clawsdk.tasks.model import Task

    return Task(id="t", instruction="x")



def test_a_store_in_a_folder_it_cannot_write_is_read(tmp_path):
    from click.testing import CliRunner

    from clawsdk.cli import cli

    path = tmp_path / "archive" / "runs.db"
    with Store(path) as s, s.transaction():
        s.upsert_run("archived", status="finished", agent="oracle")
    with read_only(path.parent):  # SQLite cannot make the WAL's -shm file there: "unable to open database file"
        with Store(path, readonly=True) as s:
            assert [r["id"] for r in s.runs()] == ["archived"]
        out = CliRunner().invoke(cli, ["runs", "--db", str(path)])
    assert out.exit_code == 0 and "archived" in out.output, out.output


def test_a_store_copied_with_its_write_ahead_log_into_such_a_folder_is_refused_not_read_short(tmp_path):
    import shutil
    import sqlite3

    path = tmp_path / "live" / "runs.db"
    with Store(path) as s, s.transaction():
        s.upsert_run("first", status="finished")
    keep = sqlite3.connect(path)  # a reader keeps the log: the next commit stays in runs.db-wal
    keep.execute("SELECT count(*) FROM runs").fetchall()
    with Store(path) as s, s.transaction():
        s.upsert_run("second", status="finished")
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("runs.db", "runs.db-wal"):
        shutil.copyfile(path.parent / name, copy / name)
    keep.close()
    with read_only(copy), pytest.raises(StoreError, match=r"write-ahead log .*copy both to a writable folder"):
        Store(copy / "runs.db", readonly=True)


def test_processes_creating_one_store_at_once_all_open_it(tmp_path):
    """Two `serve` or `proxy` processes on one new store: one failed at start, with "database is locked" (the
    switch to WAL does not wait for the lock) or a UNIQUE constraint on _migrations (both applied a migration)."""
    import subprocess
    import sys
    import time

    child = ("import os, sys, time\n"
             "from clawsdk.store.store import Store\n"
             "while not os.path.exists(sys.argv[2]): time.sleep(0.001)\n"
             "Store(sys.argv[1]).close()\n")
    for round_ in range(6):
        path, go = tmp_path / f"s{round_}.db", tmp_path / f"go{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", child, str(path), str(go)], stderr=subprocess.PIPE,
                                  text=True) for _ in range(4)]
        time.sleep(0.5)  # all of them waiting at the start line
        go.touch()
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, errors
        with sqlite3.connect(path) as c:
            names = [r[0] for r in c.execute("SELECT name FROM _migrations")]
        assert len(names) == len(set(names)) == len(migrations.MIGRATIONS)
