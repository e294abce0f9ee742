"""`clawsdk serve` and `clawsdk run` share one rollout state machine: the same task and the same tool calls,
made by an external MCP client through serve or by the scripted agent through run, give the same rollout."""

from __future__ import annotations

import anyio
import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from mcp import Client

from clawsdk.runtime.runner import run
from clawsdk.serve import ServeConfig, hosting
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from tests.conftest import make_task
from tests.mcp.serve_proc import session, start_http

WRITE = {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}}
EXEC = {"tool": "exec", "args": {"command": "cat done.txt"}}
FINISH = {"tool": "finish", "args": {"summary": "wrote done.txt"}}

SCRIPTS = {
    "finished": [WRITE, EXEC, FINISH],  # ok, passed
    "wrong-file": [{"tool": "write", "args": {"path": "other.txt", "content": "done\n"}}, FINISH],  # ok, not passed
    "over-budget": [WRITE, EXEC, EXEC, FINISH],  # the third call exceeds max_tool_calls=2: agent_error
}

COLUMNS = ("status", "failure_kind", "scored", "reward", "passed", "n_tool_calls", "n_model_calls", "error")


def _ending(db, run_id):
    with Store(db) as s:
        (row,) = s.query("SELECT * FROM rollouts WHERE run_id = ?", [run_id])
        events = s.events(row["id"])
        verdict = s.verdict(row["id"])
    tools = [(e["payload"]["tool"], e["payload"].get("args")) for e in events if e["kind"] == "tool_call"]
    results = [(e["payload"]["tool"], e["payload"]["is_error"]) for e in events if e["kind"] == "tool_result"]
    notes = [e["payload"] for e in events if e["kind"] in ("note", "error")]
    return ({c: row[c] for c in COLUMNS}, [e["kind"] for e in events], tools, results, notes,
            verdict and (verdict["score"], verdict["passed"]))


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_serve_and_run_record_the_same_rollout(tmp_path, db, script):
    task = load_task(make_task(tmp_path, "same", extra={"limits": {"max_tool_calls": 2}}))
    plan = SCRIPTS[script]

    async def by_run():
        await run([task], agent=ScriptedAgent(plan), db=db, run_id="by-run")

    async def by_serve():
        async with hosting(ServeConfig(task=task, db=db, run_id="by-serve")) as host:
            async with Client(host.server(), mode="legacy") as client:
                for call in plan:
                    await client.call_tool(call["tool"], call["args"])
                    if host.finished:  # the rollout ended (finish, or the budget): the client stops here
                        break
            with anyio.fail_after(30):
                while not host.finished:
                    await anyio.sleep(0.02)

    anyio.run(by_run)
    anyio.run(by_serve)
    ran, served = _ending(db, "by-run"), _ending(db, "by-serve")
    assert served == ran
    row, kinds = ran[0], ran[1]
    expected = {"finished": ("ok", 1), "wrong-file": ("ok", 0), "over-budget": ("agent_error", 1)}[script]
    assert (row["failure_kind"], row["passed"]) == expected and row["status"] == "finished"
    assert kinds.count("tool_call") == min(len(plan) - 1, 2) and "verifier" in kinds
    if script != "over-budget":
        assert {"event": "finish", "args": FINISH["args"]} in ran[4]


@pytest.mark.slow
def test_an_external_client_over_http_records_what_run_records(tmp_path, db):
    folder = make_task(tmp_path, "same-http", extra={"limits": {"max_tool_calls": 2}})
    plan = SCRIPTS["finished"]
    anyio.run(lambda: run([load_task(folder)], agent=ScriptedAgent(plan), db=db, run_id="by-run"))
    proc, info = start_http([str(folder), "--max-rollouts", "1", "--run-id", "by-http"], db)  # the default sandbox

    async def drive():
        async with session(info) as client:
            for call in plan:
                await client.call_tool(call["tool"], call["args"])

    try:
        anyio.run(drive)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert _ending(db, "by-http") == _ending(db, "by-run")
    assert _ending(db, "by-run")[0]["passed"] == 1
