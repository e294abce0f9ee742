"""The ray executor on a real local Ray cluster: same results as local, live events, lost workers, Ctrl-C."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import anyio
import pytest
from clawsdk_plugins.executors.ray import RayExecutor

from clawsdk import Store, load_tasks, run_sync
from clawsdk.runtime.executor import RolloutJob
from clawsdk.runtime.runner import run
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from tests.conftest import CHECKOUT_PATH, EXAMPLES, make_task
from tests.executors import ray_agents
from tests.executors.ray_agents import Chatty, KillsItsWorker, WaitsForGo

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

WORKERS = 2


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local cluster of WORKERS worker processes for the module; nothing of it is left after."""
    ray.init(num_cpus=WORKERS, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": CHECKOUT_PATH}})
    # the test agents live in a test module the workers would not find by name: ship them by value
    ray.cloudpickle.register_pickle_by_value(ray_agents)
    yield
    ray.cloudpickle.unregister_pickle_by_value(ray_agents)
    ray.shutdown()


def tasks_in(path):
    loaded = load_tasks(str(path))
    assert not loaded.errors, loaded.errors
    return loaded.tasks


def traces(db: Path, run_id: str) -> dict:
    """What a user compares between two runs: per rollout, its ending, verdict and every event in order."""
    out = {}
    with Store(db) as store:
        for r in store.rollouts(run_id):
            events = store.events(r["id"])
            assert [e["seq"] for e in events] == list(range(len(events)))
            verdict = store.verdict(r["id"])
            out[r["task_id"], r["sample"]] = {
                "ending": (r["status"], r["failure_kind"], r["reward"], r["n_tool_calls"]),
                "verdict": (verdict["passed"], verdict["score"],
                            [(s["name"], s["score"], _stable(s["detail"])) for s in verdict["subscores"]]),
                "events": [(e["kind"], _stable(e["payload"])) for e in events],
            }
    return out


TIMINGS = ("duration_s", "duration_ms", "elapsed_s")
VARIES = [(re.compile(r"sb-[0-9a-f]{8,}(?:-[a-z]+-\d+-\w+)?"), "sb-ID"),  # each sandbox's folder name
          (re.compile(r"Ran (\d+) tests? in [0-9.]+s"), r"Ran \1 tests in Ts")]  # unittest's own timing


def _stable(payload):
    """Event payloads without what differs between any two runs, even two local ones."""
    if isinstance(payload, dict):
        return {k: _stable(v) for k, v in payload.items() if k not in TIMINGS}
    if isinstance(payload, list):
        return [_stable(v) for v in payload]
    if isinstance(payload, str):
        for pattern, repl in VARIES:
            payload = pattern.sub(repl, payload)
    return payload


def test_ray_and_local_record_the_same_verdicts_and_events(tmp_path, db):
    examples = tasks_in(EXAMPLES)
    tiny = tasks_in(make_task(tmp_path, "tiny", workspace={"notes.md": "hello\n"}, steps=[]))
    script = [{"tool": "read", "args": {"path": "notes.md"}},
              {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}},
              {"tool": "exec", "args": {"command": "wc -c done.txt notes.md"}},
              {"tool": "read", "args": {"path": "missing.txt"}}]  # a tool error travels back too
    same = {"db": db, "sandbox_config": SandboxConfig(root=str(tmp_path / "workspaces"))}
    for executor in ("local", "ray"):
        run_sync(examples, agent="oracle", executor=executor, concurrency=4, run_id=f"oracle-{executor}",
                 **same)
        run_sync(tiny, agent="scripted", agent_options={"calls": script}, executor=executor,
                 run_id=f"scripted-{executor}", **same)
    for name, n in (("oracle", len(examples)), ("scripted", 1)):
        local, remote = traces(db, f"{name}-local"), traces(db, f"{name}-ray")
        assert len(local) == n and local.keys() == remote.keys()
        for key in local:
            assert remote[key]["ending"] == local[key]["ending"], key
            assert remote[key]["verdict"] == local[key]["verdict"], key
            assert len(remote[key]["events"]) == len(local[key]["events"]), key
            for i, (theirs, ours) in enumerate(zip(remote[key]["events"], local[key]["events"], strict=True)):
                assert theirs == ours, f"{key} event {i}"
    assert all(t["verdict"][0] == 1 for t in traces(db, "oracle-ray").values())  # the oracle passes
    [tiny_trace] = traces(db, "scripted-ray").values()
    assert [k for k, _ in tiny_trace["events"]][:8] == ["tool_call", "tool_result"] * 4
    assert tiny_trace["events"][7][1]["is_error"] is True


def _store_has(db: Path, sql: str) -> bool:
    if not db.exists():
        return False
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return bool(con.execute(sql).fetchone())
        finally:
            con.close()
    except sqlite3.OperationalError:  # the store is being created
        return False


async def _until(predicate) -> None:
    while not predicate():
        await anyio.sleep(0.05)


def test_events_reach_the_store_while_the_rollout_runs_and_resources_are_asked(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path, steps=[]))
    go = tmp_path / "go"
    seen_live = []

    async def main():
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                asks = {"cpus_per_rollout": 0.5, "memory_mb_per_rollout": 64}
                tg.start_soon(lambda: run(tasks, agent=WaitsForGo(str(go)), executor="ray", db=db,
                                          run_id="live", executor_options=asks))
                await _until(lambda: _store_has(db, "SELECT 1 FROM events WHERE kind = 'tool_result'"))
                seen_live.append(_store_has(db, "SELECT 1 FROM rollouts WHERE status = 'running'"))
                go.write_text("go")

    anyio.run(main)
    assert seen_live == [True]  # the tool result was in the store before the rollout finished
    with Store(db) as store:
        [row] = store.rollouts("live")
        assert row["failure_kind"] == "ok" and row["reward"] == 1.0
        note = next(e for e in store.events(row["id"]) if e["kind"] == "note")["payload"]
    assert note["pid"] != os.getpid()
    assert note["resources"]["CPU"] == 0.5 and note["resources"]["memory"] == 64 * 1024 * 1024


def test_cancelling_the_run_cancels_the_remote_rollout_and_closes_its_sandbox(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path, steps=[]))
    root = tmp_path / "workspaces"
    cancelled = tmp_path / "cancelled"

    async def main():
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: run(tasks, agent=WaitsForGo(str(tmp_path / "never"), str(cancelled)),
                                          executor="ray", db=db, run_id="cancel", sandbox="local",
                                          sandbox_config=SandboxConfig(root=str(root))))
                await _until(lambda: _store_has(db, "SELECT 1 FROM events WHERE kind = 'tool_result'"))
                assert [p for p in root.rglob("sb-*")], "the sandbox should exist on the worker now"
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert cancelled.exists() and int(cancelled.read_text()) != os.getpid()  # the worker saw the cancellation
    assert [p for p in root.rglob("sb-*")] == []  # and closed the sandbox before the run returned
    with Store(db) as store:
        [row] = store.rollouts("cancel")
        assert row["failure_kind"] == "cancelled" and row["scored"] == 0


def in_tmp(tmp_path: Path) -> dict:
    """A killed worker leaves its workspace (the next sandbox start there sweeps it): keep it in tmp."""
    return {"sandbox": "local", "sandbox_config": SandboxConfig(root=str(tmp_path / "workspaces"))}


def test_a_killed_worker_loses_no_rollout(tmp_path, db):
    for name in ("a", "b", "c"):
        make_task(tmp_path / "tasks", name, steps=[])
    tasks = tasks_in(tmp_path / "tasks")
    marker = tmp_path / "killed"
    result = run_sync(tasks, agent=KillsItsWorker(str(marker), os.getpid()), executor="ray", concurrency=3,
                      db=db, run_id="kill", backoff_s=0.01, **in_tmp(tmp_path))
    assert sorted((o.task_id, o.kind.value, o.passed) for o in result.outcomes) == \
        [("a", "ok", True), ("b", "ok", True), ("c", "ok", True)]
    [victim] = [o for o in result.outcomes if o.attempts > 1]  # exactly one worker was killed
    assert victim.attempts == 2
    dead_pid = int(marker.read_text())
    assert dead_pid != os.getpid()
    with Store(db) as store:
        row = store.rollout(victim.rollout_id)
        assert row["status"] == "finished" and row["attempt"] == 1 and row["failure_kind"] == "ok"
        lost, retry = store.events(victim.rollout_id, attempt=0), store.events(victim.rollout_id, attempt=1)
    # what the lost attempt streamed before dying stays recorded, then why it ended
    assert [e["kind"] for e in lost] == ["note", "tool_call", "tool_result", "error"]
    assert lost[0]["payload"]["pid"] == dead_pid
    assert lost[-1]["payload"]["kind"] == "sandbox_error" and "worker lost" in lost[-1]["payload"]["message"]
    assert retry[0]["payload"]["pid"] != dead_pid  # the retry ran in another worker process


def test_a_rollout_that_keeps_killing_workers_ends_unscored_as_infrastructure(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path, steps=[]))
    result = run_sync(tasks, agent=KillsItsWorker(str(tmp_path / "m"), os.getpid(), once=False),
                      executor="ray", db=db, run_id="doomed", retries=1, backoff_s=0.01, **in_tmp(tmp_path))
    [o] = result.outcomes
    assert o.kind.value == "sandbox_error" and o.attempts == 2 and o.reward is None and o.passed is None
    assert "worker lost" in o.error
    with Store(db) as store:
        [row] = store.rollouts("doomed")
        assert row["status"] == "finished" and row["scored"] == 0 and row["attempt"] == 1


class SlowWriter:
    """A store writer that takes 10 ms per batch and measures how far the rollout ran ahead of it."""

    def __init__(self, progress: Path):
        self.progress = progress
        self.rows: list[tuple] = []
        self.max_lead = 0

    async def events(self, rows):
        self.rows.extend(rows)
        produced = int(self.progress.read_text()) if self.progress.exists() else 0
        self.max_lead = max(self.max_lead, produced - len(self.rows))
        await anyio.sleep(0.01)


def test_a_slow_writer_holds_the_remote_rollout_back(tmp_path):
    [task] = tasks_in(make_task(tmp_path, steps=[]))
    progress = tmp_path / "progress"
    writer = SlowWriter(progress)
    n, buffer_events, batch_events, backpressure = 1500, 50, 10, 2

    async def main():
        with anyio.fail_after(90):
            async with RayExecutor(buffer_events=buffer_events, batch_events=batch_events,
                                   backpressure=backpressure) as executor:
                job = RolloutJob(task=task, agent=Chatty(n, str(progress)), agent_name=None, agent_options={},
                                 sandbox="local", sandbox_config=SandboxConfig(), rollout_id="bp", attempt=0)
                return await executor.attempt(job, Recorder(writer, "bp", 0))

    res = anyio.run(main)
    assert res.kind.value == "ok" and res.verdict.passed
    notes = [r for r in writer.rows if r[3] == "note"]
    assert [r[2] for r in writer.rows] == list(range(len(writer.rows))) and len(notes) == n
    # unbounded, the agent would have made all 1500 events before the writer took 200 of them
    bound = buffer_events + batch_events * (backpressure + 2) + 10
    assert 0 < writer.max_lead <= bound, writer.max_lead
