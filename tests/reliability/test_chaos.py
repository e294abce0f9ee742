"""Chaos: a 500-rollout run SIGKILLed at random moments, again and again, then resumed to the end."""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import count_finished, make_task

CLI = [sys.executable, "-c", "from clawsdk.cli import main; main()"]
TASKS, SAMPLES, KILLS = 100, 5, 6


@pytest.mark.slow
def test_repeated_sigkill_then_resume_ends_every_rollout_exactly_once(tmp_path):
    rng = random.Random(12)
    tasks = tmp_path / "tasks"
    for i in range(TASKS):
        make_task(tasks, f"c{i:03d}", steps=[
            {"tool": "exec", "args": {"command": f"echo {i} > n.txt"}},
            {"tool": "write", "args": {"path": "done.txt", "content": "done"}},
        ])
    db, ws = tmp_path / "chaos.db", tmp_path / "ws"
    env = dict(os.environ, CLAWSDK_SANDBOX_ROOT=str(ws))
    cmd = CLI + ["run", str(tasks), "--samples", str(SAMPLES), "--concurrency", "16", "--run-id", "chaos",
                 "--db", str(db), "--json"]
    progress = []
    for _ in range(KILLS):
        before = count_finished(db)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while count_finished(db) == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # wait for the run to be under way, then kill it at a random moment
        time.sleep(rng.uniform(0.0, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        progress.append(count_finished(db))
    assert progress[-1] < TASKS * SAMPLES, "the run finished before the last kill; kill sooner"
    assert len(set(progress)) == KILLS, f"some kills came before any progress: {progress}"
    final = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert final.returncode == 0, final.stderr
    summary = json.loads(final.stdout)
    assert summary["total"]["rollouts"] == TASKS * SAMPLES
    assert summary["total"]["passed"] == TASKS * SAMPLES

    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT COUNT(*) FROM rollouts WHERE run_id='chaos' AND status='finished'").fetchone()[0] \
        == TASKS * SAMPLES
    # one verdict per rollout for its final attempt, events complete and in order
    rows = con.execute("SELECT id, attempt, n_tool_calls FROM rollouts WHERE run_id='chaos'").fetchall()
    for rid, attempt, n_calls in rows:
        assert con.execute("SELECT COUNT(*) FROM verdicts WHERE rollout_id=? AND attempt=?",
                           [rid, attempt]).fetchone()[0] == 1
        seqs = [r[0] for r in con.execute("SELECT seq FROM events WHERE rollout_id=? AND attempt=? ORDER BY seq",
                                          [rid, attempt])]
        assert seqs == list(range(len(seqs))) and n_calls == 2
    con.close()
    assert list(ws.rglob("sb-*")) == [], "a killed run's workspace was never swept"
    print(f"chaos: {KILLS} kills, finished after each: {progress}, then resumed to {TASKS * SAMPLES}")
