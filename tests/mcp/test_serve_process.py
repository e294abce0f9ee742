"""`clawsdk serve` as users start it: the isolating sandbox by default, `local` only with a warning, SIGTERM
that records what was open, one-line 400s for malformed bodies, and the stdio store in a fixed place."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import anyio
import httpx2
import pytest

from clawsdk.store.store import Store
from tests.conftest import make_task
from tests.mcp.serve_proc import CLAWSDK, require_bwrap, session, start_http


def _text(result) -> str:
    return result.content[0].text


@pytest.mark.slow
def test_serve_over_http_isolates_the_agent_by_default(tmp_path, db):
    require_bwrap()
    task = make_task(tmp_path, "iso")
    proc, info = start_http([str(task), "--max-rollouts", "1"], db)  # no --sandbox

    async def main():
        async with session(info) as client:
            uid = await client.call_tool("exec", {"command": "id -u"})
            shadow = await client.call_tool("exec", {"command": "cat /etc/shadow"})
            await client.call_tool("finish", {})
        return _text(uid), _text(shadow)

    try:
        uid, shadow = anyio.run(main)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    uid, shadow = json.loads(uid), json.loads(shadow)
    assert uid["exit_code"] == 0 and int(uid["stdout"]) != 0
    assert shadow["exit_code"] != 0 and "root:" not in shadow["stdout"]
    assert info["sandbox"] == "bwrap" and "isolates nothing" not in proc.stderr.read()
    with Store(db) as s:
        (row,) = s.rollouts(info["run_id"])
    assert row["failure_kind"] == "ok" and row["n_tool_calls"] == 2


def _store_rows(db, run_id):
    with Store(db) as s:
        return s.run(run_id), s.rollouts(run_id)


@pytest.mark.slow
def test_sigterm_records_the_open_session_and_ends_the_run(tmp_path, db):
    proc, info = start_http([str(make_task(tmp_path, "term")), "--sandbox", "local"], db)

    async def main():
        async with session(info) as client:
            assert not (await client.call_tool("write", {"path": "half.txt", "content": "x"})).is_error
            os.kill(proc.pid, signal.SIGTERM)
            return await anyio.to_thread.run_sync(lambda: proc.wait(timeout=60))

    try:
        code = anyio.run(main)
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    assert code == 130 and "Traceback" not in stderr
    assert "--sandbox local isolates nothing" in stderr and "other rollouts' hidden verifier files" in stderr
    run, rollouts = _store_rows(db, info["run_id"])
    assert run["status"] == "interrupted"
    assert [(r["status"], r["failure_kind"], r["scored"], r["reward"], r["n_tool_calls"]) for r in rollouts] == [
        ("cancelled", "cancelled", 0, None, 1)]


@pytest.mark.slow
def test_malformed_bodies_get_400_with_the_reason(tmp_path, db):
    proc, info = start_http([str(make_task(tmp_path, "bodies")), "--sandbox", "local"], db)
    headers = {"Authorization": f"Bearer {info['token']}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    cases = {b"{not json": "not JSON", b"[]": "a JSON object (got list)", b'"hi"': "a JSON object (got str)",
             b'{"id": 1, "method": "ping"}': '"jsonrpc": "2.0"',
             b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": []}': '"params" of initialize',
             b'{"jsonrpc": "2.0", "id": {}, "method": "ping"}': '"id" must be',
             b'{"jsonrpc": "2.0"}': "neither a request",
             # not JSON: kept, it made the store's event invalid JSON
             b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}': "NaN is not a JSON value",
             b"[" * 100000: "nested too deeply"}  # was a 500 with a RecursionError traceback
    try:
        for body, why in cases.items():
            r = httpx2.post(info["url"], content=body, headers=headers)
            assert r.status_code == 400, (body, r.text)
            assert why in r.json()["error"]["message"], (body, r.text)
        r = httpx2.post(info["url"], content=b"[]", headers={"Content-Type": "application/json"})
        assert r.status_code == 401  # no token: refused before the body is read
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert "Traceback" not in proc.stderr.read()
    run, rollouts = _store_rows(db, info["run_id"])
    assert rollouts == [] and run["status"] == "interrupted"


@pytest.mark.slow
def test_stdio_store_lives_in_the_user_data_folder_and_sigterm_ends_the_run(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "spawner"
    home.mkdir()
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWSDK_DB", "XDG_DATA_HOME")}
    proc = subprocess.Popen([CLAWSDK, "serve", str(make_task(tmp_path, "stdio")), "--sandbox", "local"], cwd=cwd,
                            env={**env, "HOME": str(home)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def rpc(msg: dict) -> dict | None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline()) if "id" in msg else None

    try:
        init = rpc({"id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        assert init["result"]["serverInfo"]["name"] == "clawsdk"
        rpc({"method": "notifications/initialized"})
        r = rpc({"id": 1, "method": "tools/call", "params": {"name": "write",
                                                             "arguments": {"path": "a.txt", "content": "a"}}})
        assert r["result"]["isError"] is False
        proc.send_signal(signal.SIGTERM)  # the client still holds stdin open
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    assert code == 130 and "Traceback" not in stderr, stderr
    db = home / ".local" / "share" / "clawsdk" / "clawsdk.db"
    assert str(db) in stderr and not (cwd / ".clawsdk").exists()
    with Store(db) as s:
        (run,) = s.runs()
        rollouts = s.rollouts(run["id"])
    assert run["status"] == "interrupted"
    assert [(r["status"], r["failure_kind"], r["n_tool_calls"]) for r in rollouts] == [("cancelled", "cancelled", 1)]
