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
from tests.serve.serve_proc import CLAWSDK, require_bwrap, session, start_http


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
