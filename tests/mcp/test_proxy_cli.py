"""`clawsdk proxy` and `clawsdk serve --http` as users start them: a --token-env that is unset or too short is
refused (before, the proxy started with a random token nobody was shown, and both took a one-character
token), binding beyond loopback is warned about, and credentials in --upstream reach neither stderr nor the
store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess

import httpx2
import pytest

from clawsdk._http import is_loopback
from tests.conftest import make_task
from tests.mcp.serve_proc import CLAWSDK


def _start(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([CLAWSDK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _refused(proc: subprocess.Popen) -> tuple[int, str]:
    """The exit status and stderr of a command that should refuse at once; one still running has failed."""
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        pytest.fail(f"it started instead of refusing: {err}")
    return proc.returncode, err


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return err


PROXY = ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--port", "0"]


@pytest.mark.parametrize("value,why", [(None, "that environment variable is empty"),
                                       ("x", "the token has 1 characters; use at least 16")])
def test_proxy_refuses_a_token_env_that_is_unset_or_too_short(tmp_path, value, why):
    env = {"PROXY_TOKEN": value} if value else {}
    code, err = _refused(_start([*PROXY, "--token-env", "PROXY_TOKEN", "--db", str(tmp_path / "p.db")], env))
    assert code == 1 and why in err, err


def test_serve_refuses_a_token_shorter_than_16_characters(tmp_path):
    task = make_task(tmp_path, "tok")
    args = ["serve", str(task), "--http", "--port", "0", "--sandbox", "local", "--token-env", "SERVE_TOKEN",
            "--db", str(tmp_path / "s.db")]
    code, err = _refused(_start(args, {"SERVE_TOKEN": "short-token"}))
    assert code == 1 and "the token has 11 characters; use at least 16" in err, err


def test_proxy_warns_when_it_binds_beyond_loopback(tmp_path):
    proc = _start([*PROXY, "--host", "0.0.0.0", "--db", str(tmp_path / "p.db")])
    info = json.loads(proc.stdout.readline())
    err = _stop(proc)
    assert info["base_url"].startswith("http://0.0.0.0:")
    assert "warning: binding 0.0.0.0 exposes the proxy" in err, err


def test_upstream_credentials_reach_neither_stderr_nor_the_store(tmp_path):
    db = tmp_path / "p.db"
    proc = _start(["proxy", "--upstream", "http://user:SECRETPW@127.0.0.1:9/v1?key=QSECRET", "--port", "0",
                   "--db", str(db)])
    info = json.loads(proc.stdout.readline())
    body = {"messages": [{"role": "user", "content": "x"}]}
    r = httpx2.post(info["base_url"] + "/chat/completions", json=body,
                    headers={"Authorization": f"Bearer {info['token']}"}, timeout=30)
    err = _stop(proc)
    assert r.status_code == 502 and "SECRETPW" not in r.text and "QSECRET" not in r.text, r.text
    assert "SECRETPW" not in err and "QSECRET" not in err and "-> http://127.0.0.1:9/v1;" in err, err
    con = sqlite3.connect(db)
    rows = [*con.execute("SELECT config FROM runs"), *con.execute("SELECT payload FROM events")]
    con.close()
    assert rows and not [r for r in rows if "SECRETPW" in r[0] or "QSECRET" in r[0]], rows
    assert json.loads(rows[0][0])["upstream"] == "http://127.0.0.1:9/v1"


def test_serve_on_any_loopback_address_keeps_the_host_check_and_warns_of_nothing(tmp_path):
    # 127.0.0.2 is this machine too: no exposure warning, and a page on a rebound name is still refused
    task = make_task(tmp_path, "lo")
    proc = _start(["serve", str(task), "--http", "--host", "127.0.0.2", "--port", "0", "--sandbox", "local",
                   "--db", str(tmp_path / "s.db")])
    info = json.loads(proc.stdout.readline())
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Authorization": f"Bearer {info['token']}", "Accept": "application/json, text/event-stream"}
    port = info["url"].split(":")[2].split("/")[0]
    try:
        rebound = httpx2.post(info["url"], json=body, headers={**headers, "Host": f"evil.example:{port}"}, timeout=30)
        direct = httpx2.post(info["url"], json=body, headers=headers, timeout=30)
    finally:
        err = _stop(proc)
    assert info["url"].startswith("http://127.0.0.2:")
    assert rebound.status_code == 421, rebound.text
    assert direct.status_code == 200, direct.text
    assert "exposes" not in err, err


@pytest.mark.parametrize("host,local", [("127.0.0.1", True), ("127.9.9.9", True), ("localhost", True), ("::1", True),
                                        ("[::1]", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
                                        ("gpu-1.internal", False), ("", False)])
def test_one_loopback_check_for_every_listener(host, local):
    assert is_loopback(host) is local


def test_two_proxies_on_one_run_id_record_two_rollouts_and_the_last_ends_the_run(tmp_path):
    """Both took sample 0 (one row: the second's start took it over, the calls of both in one rollout), and the
    first to stop marked the run finished while the other was still recording into it."""
    db = tmp_path / "p.db"
    procs = [_start([*PROXY, "--run-id", "shared", "--db", str(db)]) for _ in range(2)]
    infos = [json.loads(p.stdout.readline()) for p in procs]
    for n, info in enumerate(infos):
        body = {"messages": [{"role": "user", "content": f"from proxy {n}"}]}
        httpx2.post(info["base_url"] + "/chat/completions", json=body,
                    headers={"Authorization": f"Bearer {info['token']}"}, timeout=30)

    def status() -> str:
        with sqlite3.connect(db) as c:
            return c.execute("SELECT status FROM runs WHERE id = 'shared'").fetchone()[0]

    _stop(procs[0])
    assert status() == "running"  # the second proxy still records into the run
    _stop(procs[1])
    assert status() == "finished"
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT id, sample, status, n_model_calls FROM rollouts ORDER BY sample").fetchall()
        asked = {rid: json.loads(p)["messages"][0]["content"] for rid, p in c.execute(
            "SELECT rollout_id, payload FROM events WHERE kind = 'model_request'")}
    assert [(s, st, n) for _, s, st, n in rows] == [(0, "finished", 1), (1, "finished", 1)]
    assert sorted(i["rollout_id"] for i in infos) == sorted(r[0] for r in rows)
    assert {asked[i["rollout_id"]] for i in infos} == {"from proxy 0", "from proxy 1"}
    assert [asked[i["rollout_id"]] for i in infos] == ["from proxy 0", "from proxy 1"]
