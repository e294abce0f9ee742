"""`clawsdk serve` over stdio reads its lines as the HTTP transport reads bodies: a line that is not one JSON-RPC
message is answered with a JSON-RPC error (it used to get no answer at all, its caller waiting for ever), and a
line is kept to the HTTP body limit, read in linear time (the reader rescanned and copied its whole buffer at
every 64 KiB: a 64 MiB line took 20 s, with no limit on memory)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

import pytest

from clawsdk._http import MAX_BODY
from clawsdk.store.store import Store
from tests.conftest import make_task
from tests.mcp.serve_proc import CLAWSDK


class Raw:
    """A `clawsdk serve` process over stdio, spoken to line by line."""

    def __init__(self, tmp_path, db):
        task = make_task(tmp_path, "lines")
        self.proc = subprocess.Popen([CLAWSDK, "serve", str(task), "--db", str(db), "--sandbox", "local"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        assert self.answer()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))

    def send(self, msg: dict | bytes) -> None:
        self.proc.stdin.write((msg if isinstance(msg, bytes) else json.dumps(msg).encode()) + b"\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = 15) -> dict:
        try:
            return self.answers.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout:g} s") from None

    def close(self) -> str:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        finally:
            self.proc.kill()
        return self.proc.stderr.read().decode()


def _write(rid: int, content: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "write", "arguments": {"path": f"f{rid}.txt", "content": content}}}


@pytest.mark.slow
def test_malformed_lines_get_a_json_rpc_error_and_the_session_goes_on(tmp_path, db):
    server = Raw(tmp_path, db)
    cases = [  # line, the id answered, code, reason
        (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":[]}', 6, -32600, '"params" of tools/call'),
        (b'{"jsonrpc":"1.0","id":"eight","method":"tools/list"}', "eight", -32600, '"jsonrpc": "2.0"'),
        (b'{"jsonrpc":"2.0","id":9,"method":"tools/list"', None, -32700, "the line is not JSON"),
        (b"not json at all", None, -32700, "the line is not JSON"),
        (b'[{"jsonrpc":"2.0","id":10,"method":"ping"}]', None, -32600, "a JSON object (got list)"),
        (b'{"jsonrpc":"2.0","id":11,"method":"ping","params":{"x":NaN}}', 11, -32700, "NaN is not a JSON value"),
        (b"[" * 100000, None, -32600, "nested too deeply"),
        (b'{"jsonrpc":"2.0","id":12,"result":5}', 12, -32600, "not a JSON-RPC message MCP can take"),
    ]
    try:
        for line, rid, code, why in cases:
            server.send(line)
            got = server.answer()
            assert got["id"] == rid and got["error"]["code"] == code and why in got["error"]["message"], (line, got)
        server.send(b"")  # a blank line is no message: skipped without an answer
        server.send({"jsonrpc": "2.0", "id": 13, "method": "tools/list"})
        got = server.answer()
        assert got["id"] == 13 and "finish" in [t["name"] for t in got["result"]["tools"]]
    finally:
        stderr = server.close()
    assert "Traceback" not in stderr
    assert '"params" of tools/call must be an object' in stderr  # logged, once per 10 s at most


@pytest.mark.slow
def test_a_line_past_the_body_limit_is_refused_at_once_and_the_rest_goes_on(tmp_path, db):
    server = Raw(tmp_path, db)
    try:
        server.send(_write(1, "a" * (MAX_BODY - 1000)))  # under the limit: taken
        got = server.answer()
        assert got["id"] == 1 and got["result"]["isError"] is False, got
        started = time.monotonic()
        server.send(_write(2, "b" * (48 << 20)))  # 48 MiB: answered once past the limit, the rest dropped
        got = server.answer()
        took = time.monotonic() - started
        assert got["id"] is None and got["error"]["code"] == -32600, got
        assert f"over {MAX_BODY} bytes" in got["error"]["message"]
        assert took < 20, took  # linear: a fraction of a second here (it was quadratic, 20 s for 64 MiB)
        server.send(_write(3, "c"))
        got = server.answer()
        assert got["id"] == 3 and got["result"]["isError"] is False, got
    finally:
        stderr = server.close()
    assert "Traceback" not in stderr
    with Store(db) as s:
        (row,) = s.query("SELECT * FROM rollouts")
        calls = [e["payload"]["args"]["path"] for e in s.events(row["id"]) if e["kind"] == "tool_call"]
    assert calls == ["f1.txt", "f3.txt"]
