"""Chaos: a 300-rollout bwrap run SIGKILLed at random moments, again and again, then resumed to the end.

After the final run, exactly the planned rollouts are in the store, each finished once, the file is
intact, and nothing of the killed runners is left: no sandbox folder, no tmpfs mount, no process.
"""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import count_finished, make_task
from tests.sandbox.sandbox_backends import skip_unless_available

CLI = [sys.executable, "-c", "from clawsdk.cli import main; main()"]
TASKS, SAMPLES, KILLS = 60, 5, 10


def leftovers(ws: Path) -> dict[str, list[str]]:
    """What the runs left under the workspace root: folders, mounts, and processes that live in it."""
    folders = sorted(str(p) for p in ws.glob("sb-*"))
    with open("/proc/self/mountinfo") as f:
        mounts = sorted(p for p in (line.split()[4].replace("\\040", " ") for line in f) if p.startswith(str(ws)))
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue  # gone, or a kernel thread
        if str(ws) in cmdline or cwd.startswith(str(ws)):
            procs.append(f"{pid}: {cmdline[:200]}")
    return {"folders": folders, "mounts": mounts, "processes": procs}


def until(done, proc, seconds: float, db: Path, most: int) -> None:
    """Wait until done(), `seconds` pass, the run ends, or `most` rollouts have finished."""
    deadline = time.monotonic() + seconds
    while not done() and proc.poll() is None and time.monotonic() < deadline and count_finished(db) < most:
        time.sleep(0.01)


@pytest.mark.slow
def test_repeated_sigkill_of_a_bwrap_run_then_resume_ends_every_rollout_once_and_leaves_nothing(tmp_path):
    skip_unless_available("bwrap")
    rng = random.Random(18)
    tasks = tmp_path / "tasks"
    for i in range(TASKS):
        make_task(tasks, f"c{i:03d}", steps=[
            {"tool": "exec", "args": {"command": f"echo {i} > n.txt"}},
            {"tool": "write", "args": {"path": "done.txt", "content": "done"}},
        ])
    db, ws = tmp_path / "chaos.db", tmp_path / "ws"
    env = dict(os.environ, CLAWSDK_SANDBOX_ROOT=str(ws))
    cmd = CLI + ["run", str(tasks), "--samples", str(SAMPLES), "--concurrency", "12", "--run-id", "chaos",
                 "--sandbox", "bwrap", "--db", str(db), "--json"]
    progress = []
    for k in range(KILLS):
        before = count_finished(db)
        # however fast the machine, an invocation may finish at most its share of what is left, so that
        # every kill lands in a run that is still going
        most = before + max(1, (TASKS * SAMPLES - before) // (2 * (KILLS - k)))
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if k % 3 == 2:  # some kills land in start-up: the sweep, the plan, the first sandboxes
            until(lambda: False, proc, rng.uniform(0.3, 2.5), db, most)
        else:  # the others mid-run, at a random moment after the first rollout of this invocation finished
            until(lambda before=before: count_finished(db) > before, proc, 120, db, most)
            until(lambda: False, proc, rng.uniform(0.0, 1.5), db, most)
        assert proc.poll() is None, f"the run ended before kill {k + 1}; kill sooner"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        progress.append(count_finished(db))
    assert progress[-1] < TASKS * SAMPLES, "the run finished before the last kill; kill sooner"
    final = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert final.returncode == 0, final.stderr
    summary = json.loads(final.stdout)
    assert summary["total"]["rollouts"] == TASKS * SAMPLES
    assert summary["total"]["passed"] == TASKS * SAMPLES

    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    planned = {(f"c{i:03d}", s) for i in range(TASKS) for s in range(SAMPLES)}
    got = con.execute("SELECT task_id, sample, status FROM rollouts WHERE run_id = 'chaos'").fetchall()
    assert len(got) == len(planned) and {(t, s) for t, s, _ in got} == planned  # none lost, none doubled
    assert {status for _, _, status in got} == {"finished"}
    assert con.execute("SELECT status FROM runs WHERE id = 'chaos'").fetchone()[0] == "finished"
    # one verdict per rollout for its final attempt, events complete and in order
    rows = con.execute("SELECT id, attempt, n_tool_calls FROM rollouts WHERE run_id = 'chaos'").fetchall()
    for rid, attempt, n_calls in rows:
        assert con.execute("SELECT COUNT(*) FROM verdicts WHERE rollout_id = ? AND attempt = ?",
                           [rid, attempt]).fetchone()[0] == 1
        seqs = [r[0] for r in con.execute("SELECT seq FROM events WHERE rollout_id = ? AND attempt = ? "
                                          "ORDER BY seq", [rid, attempt])]
        assert seqs == list(range(len(seqs))) and n_calls == 2
    attempts = sum(a for _, a, _ in rows)
    con.close()
    left = leftovers(ws)
    counts = {name: len(found) for name, found in left.items()}
    print(f"chaos: {KILLS} kills, finished after each: {progress}; final run to {TASKS * SAMPLES}; "
          f"{attempts} re-attempts; leftovers {counts}")
    assert counts == {"folders": 0, "mounts": 0, "processes": 0}, left
