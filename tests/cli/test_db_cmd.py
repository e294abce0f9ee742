"""`clawsdk db`: Datasette metadata for every table and view, canned queries that run, and `db serve`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.store.datasette import QUERIES, metadata


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from clawsdk.runtime.runner import run_sync
    from clawsdk.tasks.model import Task, VerifierSpec

    db = tmp_path_factory.mktemp("db") / "store.db"
    task = Task(id="lines", instruction="Write two lines into a.txt, then read it.", tools=["core"],
                verifier=VerifierSpec(checks=[{"type": "file_exists", "path": "a.txt"}]),
                solution=[{"tool": "write", "args": {"path": "a.txt", "content": "first line\nsecond line\n"}},
                          {"tool": "read", "args": {"path": "a.txt"}}, {"tool": "read", "args": {"path": "nope.txt"}}])
    run_sync([task], agent="oracle", sandbox="local", run_id="db-run", db=db)
    return db


def test_every_table_and_view_is_described(store):
    meta = metadata(store)
    tables = meta["databases"]["store"]["tables"]
    con = sqlite3.connect(store)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                                       "AND name NOT LIKE 'sqlite_%'")}
    assert names == set(tables)
    assert all(entry["description"] for entry in tables.values())
    assert tables["verdict_scores"]["columns"]["name"].startswith("one sub-score")
    assert tables["tool_results"]["columns"]["content"] == "the result's text, unescaped"
    assert tables["runs"]["columns"]["error"] == "why the run ended failed or interrupted"


def test_the_canned_queries_run_and_tool_results_read_as_text(store):
    con = sqlite3.connect(store)
    rollout = con.execute("SELECT id FROM rollouts").fetchone()[0]
    for name, q in QUERIES.items():
        rows = con.execute(q["sql"], {"rollout_id": rollout}).fetchall()
        assert rows, f"canned query {name} found nothing in a store with a run"
    read = con.execute("SELECT content FROM tool_results WHERE tool = 'read' AND is_error = 0").fetchone()[0]
    assert "first line\nsecond line" in read  # real newlines, not a JSON-escaped line
    failed = con.execute(QUERIES["failed_tool_calls"]["sql"]).fetchall()
    assert [r[4] for r in failed] == ["read"]


def test_db_serve_says_how_to_install_datasette_when_it_is_missing(store, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no datasette anywhere
    res = CliRunner().invoke(cli, ["db", "serve", "--db", str(store)])
    assert res.exit_code == 1
    assert "datasette is not installed; install it with `pip install datasette`" in " ".join(res.output.split())


def fake_datasette(tmp_path, then: str = "") -> tuple[dict, object]:
    """A `datasette` on PATH that records its arguments, its metadata and where that lay, then runs `then`."""
    record = tmp_path / "args.json"
    fake = tmp_path / "bin" / "datasette"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys, time\nargs = sys.argv[1:]\n"
                    f"path = args[args.index('--metadata') + 1]\n"
                    f"json.dump({{'args': args, 'meta': json.load(open(path)), 'path': path}}, "
                    f"open({str(record)!r}, 'w'))\n{then}\n")
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}, record


def serve(store, env, *args, **kw):
    return subprocess.run([sys.executable, "-m", "clawsdk", "db", "serve", "--db", str(store), *args],
                          env=env, capture_output=True, text=True, timeout=120, **kw)


def test_db_serve_runs_datasette_on_the_store_with_the_metadata(store, tmp_path):
    env, record = fake_datasette(tmp_path)
    out = serve(store, env, "--port", "8123")
    assert out.returncode == 0, out.stderr
    got = json.loads(record.read_text())
    # a live database, not --immutable: that skipped what the write-ahead log holds
    assert got["args"][:2] == ["serve", str(store)] and "--immutable" not in got["args"] and "8123" in got["args"]
    assert "pass_rate_by_run" in got["meta"]["databases"]["store"]["queries"]


def test_db_serve_needs_a_login_and_leaves_no_metadata_folder_behind(store, tmp_path):
    """Datasette served the store, hidden verifier files included, to anyone who could reach the port; and
    each call left a /tmp/clawsdk-datasette-* folder (datasette was exec'd, so nothing removed it)."""
    env, record = fake_datasette(tmp_path)
    out = serve(store, env)
    assert out.returncode == 0, out.stderr
    got = json.loads(record.read_text())
    assert got["meta"]["allow"] == {"id": "root"} and "--root" in got["args"]  # --root prints the login URL
    assert not os.path.exists(got["path"]) and not os.path.exists(os.path.dirname(got["path"]))


def test_db_serve_passes_sigterm_on_and_still_removes_the_metadata(store, tmp_path):
    then = "import signal\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\ntime.sleep(60)"
    env, record = fake_datasette(tmp_path, then)
    proc = subprocess.Popen([sys.executable, "-m", "clawsdk", "db", "serve", "--db", str(store)], env=env)
    deadline = time.monotonic() + 60
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)  # the fake's handler is set
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 3  # the child's own exit status
    assert not os.path.exists(json.loads(record.read_text())["path"])


def test_db_serve_refuses_an_address_beyond_loopback_unless_told(store, tmp_path):
    env, record = fake_datasette(tmp_path)
    out = serve(store, env, "--host", "0.0.0.0")
    assert out.returncode == 1 and "--public" in out.stderr and not record.exists()
    out = serve(store, env, "--host", "0.0.0.0", "--public")
    assert out.returncode == 0 and "warning: --public" in out.stderr, out.stderr
    assert "0.0.0.0" in json.loads(record.read_text())["args"]
    assert serve(store, env, "--host", "127.0.0.2").returncode == 0  # all of 127/8 is loopback


def test_the_pass_rate_query_is_per_task_as_clawsdk_runs_and_bench_report(tmp_path):
    """Task `easy` passed 4 of 4; `hard` had 3 samples unscored and 1 failed. Per scored rollout that read 0.80;
    per task, as every other summary says it, 0.50."""
    import sqlite3

    from clawsdk.store.datasette import QUERIES
    from clawsdk.store.store import Store

    db = tmp_path / "s.db"
    with Store(db) as s:
        s.upsert_run("r", status="finished", agent="a")
        for i, (task, kind, passed) in enumerate([("easy", "ok", True)] * 4 + [("hard", "model_error", None)] * 3
                                                 + [("hard", "ok", False)]):
            s.start_rollout(rollout_id=f"x{i}", run_id="r", task_id=task, task_hash=task, sample=i, attempt=0,
                            agent="a", model=None)
            scored = kind == "ok"
            s.finish_rollout(rollout_id=f"x{i}", attempt=0, status="finished", failure_kind=kind, scored=scored,
                             reward=float(passed) if scored else None, passed=passed, error=None, n_tool_calls=0,
                             n_model_calls=0, duration_s=0.0)
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        (row,) = [dict(r) for r in c.execute(QUERIES["pass_rate_by_run"]["sql"])]
    assert (row["pass_at_1"], row["mean_score"], row["tasks"], row["tasks_scored"]) == (0.5, 0.5, 2, 2)
    assert (row["rollouts"], row["scored"], row["passed"], row["unscored"]) == (8, 5, 4, 3)


def test_clawsdk_runs_the_tui_and_the_datasette_query_give_the_same_per_task_figures(tmp_path):
    """One definition of a task's figures (PER_TASK_SQL): `clawsdk runs` counted a retrying attempt's score,
    which the TUI and the Datasette query leave out (the rollout's score is its last attempt's)."""
    import sqlite3

    from clawsdk_tui.data import StoreReader

    from clawsdk.store.datasette import QUERIES
    from clawsdk.store.store import Store

    db = tmp_path / "s.db"
    with Store(db) as s:
        s.upsert_run("r", status="running", agent="a")
        ends = [("easy", "finished", True)] * 2 + [("hard", "finished", False), ("hard", "retrying", True)]
        for i, (task, status, passed) in enumerate(ends):
            s.start_rollout(rollout_id=f"x{i}", run_id="r", task_id=task, task_hash=task, sample=i, attempt=0,
                            agent="a", model=None)
            s.finish_rollout(rollout_id=f"x{i}", attempt=0, status=status, failure_kind="ok", scored=True,
                             reward=float(passed), passed=passed, error=None, n_tool_calls=0, n_model_calls=0,
                             duration_s=0.0)
        (cli_row,) = s.runs()
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        (query_row,) = [dict(r) for r in c.execute(QUERIES["pass_rate_by_run"]["sql"])]
    (tui_row,) = StoreReader(db).runs()
    assert (cli_row["pass_rate"], cli_row["mean_reward"]) == (0.5, 0.5)
    assert (query_row["pass_at_1"], query_row["mean_score"]) == (0.5, 0.5)
    assert (tui_row.pass_rate, tui_row.mean_reward) == (0.5, 0.5)
    assert (cli_row["scored"], cli_row["passed"], tui_row.scored, tui_row.passed) == (3, 2, 3, 2)


def test_db_serve_opens_a_store_in_a_folder_it_cannot_write_immutable(store, tmp_path, monkeypatch):
    """A read-only mount or an archive: SQLite cannot make the WAL's index there, so immutable, as before; and
    a store whose WAL holds data there is refused rather than shown without it."""
    from clawsdk.cli import db_cmd

    env, record = fake_datasette(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if mode == os.W_OK else real_access(p, mode))
    assert db_cmd._store_args(store) == ["--immutable", str(store)]
    res = CliRunner().invoke(cli, ["db", "serve", "--db", str(store)])
    assert res.exit_code == 0, res.output
    assert json.loads(record.read_text())["args"][:3] == ["serve", "--immutable", str(store)]
    copy = tmp_path / "copy.db"
    copy.write_bytes(store.read_bytes())
    copy.with_name("copy.db-wal").write_bytes(b"x" * 100)  # a copy taken while a run wrote
    res = CliRunner().invoke(cli, ["db", "serve", "--db", str(copy)])
    assert res.exit_code != 0 and "write-ahead log beside it" in " ".join(res.output.split()), res.output
