"""`clawsdk db serve` with the real Datasette, on a store another process is writing: the counts it serves
are sqlite3's, the write-ahead log included (with --immutable it served 46 rollouts of 91)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from clawsdk.store.store import Store

pytestmark = pytest.mark.slow

# a second process writing the store as a run does: WAL, its commits left in the log (no checkpoint)
WRITER = r"""
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA journal_mode = WAL")
con.execute("PRAGMA wal_autocheckpoint = 0")
n = 0
for line in sys.stdin:
    k = int(line)
    con.execute("BEGIN IMMEDIATE")
    for _ in range(k):
        con.execute("INSERT INTO rollouts (id, run_id, task_id, task_hash, sample, status) "
                    "VALUES (?, 'live', 't', 'h', ?, 'running')", [f"r{n}", n])
        con.execute("INSERT INTO events (rollout_id, attempt, seq, kind, ts, payload) "
                    "VALUES (?, 0, 0, 'note', '2026-01-01T00:00:00+00:00', '{}')", [f"r{n}"])
        n += 1
    con.execute("COMMIT")
    print("committed", n, flush=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def counts_sqlite3(db) -> dict:
    con = sqlite3.connect(db)
    try:
        return {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("rollouts", "events")}
    finally:
        con.close()


def test_db_serve_shows_what_a_store_being_written_holds(tmp_path):
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"}
    if shutil.which("datasette", path=env["PATH"]) is None:
        if os.environ.get("CI"):
            pytest.fail("datasette is not installed (it is in the db extra: pip install 'clawsdk[db]')")
        pytest.skip("datasette is not installed")
    db = tmp_path / "store.db"
    with Store(db) as store, store.transaction():
        store.upsert_run("live", status="running", agent="a", sandbox="local", samples=1)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "clawsdk", "db", "serve", "--db", str(db), "--port", str(port)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                             env=env)
    try:
        writer.stdin.write("46\n")
        writer.stdin.flush()
        assert writer.stdout.readline().split() == ["committed", "46"]
        login = None
        deadline = time.monotonic() + 60
        while login is None and time.monotonic() < deadline:
            line = serve.stdout.readline()
            assert line or serve.poll() is None, "db serve ended"
            m = re.search(r"(http://\S+/-/auth-token\?token=\S+)", line)
            login = m.group(1) if m else None
        assert login, "datasette printed no login URL"
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        while True:  # the URL is printed before the server listens
            try:
                opener.open(login, timeout=30).read()
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline and serve.poll() is None, "datasette did not start"
                time.sleep(0.2)

        def served() -> dict:
            out = {}
            for table in ("rollouts", "events"):
                q = urllib.parse.urlencode({"sql": f"select count(*) as n from {table}", "_shape": "array"})
                out[table] = json.loads(opener.open(f"http://127.0.0.1:{port}/store.json?{q}", timeout=30).read())[0]["n"]
            return out

        assert db.with_name("store.db-wal").stat().st_size > 0  # the commits are in the log
        immutable = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        assert immutable.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0] < 46  # what --immutable showed
        immutable.close()
        assert served() == counts_sqlite3(db) == {"rollouts": 46, "events": 46}
        writer.stdin.write("45\n")
        writer.stdin.flush()
        assert writer.stdout.readline().split() == ["committed", "91"]
        assert served() == counts_sqlite3(db) == {"rollouts": 91, "events": 91}
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
        os.killpg(serve.pid, signal.SIGINT)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
