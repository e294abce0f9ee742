"""`clawsdk run --executor ray` as a user runs it: its own local cluster, Ctrl-C, nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import make_task

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

CLI = [sys.executable, "-c", "from clawsdk.cli import main; main()"]


def session_processes(sid: int) -> list[str]:
    out = subprocess.run(["ps", "-s", str(sid), "-o", "pid=,comm="], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def store_has(db: Path, sql: str) -> bool:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return bool(con.execute(sql).fetchone())
        finally:
            con.close()
    except sqlite3.OperationalError:
        return False


def test_ctrl_c_cancels_the_remote_rollout_and_leaves_no_process(tmp_path):
    make_task(tmp_path, "tiny", steps=[])
    (tmp_path / "script.yaml").write_text("- tool: exec\n  args: {command: 'sleep 120'}\n")
    db = tmp_path / "store.db"
    proc = subprocess.Popen(
        CLI + ["run", "tiny", "--executor", "ray", "--executor-opt", "num_cpus=1", "--agent", "scripted",
               "--agent-opt", "script=script.yaml", "--sandbox", "local", "--sandbox-root", "ws",
               "--db", str(db), "--run-id", "c", "--json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own session: what a terminal's Ctrl-C reaches, and what we check after
    )
    sid = os.getsid(proc.pid)
    try:
        deadline = time.monotonic() + 150
        while not store_has(db, "SELECT 1 FROM events WHERE kind = 'tool_call'"):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the rollout never started"
            time.sleep(0.1)
        assert list((tmp_path / "ws").rglob("sb-*")), "the sandbox lives under the driver's --sandbox-root"
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group, driver and Ray's daemons
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    [row] = json.loads(out)["rollouts"]
    assert row["status"] == "cancelled" and row["failure_kind"] == "cancelled"
    assert list((tmp_path / "ws").rglob("sb-*")) == []  # the worker closed the sandbox (and killed `sleep`)
    deadline = time.monotonic() + 30
    while session_processes(sid) and time.monotonic() < deadline:  # Ray's daemons exit after the driver
        time.sleep(0.2)
    assert session_processes(sid) == []
