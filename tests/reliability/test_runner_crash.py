"""A crash of the runner itself (the store refuses a write, a bug in a callback): every rollout it started
ends, the run ends `failed` with the reason, and a rerun of the run id finishes the rest."""

import sqlite3
import subprocess
import sys

import anyio
import pytest

from clawsdk import Store, load_tasks, run_sync
from clawsdk.runtime.oracle import OracleAgent
from clawsdk.runtime.runner import DuplicateTaskId, RunFailed
from tests.conftest import make_task

CLI = [sys.executable, "-c", "from clawsdk.cli import main; main()"]


def six_tasks(tmp_path):
    for i in range(6):
        make_task(tmp_path / "tasks", f"t{i}")
    loaded = load_tasks(str(tmp_path / "tasks"))
    assert not loaded.errors
    return loaded.tasks


def rows(db, run_id):
    with Store(db) as store:
        return store.run(run_id), store.rollouts(run_id)


def assert_resumes_to_the_end(tasks, db, run_id):
    result = run_sync(tasks, db=db, run_id=run_id, concurrency=2)
    run, rollouts = rows(db, run_id)
    assert run["status"] == "finished" and run["error"] is None
    assert sorted(r["task_id"] for r in rollouts) == sorted(t.id for t in tasks)
    assert {(r["status"], r["failure_kind"], r["passed"]) for r in rollouts} == {("finished", "ok", 1)}
    return result


class FirstThreeThenWaits(OracleAgent):
    """The first three rollouts to reach the agent run their solution (which three depends on how their
    sandboxes race: `quick` names them); later ones first wait 20 s, so only a run that stops on the
    store's failure ends before that (however fast this machine runs the first three)."""

    def __init__(self):
        self.quick: list[str] = []

    async def run(self, ctx):
        if len(self.quick) < 3:
            self.quick.append(ctx.task.id)
        else:
            await anyio.sleep(20)
        await super().run(ctx)


def test_a_store_that_refuses_a_write_ends_the_run_failed_and_nothing_running(tmp_path, db, monkeypatch):
    tasks = six_tasks(tmp_path)
    calls = {"n": 0}
    real = Store.finish_rollout

    def refuse_the_third(self, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, **kw)

    monkeypatch.setattr(Store, "finish_rollout", refuse_the_third)
    agent = FirstThreeThenWaits()
    with pytest.raises(RunFailed) as caught:
        run_sync(tasks, db=db, run_id="crash", concurrency=2, agent=agent)
    message = str(caught.value)
    assert "run crash failed: the store refused a write (OperationalError: disk I/O error)" in message
    assert "--run-id crash" in message and "\n" not in message
    monkeypatch.setattr(Store, "finish_rollout", real)

    run, rollouts = rows(db, "crash")
    assert run["status"] == "failed" and "disk I/O error" in run["error"]
    assert rollouts, "the rollouts started before the failure are in the store"
    assert not [r for r in rollouts if r["status"] in ("running", "retrying")]
    # the ones in flight are unscored and resumable, never a zero
    assert all(r["scored"] == 0 for r in rollouts if r["status"] == "cancelled")
    # the run stopped instead of running rollouts nobody could see: the ones still working were cancelled
    assert len(agent.quick) == 3 and sorted(o.task_id for o in caught.value.result.outcomes) == sorted(agent.quick)
    assert_resumes_to_the_end(tasks, db, "crash")


def test_a_crash_in_the_runner_ends_the_run_failed_with_the_reason(tmp_path, db):
    tasks = six_tasks(tmp_path)

    def boom(outcome):
        raise RuntimeError("progress display broke")

    with pytest.raises(RunFailed, match="RuntimeError: progress display broke"):
        run_sync(tasks, db=db, run_id="bug", concurrency=2, on_rollout=boom)
    run, rollouts = rows(db, "bug")
    assert run["status"] == "failed" and run["error"] == "RuntimeError: progress display broke"
    listed = subprocess.run(CLI + ["runs", "--db", str(db)], capture_output=True, text=True, timeout=60)
    assert "bug failed: RuntimeError: progress display broke; rerun with --run-id bug" in listed.stdout
    assert not [r for r in rollouts if r["status"] in ("running", "retrying")]
    assert {r["status"] for r in rollouts} <= {"finished", "cancelled"}
    assert_resumes_to_the_end(tasks, db, "bug")


def test_two_tasks_with_one_id_are_refused_before_any_rollout(tmp_path, db):
    make_task(tmp_path / "a", "same")
    make_task(tmp_path / "b", "same")
    tasks = load_tasks(str(tmp_path / "a")).tasks + load_tasks(str(tmp_path / "b")).tasks
    with pytest.raises(DuplicateTaskId, match=r"task id 'same' is used twice \(.*a/same and .*b/same\)"):
        run_sync(tasks, db=db, run_id="dup")
    assert not db.exists() or rows(db, "dup") == (None, [])


def test_run_of_two_folders_sharing_a_task_id_ends_clearly_with_nothing_running(tmp_path, db):
    make_task(tmp_path / "dupA", "same")
    make_task(tmp_path / "dupB", "same")
    make_task(tmp_path / "dupB", "other")
    r = subprocess.run(CLI + ["run", str(tmp_path / "dupA"), str(tmp_path / "dupB"), "--db", str(db),
                              "--run-id", "dup", "--sandbox", "local"], capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "same" in r.stderr, out
    assert r.returncode in (0, 2), out  # refused (exit 2), or made unique by the loader and run
    if db.exists():
        con = sqlite3.connect(db)
        assert con.execute("SELECT COUNT(*) FROM rollouts WHERE status IN ('running', 'retrying')").fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()[0] == 0
        con.close()


def test_a_proxy_whose_store_refuses_a_write_stops_and_ends_its_rollout(tmp_path, db, monkeypatch):
    import anyio
    import httpx2

    from clawsdk.errors import StoreError
    from clawsdk.proxy import run_proxy

    def refuse(self, rows):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Store, "insert_events", refuse)
    got: dict = {}

    async def go():
        ready = anyio.Event()

        def on_ready(url, token, rid):
            got.update(url=url, token=token, rid=rid)
            ready.set()

        async def proxy():
            try:
                await run_proxy(upstream="http://127.0.0.1:9/v1", upstream_key=None, host="127.0.0.1", port=0,
                                token=None, task=None, run_id="px", db=db, on_ready=on_ready)
            except StoreError as e:
                got["error"] = str(e)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(proxy)
                await ready.wait()
                async with httpx2.AsyncClient(timeout=10) as client:
                    await client.post(got["url"] + "/chat/completions", json={"messages": [{"role": "user",
                                      "content": "hi"}]}, headers={"authorization": f"Bearer {got['token']}"})

    anyio.run(go)  # ends by itself: the proxy stopped once nothing could be recorded
    assert "database or disk is full" in got["error"] and "the proxy stopped" in got["error"]
    monkeypatch.undo()
    run, rollouts = rows(db, "px")
    assert run["status"] == "failed" and "disk is full" in run["error"]
    assert [r["status"] for r in rollouts] == ["cancelled"]
