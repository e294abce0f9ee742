"""The control channel of a live run, against a real `clawsdk run` process: pause holds new rollouts and new
model calls and loses nothing in flight, resume goes on, requeue-unscored runs unscored rollouts again, set
changes the level, cancel stops the run as Ctrl-C does; each change is in the store with who and when; and
only who may write the store may steer."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawsdk.runtime.control import ControlError, request, socket_path
from tests.conftest import make_task

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "clawsdk"]
pytestmark = pytest.mark.slow


def query(db: Path, sql: str, *args) -> list[tuple]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:  # not created yet
        return []


def wait_until(cond, timeout: float = 60.0, what: str = "it", proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"the run ended before {what}: {err[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def start_run(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "run", *args, "--sandbox", "local", "--db", str(tmp_path / "store.db"),
                             "--run-id", "live", "--json"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def ctl(tmp_path: Path, op: str, **args) -> dict:
    return request(tmp_path / "store.db", "live", op, by="test", **args)


def control_rows(db: Path) -> list[tuple]:
    return query(db, "SELECT source, actor, action, level, paused FROM run_control WHERE run_id = 'live' ORDER BY id")


@pytest.fixture
def model_server():
    """The benchmark's model that answers after a delay: one write call, then a final answer."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "slow_model_server.py"), "--delay", "0.4"],
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield f"http://127.0.0.1:{port}/v1"
    proc.kill()
    proc.wait()


def test_pause_holds_new_rollouts_and_model_calls_and_loses_nothing_in_flight(tmp_path, model_server):
    for i in range(6):  # 8 s to finish each; paused longer than that, none may end agent_timeout
        make_task(tmp_path / "tasks", f"t{i}", extra={"limits": {"timeout_s": 8}})
    db = tmp_path / "store.db"
    proc = start_run(tmp_path, "tasks", "--agent", "tool-loop", "--model", "openai:sim", "--base-url", model_server,
                     "-c", "2")
    try:
        requests = "SELECT COUNT(*) FROM events WHERE kind = 'model_request'"
        wait_until(lambda: query(db, requests) and query(db, requests)[0][0] >= 1, what="a model call", proc=proc)
        state = ctl(tmp_path, "pause")
        assert state["paused"] and state["concurrency"] == 2 and state["mode"] == "fixed"
        time.sleep(1.0)  # what was in flight at the pause answers; the next calls wait
        started = query(db, "SELECT COUNT(*) FROM rollouts")[0][0]
        calls = query(db, requests)[0][0]
        time.sleep(9.0)  # longer than the tasks' 8 s
        assert query(db, "SELECT COUNT(*) FROM rollouts")[0][0] == started == 2
        assert query(db, requests)[0][0] == calls, "a model call went out while the run was paused"
        assert proc.poll() is None
        assert ctl(tmp_path, "status")["paused"]
        ctl(tmp_path, "resume")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    summary = json.loads(out)
    assert summary["failure_kinds"] == {"ok": 6} and summary["total"]["passed"] == 6  # nothing lost
    start, *rows = control_rows(db)
    assert start[:4] == ("controller", "-c", "start", 2)  # a fixed level is said once, as the run starts
    assert [r[2] for r in rows] == ["pause", "resume"]
    assert all(r[0] == "operator" and f"pid {os.getpid()}, test" in r[1] for r in rows)
    assert rows[0][4] == 1 and rows[1][4] == 0
    when = query(db, "SELECT ts FROM run_control ORDER BY id")
    assert all(w[0].startswith("20") for w in when)


WAITER = """- tool: exec
  args: {command: 'if [ -f wait.txt ]; then while [ ! -f %(go)s ]; do sleep 0.05; done; fi; echo done > done.txt'}
"""


def test_requeue_set_and_cancel(tmp_path):
    """An unscored rollout (its verifier ran out of time) runs again once requeued; set changes the level;
    cancel ends the run as Ctrl-C does, the rollout in flight cancelled, the run resumable."""
    flag, go = tmp_path / "flag", tmp_path / "go"
    make_task(tmp_path / "tasks", "flaky", steps=[], extra={"limits": {"verifier_timeout_s": 1.5}},
              checks=[{"type": "command", "run": f"test -f {flag} || sleep 30"}])
    make_task(tmp_path / "tasks", "waiter", steps=[], workspace={"wait.txt": "x"},
              extra={"limits": {"tool_timeout_s": 900}})  # waits for the test, however busy the machine
    (tmp_path / "script.yaml").write_text(WAITER % {"go": go})
    db = tmp_path / "store.db"
    proc = start_run(tmp_path, "tasks", "--agent", "scripted", "--agent-opt", "script=script.yaml", "--retries", "0")
    try:
        wait_until(lambda: query(db, "SELECT 1 FROM rollouts WHERE task_id = 'flaky' "
                                     "AND failure_kind = 'verifier_timeout'"), what="the unscored ending", proc=proc)
        flag.write_text("now it passes")
        state = ctl(tmp_path, "requeue_unscored")
        assert state["requeued"] == 1
        wait_until(lambda: query(db, "SELECT 1 FROM rollouts WHERE task_id = 'flaky' AND scored = 1 AND passed = 1 "
                                     "AND attempt = 1"), what="the requeued rollout's pass", proc=proc)
        assert ctl(tmp_path, "requeue_unscored")["requeued"] == 0  # nothing unscored is left
        state = ctl(tmp_path, "set", settings={"concurrency": 3})
        assert state["concurrency"] == 3 and state["mode"] == "fixed"
        state = ctl(tmp_path, "set", settings={"concurrency": "auto", "ceiling": 5})
        assert state["mode"] == "auto" and state["ceiling"] == 5
        with pytest.raises(ControlError, match="KEY one of concurrency, ceiling, verifiers"):
            ctl(tmp_path, "set", settings={"speed": 3})
        ctl(tmp_path, "cancel")
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    run = query(db, "SELECT status, error FROM runs WHERE id = 'live'")[0]
    assert run[0] == "interrupted" and run[1].startswith("cancelled by ") and "test" in run[1]
    assert query(db, "SELECT status, failure_kind FROM rollouts WHERE task_id = 'waiter'") == [("cancelled", "cancelled")]
    actions = [(r[0], r[2]) for r in control_rows(db)]
    operator = [a for s, a in actions if s == "operator"]
    assert operator == ["requeue_unscored", "requeue_unscored", "set", "set", "cancel"]
    assert ("controller", "start") in actions  # -c auto, the default, records how it began
    assert not socket_path(db, "live").exists()  # the channel closes with the run
    # the cancelled run resumes to the end
    go.write_text("go")
    done = subprocess.run([*CLI, "run", "tasks", "--agent", "scripted", "--agent-opt", "script=script.yaml",
                           "--sandbox", "local", "--db", str(db), "--run-id", "live", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["total"]["passed"] == 2


def test_only_who_may_write_the_store_may_steer(tmp_path):
    """The socket has the store's permissions: a store only its owner writes is steered by its owner only."""
    if os.geteuid() != 0:
        pytest.skip("needs root to try as another user")
    (tmp_path / "script.yaml").write_text(WAITER % {"go": tmp_path / "go"})
    make_task(tmp_path / "tasks", "waiter", steps=[], workspace={"wait.txt": "x"},
              extra={"limits": {"tool_timeout_s": 900}})  # waits for the test, however busy the machine
    db = tmp_path / "store.db"
    subprocess.run([*CLI, "runs", "--db", str(db)], capture_output=True)  # nothing yet
    proc = start_run(tmp_path, "tasks", "--agent", "scripted", "--agent-opt", "script=script.yaml")
    try:
        sock = socket_path(db, "live")
        wait_until(sock.exists, what="the control socket", proc=proc)
        mode = stat.S_IMODE(db.stat().st_mode)
        assert stat.S_IMODE(sock.stat().st_mode) == mode & 0o666
        modes = {f: os.stat(f).st_mode for f in (tmp_path, *tmp_path.parents)}
        for folder, m in modes.items():  # nobody must reach the socket's folder, to be refused by the socket
            os.chmod(folder, m | 0o005)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # as nobody: the same request a user of the machine would send
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                try:
                    request(db, "live", "pause", by="nobody")
                    said = "allowed"
                except ControlError as e:
                    said = str(e)
                os.write(write, said.encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(child, 0)
        for folder, m in modes.items():
            os.chmod(folder, m)
        said = os.read(read, 4096).decode()
        os.close(read)
        assert "not allowed to steer run live" in said and "this user may not write the store" in said
        assert not ctl(tmp_path, "status")["paused"]
        (tmp_path / "go").write_text("go")
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def test_ctl_says_when_the_run_is_not_running(tmp_path):
    done = subprocess.run([*CLI, "ctl", "nope", "pause", "--db", str(tmp_path / "s.db")], capture_output=True,
                          text=True)
    assert done.returncode != 0 and "run nope is not running" in done.stderr
