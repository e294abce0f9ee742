"""`clawsdk db`: Datasette metadata for every table and view, canned queries that run, and `db serve`."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

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


def test_db_serve_runs_datasette_on_the_store_with_the_metadata(store, tmp_path):
    record = tmp_path / "args.json"
    fake = tmp_path / "bin" / "datasette"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nargs = sys.argv[1:]\n"
                    f"meta = json.load(open(args[args.index('--metadata') + 1]))\n"
                    f"json.dump({{'args': args, 'meta': meta}}, open({str(record)!r}, 'w'))\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run([sys.executable, "-m", "clawsdk", "db", "serve", "--db", str(store), "--port", "8123"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(record.read_text())
    assert got["args"][:3] == ["serve", "--immutable", str(store)] and "8123" in got["args"]
    assert "pass_rate_by_run" in got["meta"]["databases"]["store"]["queries"]
