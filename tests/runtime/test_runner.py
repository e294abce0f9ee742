"""The runner end to end: real local sandboxes, real MCP tool servers, a real SQLite store."""

import anyio
import pytest
from clawsdk_plugins.sandboxes.local import LocalSandbox

from clawsdk import Agent, Store, load_tasks, run_sync
from clawsdk.errors import ModelError
from clawsdk.runtime.runner import RunConflict
from tests.conftest import EXAMPLES, make_task


def tasks_in(path):
    loaded = load_tasks(str(path))
    assert not loaded.errors, loaded.errors
    return loaded.tasks


class Raises(Agent):
    name = "raises"

    async def run(self, ctx):
        await ctx.tools.call("write", {"path": "done.txt", "content": "done"})
        raise RuntimeError("agent bug")


class Hangs(Agent):
    name = "hangs"

    async def run(self, ctx):
        await anyio.sleep(60)


class ModelDown(Agent):
    name = "model-down"
    calls = 0

    async def run(self, ctx):
        ModelDown.calls += 1
        raise ModelError("upstream returned 503")


class Greedy(Agent):
    name = "greedy"

    async def run(self, ctx):
        while True:
            await ctx.tools.call("ls", {})


def test_oracle_passes_every_example_and_records_ordered_events(db):
    tasks = tasks_in(EXAMPLES)
    result = run_sync(tasks, agent="oracle", samples=2, concurrency=8, db=db, run_id="ex")
    assert len(result.outcomes) == 2 * len(tasks)
    assert all(o.kind.value == "ok" and o.passed for o in result.outcomes), \
        [(o.task_id, o.kind, o.error) for o in result.outcomes if not o.passed]
    with Store(db) as store:
        rows = store.rollouts("ex")
        assert len(rows) == 2 * len(tasks) and all(r["reward"] == 1.0 for r in rows)
        for r in rows:
            events = store.events(r["id"])
            assert [e["seq"] for e in events] == list(range(len(events)))
            calls = [e for e in events if e["kind"] == "tool_call"]
            results = [e for e in events if e["kind"] == "tool_result"]
            assert len(calls) == len(results) == r["n_tool_calls"] > 0
            assert any(e["kind"] == "verifier" for e in events)
            verdict = store.verdict(r["id"])
            assert verdict["passed"] == 1 and verdict["subscores"]


def test_agent_errors_are_scored_on_what_the_agent_left(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path))
    [o] = run_sync(tasks, agent=Raises(), db=db).outcomes
    assert o.kind.value == "agent_error" and "agent bug" in o.error
    assert o.reward == 1.0  # it wrote done.txt before failing: the workspace is what counts


def test_agent_timeout_is_cut_and_recorded(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path, extra={"limits": {"timeout_s": 0.5}}))
    [o] = run_sync(tasks, agent=Hangs(), db=db).outcomes
    assert o.kind.value == "agent_timeout" and o.reward == 0.0 and o.passed is False


def test_model_errors_are_retried_then_unscored(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path))
    ModelDown.calls = 0
    result = run_sync(tasks, agent=ModelDown(), db=db, retries=2, backoff_s=0.01, run_id="m")
    [o] = result.outcomes
    assert ModelDown.calls == 3 and o.attempts == 3
    assert o.kind.value == "model_error" and o.reward is None and o.passed is None
    with Store(db) as store:
        [row] = store.rollouts("m")
        assert row["scored"] == 0 and row["reward"] is None and row["attempt"] == 2
        errors_per_attempt = store.query("SELECT attempt, COUNT(*) n FROM events WHERE kind='error' GROUP BY attempt")
        assert [r["attempt"] for r in errors_per_attempt] == [0, 1, 2]


def test_sandbox_failure_is_retried_and_the_retry_counts(tmp_path, db, flaky_sandbox):
    tasks = tasks_in(make_task(tmp_path))
    [o] = run_sync(tasks, agent="oracle", sandbox=flaky_sandbox, db=db, backoff_s=0.01, run_id="f").outcomes
    assert o.kind.value == "ok" and o.passed and o.attempts == 2
    with Store(db) as store:
        [row] = store.rollouts("f")
        assert row["attempt"] == 1 and row["failure_kind"] == "ok"
        first = store.events(row["id"], attempt=0)
        assert first[-1]["kind"] == "error" and "disk went away" in first[-1]["payload"]["message"]


def test_verifier_timeout_is_not_the_agents_zero(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path, checks=[{"type": "command", "run": "sleep 20"}],
                               extra={"limits": {"verifier_timeout_s": 0.5}}))
    [o] = run_sync(tasks, agent="oracle", db=db, retries=0).outcomes
    assert o.kind.value == "verifier_timeout" and o.reward is None


def test_tool_call_budget_ends_the_rollout(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path, extra={"limits": {"max_tool_calls": 5}}))
    [o] = run_sync(tasks, agent=Greedy(), db=db).outcomes
    assert o.kind.value == "agent_error" and "budget of 5" in o.error


def test_rerun_of_a_finished_run_does_nothing_new(tmp_path, db):
    tasks = tasks_in(make_task(tmp_path))
    run_sync(tasks, agent="oracle", samples=3, db=db, run_id="r")
    again = run_sync(tasks, agent="oracle", samples=3, db=db, run_id="r")
    assert again.skipped == 3 and again.outcomes == []
    with Store(db) as store:
        assert len(store.rollouts("r")) == 3


def test_resume_refuses_a_changed_task_or_agent(tmp_path, db):
    folder = make_task(tmp_path)
    run_sync(tasks_in(folder), agent="oracle", db=db, run_id="c")
    (folder / "workspace" / "notes.md").write_text("changed\n")
    with pytest.raises(RunConflict, match="changed since run c"):
        run_sync(tasks_in(folder), agent="oracle", db=db, run_id="c")
    with pytest.raises(RunConflict, match="started with agent"):
        run_sync(tasks_in(folder), agent="scripted", db=db, run_id="c")


def test_resume_refuses_other_agent_options(tmp_path, db):
    """One run's score comes from one configuration: a resume at another temperature is refused."""
    tasks = tasks_in(make_task(tmp_path))
    calls = [{"tool": "ls", "args": {}}]
    run_sync(tasks, agent="scripted", agent_options={"calls": calls}, db=db, run_id="o", samples=1)
    with pytest.raises(RunConflict, match=r"other agent options \(stop_on_error differ\)"):
        run_sync(tasks, agent="scripted", agent_options={"calls": calls, "stop_on_error": True}, db=db,
                 run_id="o", samples=2)
    again = run_sync(tasks, agent="scripted", agent_options={"calls": calls}, db=db, run_id="o", samples=2)
    assert again.skipped == 1 and len(again.outcomes) == 1


def test_unreadable_tasks_are_recorded_with_the_run(tmp_path, db):
    make_task(tmp_path, "good")
    bad = make_task(tmp_path, "bad")
    (bad / "task.yaml").write_text("instruction: [")
    loaded = load_tasks(str(tmp_path))
    run_sync(loaded.tasks, agent="oracle", db=db, run_id="e", task_errors=loaded.errors)
    with Store(db) as store:
        [err] = store.task_errors("e")
        assert err["path"].endswith("bad/task.yaml") and "invalid YAML" in err["message"]
        assert [r["task_id"] for r in store.rollouts("e")] == ["good"]


def test_no_workspace_is_left_behind(tmp_path, db, monkeypatch):
    root = tmp_path / "ws"
    monkeypatch.setenv("CLAWSDK_SANDBOX_ROOT", str(root))
    tasks = tasks_in(make_task(tmp_path))
    run_sync(tasks, agent=Raises(), samples=4, db=db, sandbox="local")
    leftovers = [p for p in root.rglob("*") if p.name.startswith("sb-")]
    assert leftovers == []


def test_the_end_of_the_agents_turn_is_not_on_the_verifiers_clock(tmp_path, db, monkeypatch):
    """end_turn cleans what the agent left; a tree built to be slow to clean ran the verification out of
    time (unscored). It runs before the verifier's clock starts, within a budget of its own."""
    original = LocalSandbox.end_turn

    async def slow(self):
        await anyio.sleep(1.5)  # what a slow workspace costs, longer than the whole verifier may take
        return await original(self)

    monkeypatch.setattr(LocalSandbox, "end_turn", slow)
    tasks = tasks_in(make_task(tmp_path, extra={"limits": {"verifier_timeout_s": 1}}))
    [o] = run_sync(tasks, agent="oracle", sandbox="local", db=db, retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 1.0), o


def test_events_recorded_elsewhere_keep_the_links_between_them_when_renumbered():
    """A Ray worker numbers its events from 0; the driver's recorder numbers them after its own, so the seq a
    result names as its call (and a reply as its request) must follow, or results pair with the wrong call."""
    import json

    import anyio

    from clawsdk.store.recorder import Recorder

    async def main():
        worker = Recorder(None, "r", keep=True)
        call = await worker.record("tool_call", {"tool": "exec", "args": {}})
        asked = await worker.record("model_request", {"messages": []})
        await worker.record("tool_result", {"tool": "exec", "call": call, "content": "out"})
        await worker.record("model_response", {"message": {"role": "assistant", "content": "x"}, "request": asked})
        rows = [("r", 0, e["seq"], e["kind"], e["ts"], e["duration_ms"], json.dumps(e["payload"]))
                for e in worker.kept]
        driver = Recorder(None, "r", keep=True)
        await driver.record("note", {"event": "the driver's own, first"})
        await driver.record_rows(rows)
        return driver.kept

    kept = anyio.run(main)
    by_seq = {e["seq"]: e for e in kept}
    result = next(e for e in kept if e["kind"] == "tool_result")
    reply = next(e for e in kept if e["kind"] == "model_response")
    assert by_seq[result["payload"]["call"]]["kind"] == "tool_call"
    assert by_seq[reply["payload"]["request"]]["kind"] == "model_request"
