"""Real OpenClaw's rollouts export: it sends its history back in its own way (call ids renamed, arguments written
out again), and every assistant turn of it is still one the model wrote, so none is dropped as unverified.

Needs `clawsdk openclaw install` (CLAWSDK_OPENCLAW_HOME): skipped without it, a failure under CI=true."""

from __future__ import annotations

import json

import pytest

from clawsdk.data.export import export_sft, load_rows
from clawsdk.data.select import Selection, select
from clawsdk.store.store import Store
from clawsdk.tasks.sources import load_tasks
from tests.cli_agent.scripted_model import tool_call
from tests.openclaw.test_openclaw_agent import EXAMPLE, _rollout

pytestmark = pytest.mark.slow


def test_an_openclaw_rollout_exports_the_turns_its_model_wrote(openclaw_home, db, tmp_path):
    (task,) = load_tasks(str(EXAMPLE)).tasks
    plan = [tool_call(i, c.tool, c.args) for i, c in enumerate(task.solution or [])]  # read, write, exec
    plan[0]["content"] = "  Let me read the log first.\n\nThen I write a script.  \n"
    plan[1]["content"] = "Writing the script now."
    outcome, _row, _events, _model = _rollout(task, plan, db, "oc-export", "local", openclaw_home)
    assert (outcome.kind.value, outcome.reward) == ("ok", 1.0), outcome.error
    with Store(db) as store:
        result = select(store, Selection())
        assert [c.reason for c in result.candidates] == ["kept"]
        exp = export_sft(store, result, tmp_path / "out", name="oc", formats=("jsonl",))
    (exported,) = load_rows(exp.path)
    turns = [m for m in exported["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in turns] == [plan[0]["content"], plan[1]["content"], None, "Done."]
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for m in turns[:3]
             for c in m["tool_calls"]]
    assert calls == [(c.tool, c.args) for c in task.solution]
    results = [m for m in exported["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [m["tool_calls"][0]["id"] for m in turns[:3]]
    assert '"total_requests"' in results[2]["content"]
