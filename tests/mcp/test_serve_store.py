"""`clawsdk serve` and its store: servers that share a run id never share a rollout (each sample is claimed in
the store), and a store that refuses a write stops the server, tells the client nothing is recorded, settles
the run `failed` and exits non-zero."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading

import anyio
from mcp import Client, StdioServerParameters

from clawsdk.runtime.ids import rollout_id
from clawsdk.serve import ServeConfig, hosting
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from tests.conftest import make_task
from tests.mcp.serve_proc import CLAWSDK


def _stdio(task, db, *args) -> StdioServerParameters:
    # the whole environment: the server must import the same clawsdk as this process
    return StdioServerParameters(command=CLAWSDK, args=["serve", str(task), "--db", str(db), "--sandbox", "local",
                                                        *args], env=dict(os.environ))


def test_two_stdio_servers_on_one_run_id_record_two_rollouts(tmp_path, db):
    """Each agent run spawns its own stdio server; with one --run-id and store, both used to take sample 0 (read
    once at start-up): one rollout row, taken over by the second, and the first's events lost."""
    task = make_task(tmp_path, "shared")

    async def main():
        async with Client(_stdio(task, db, "--run-id", "bench"), mode="legacy") as a, \
                Client(_stdio(task, db, "--run-id", "bench"), mode="legacy") as b:  # both up before any rollout
            for name, client in (("a", a), ("b", b)):
                r = await client.call_tool("write", {"path": "done.txt", "content": f"done by {name}\n"})
                assert not r.is_error, r.content[0].text
            return [(await c.call_tool("finish", {"summary": name})).content[0].text
                    for name, c in (("a", a), ("b", b))]

    answers = anyio.run(main)
    with Store(db) as s:
        rows = s.rollouts("bench")
        events = {r["id"]: s.events(r["id"]) for r in rows}
    assert sorted(r["sample"] for r in rows) == [0, 1]
    assert {r["id"] for r in rows} == {rollout_id("bench", "shared", 0), rollout_id("bench", "shared", 1)}
    assert [(r["status"], r["failure_kind"], r["scored"], r["passed"], r["n_tool_calls"]) for r in rows] == [
        ("finished", "ok", 1, 1, 1)] * 2
    # each rollout has its own session's events, and each client was told about its own rollout
    writers = sorted(e[0]["payload"]["args"]["content"] for e in events.values())
    assert writers == ["done by a\n", "done by b\n"]
    assert sorted(a.split()[1] for a in answers) == sorted(r["id"] for r in rows)


def test_the_last_of_two_stdio_servers_on_one_run_id_ends_the_run(tmp_path, db):
    """The first server to exit marked the shared run finished while the other was still recording into it."""
    task = make_task(tmp_path, "shared")

    def status() -> str:
        with Store(db) as s:
            return s.run("bench")["status"]

    async def main():
        async with Client(_stdio(task, db, "--run-id", "bench"), mode="legacy") as b:
            r = await b.call_tool("write", {"path": "done.txt", "content": "done by b\n"})
            assert not r.is_error, r.content[0].text
            async with Client(_stdio(task, db, "--run-id", "bench"), mode="legacy") as a:
                await a.call_tool("write", {"path": "done.txt", "content": "done by a\n"})
                await a.call_tool("finish", {"summary": "a"})
            assert await anyio.to_thread.run_sync(status) == "running"  # b is still in its rollout
            await b.call_tool("finish", {"summary": "b"})

    anyio.run(main)
    assert status() == "finished"
    with Store(db) as s:
        assert [(r["status"], r["passed"]) for r in s.rollouts("bench")] == [("finished", 1)] * 2


def test_concurrent_claims_on_one_run_id_take_distinct_samples(tmp_path, db):
    task = load_task(make_task(tmp_path, "claims"))
    with Store(db) as s, s.transaction():
        s.upsert_run("shared", status="running")
        s.upsert_task(task)
        s.start_rollout(rollout_id="r-old", run_id="shared", task_id=task.id, task_hash=task.hash, sample=0,
                        attempt=0, agent="earlier", model=None)
    got, errors = [], []

    def claim():
        try:
            with Store(db) as s:
                for _ in range(10):
                    got.append(s.claim_rollout(run_id="shared", task_id=task.id, task_hash=task.hash, agent="x",
                                               model=None, make_id=lambda n: rollout_id("shared", task.id, n)))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(sample for sample, _ in got) == list(range(1, 41))  # sample 0 was taken: never taken over
    with Store(db) as s:
        assert s.rollout("r-old")["agent"] == "earlier"
        assert len(s.rollouts("shared")) == 41


def _poison(db, word: str) -> None:
    """A store that refuses any event holding `word`, as a full disk or a broken file refuses a write."""
    Store(db).close()
    with sqlite3.connect(db) as c:
        c.execute(f"CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.payload LIKE '%{word}%' "
                  "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END")


def test_a_failed_store_stops_the_sessions_answers_every_call_with_it_and_fails_the_run(tmp_path, db):
    task = load_task(make_task(tmp_path, "poisoned"))
    _poison(db, "POISON")
    config = ServeConfig(task=task, db=db, run_id="srv", sandbox="local")

    async def main():
        answers, raised = {}, None
        try:
            async with hosting(config) as host:
                async with Client(host.server(), mode="legacy") as c:
                    await c.call_tool("write", {"path": "a.txt", "content": "POISON"})  # its events are refused
                    with anyio.fail_after(20):
                        await host.failed.wait()  # what a transport stops on
                    for name, args in (("ls", {}), ("finish", {})):
                        r = await c.call_tool(name, args)
                        answers[name] = (r.is_error, r.content[0].text)
                async with Client(host.server(), mode="legacy") as c:  # no new sessions
                    r = await c.call_tool("ls", {})
                    answers["a new session"] = (r.is_error, r.content[0].text)
        except Exception as e:  # checked below
            raised = e
        return answers, raised

    answers, raised = anyio.run(main)
    for name, (is_error, text) in answers.items():  # `finish` used to answer "the workspace has been scored"
        assert is_error and "the store failed" in text and "Nothing more of this session is recorded" in text, name
        assert "scored" not in text, name
    assert type(raised).__name__ == "StoreError" and "refused a write" in str(raised), raised
    with Store(db) as s:
        run, rows = s.run("srv"), s.rollouts("srv")
    assert run["status"] == "failed" and "the disk is full" in run["error"]  # was `finished`
    assert [(r["status"], r["failure_kind"], r["scored"]) for r in rows] == [("cancelled", "cancelled", 0)]


def test_a_stdio_server_whose_store_fails_exits_non_zero(tmp_path, db):
    task = make_task(tmp_path, "poisoned")
    _poison(db, "POISON")
    proc = subprocess.Popen([CLAWSDK, "serve", str(task), "--db", str(db), "--sandbox", "local", "--run-id", "srv"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def rpc(msg: dict) -> dict | None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline()) if "id" in msg else None

    try:
        rpc({"id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        rpc({"method": "notifications/initialized"})
        rpc({"id": 1, "method": "tools/call", "params": {"name": "write",
                                                         "arguments": {"path": "a.txt", "content": "POISON"}}})
        code = proc.wait(timeout=60)  # the client still holds stdin open: the server stops on its own
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    assert code == 2, stderr  # it used to go on, recording nothing, and exit 0
    assert "refused a write" in stderr and "Traceback" not in stderr, stderr
    with Store(db) as s:
        run, rows = s.run("srv"), s.rollouts("srv")
    assert run["status"] == "failed"
    assert [(r["status"], r["scored"]) for r in rows] == [("cancelled", 0)]
