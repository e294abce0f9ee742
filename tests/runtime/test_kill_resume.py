"""Killing a run at any moment loses at most the rollouts in flight; the same run id finishes the rest."""

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, count_finished

CLI = [sys.executable, "-c", "from clawsdk.cli import main; main()"]


def start_run(db: Path, sandbox_root: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, CLAWSDK_SANDBOX_ROOT=str(sandbox_root))
    tasks = db.parent / "tasks"
    if not tasks.exists():
        shutil.copytree(EXAMPLES, tasks)
    return subprocess.Popen(
        CLI + ["run", str(tasks), "--agent", "oracle", "--samples", "3", "--concurrency", "8",
               "--run-id", "kill-me", "--db", str(db), "--json", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def check_store(db: Path, expected: int) -> None:
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = con.execute("SELECT id, status, failure_kind, attempt, n_tool_calls FROM rollouts "
                       "WHERE run_id = 'kill-me'").fetchall()
    assert len(rows) == expected, f"{len(rows)} rollouts, expected {expected}"
    dupes = con.execute("SELECT task_id, sample, COUNT(*) c FROM rollouts GROUP BY run_id, task_id, sample "
                        "HAVING c > 1").fetchall()
    assert dupes == []
    for rid, status, kind, attempt, n_calls in rows:
        assert status == "finished" and kind == "ok", (rid, status, kind)
        seqs = [r[0] for r in con.execute("SELECT seq FROM events WHERE rollout_id = ? AND attempt = ? ORDER BY seq",
                                          [rid, attempt])]
        assert seqs == list(range(len(seqs))) and len(seqs) >= 2 * n_calls
    con.close()


@pytest.mark.slow
def test_sigkill_halfway_then_resume_finishes_without_duplicates(tmp_path):
    db = tmp_path / "store.db"
    proc = start_run(db, tmp_path / "ws")
    total = 3 * len(list((tmp_path / "tasks").rglob("task.yaml")))
    wait_for(lambda: count_finished(db) >= total // 3 or proc.poll() is not None)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = count_finished(db)
    assert done_before < total, "the run finished before it could be killed; make the workload larger"
    # the report of the killed run counts every sample not finished, also of tasks that never started
    from clawsdk.bench.report import build_report
    from clawsdk.bench.results import load_run
    from clawsdk.store.store import Store

    with Store(db) as store:
        report = build_report(load_run(store, "kill-me"), n_boot=10)
    assert report["status"] == "partial" and report["overall"]["tasks"] == total // 3
    assert report["missing_samples"] == total - done_before

    rerun = start_run(db, tmp_path / "ws")
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    check_store(db, total)
    import json

    summary = json.loads(out)
    assert summary["resumed_skipped"] == done_before
    assert summary["total"]["passed"] == total


@pytest.mark.slow
def test_sigterm_cancels_cleanly_and_leaves_no_sandbox(tmp_path):
    db = tmp_path / "store.db"
    ws = tmp_path / "ws"
    proc = start_run(db, ws)
    wait_for(lambda: count_finished(db) >= 3 or proc.poll() is not None)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs WHERE id = 'kill-me'").fetchone()[0] == "interrupted"
    statuses = {r[0] for r in con.execute("SELECT status FROM rollouts WHERE run_id = 'kill-me'")}
    assert "running" not in statuses and statuses <= {"finished", "cancelled"}, statuses
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    assert [p for p in ws.rglob("sb-*")] == [], "a sandbox folder was left behind"
    rerun = start_run(db, ws)
    rerun.communicate(timeout=300)
    assert rerun.returncode == 0
    check_store(db, 3 * len(list((tmp_path / "tasks").rglob("task.yaml"))))
