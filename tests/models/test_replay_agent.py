"""The replay agent re-executes a stored rollout's tool calls in a fresh sandbox."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clawsdk.errors import PluginError
from clawsdk.plugins import get_registry
from clawsdk.runtime.runner import run
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def run_sync(tasks, **kwargs):
    async def go():
        with anyio.fail_after(120):
            return await run(tasks, **kwargs)
    return anyio.run(go)


def tool_calls(db, rollout_id):
    with Store(db) as store:
        return [(e["payload"]["tool"], e["payload"]["args"]) for e in store.events(rollout_id) if e["kind"] == "tool_call"]


def test_replay_reproduces_an_oracle_rollout(tmp_path):
    db = tmp_path / "s.db"
    task = load_task(EXAMPLES / "mailing-list-dedupe")
    (orig,) = run_sync([task], agent="oracle", db=db, run_id="orig").outcomes
    assert orig.passed

    by_id = run_sync([task], agent="replay", agent_options={"rollout": orig.rollout_id[:8], "db": str(db)},
                     db=db, run_id="again")
    (replayed,) = by_id.outcomes
    assert replayed.passed and replayed.reward == orig.reward
    assert tool_calls(db, replayed.rollout_id) == tool_calls(db, orig.rollout_id)
    with Store(db) as store:
        notes = [e["payload"] for e in store.events(replayed.rollout_id) if e["kind"] == "note"]
    assert notes[0]["event"] == "replay" and notes[0]["rollout"] == orig.rollout_id
    assert not [n for n in notes if n["event"] == "replay_divergence"]

    # run=RUN_ID finds each task's rollout in that run
    (by_run,) = run_sync([task], agent="replay", agent_options={"run": "orig", "db": str(db)}, db=db,
                         run_id="again-by-run").outcomes
    assert by_run.passed


def test_replay_refuses_a_rollout_of_another_task(tmp_path):
    db = tmp_path / "s.db"
    (orig,) = run_sync([load_task(EXAMPLES / "mailing-list-dedupe")], agent="oracle", db=db).outcomes
    (other,) = run_sync([load_task(EXAMPLES / "eml-contacts")], agent="replay",
                        agent_options={"rollout": orig.rollout_id, "db": str(db)}, db=db).outcomes
    assert other.kind.value == "agent_error" and "mailing-list-dedupe" in other.error


def test_replay_options_are_checked_up_front(tmp_path):
    make = get_registry().get("agents", "replay")
    with pytest.raises(ValueError, match="exactly one of"):
        make(db=str(tmp_path / "none.db"))
    with pytest.raises(FileNotFoundError, match="no clawsdk store"):
        make(rollout="r123", db=str(tmp_path / "none.db"))
    with pytest.raises(PluginError):
        get_registry().get("agents", "no-such-agent")
