"""The `openclaw` agent: real OpenClaw (the documented install) against a planned model server, recorded and scored.

Needs `clawsdk openclaw install` (the prefix .clawsdk/openclaw, or CLAWSDK_OPENCLAW_HOME): skipped
without it, a failure under CI=true.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from clawsdk_plugins.agents.openclaw.agent import OpenClawAgent
from clawsdk_plugins.agents.openclaw.install import find_install, missing_message

from clawsdk.proxy import serving
from clawsdk.runtime.runner import run
from clawsdk.store.store import Store
from clawsdk.tasks.sources import load_tasks
from tests.cli_agent.scripted_model import PlannedModel, tool_call

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tasks" / "access-log-report"
CLAWGYM = REPO / "tests" / "fixtures" / "openclaw" / "clawgym"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def openclaw_home() -> str:
    home = os.environ.get("CLAWSDK_OPENCLAW_HOME") or str(REPO / ".clawsdk" / "openclaw")
    if find_install(home) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(missing_message(home))
        pytest.skip(missing_message(home))
    return home


def _rollout(task, plan, db, run_id, sandbox, home):
    model = PlannedModel(plan)

    async def main():
        async with serving(model) as url:
            agent = OpenClawAgent(model="planned-7b", base_url=url + "/v1", home=home)
            return await run([task], agent=agent, db=db, run_id=run_id, sandbox=sandbox, retries=0)

    (outcome,) = anyio.run(main).outcomes
    with Store(db) as s:
        row = s.rollouts(run_id)[0]
        events = s.events(row["id"])
    return outcome, row, events, model


def _tool_events(events):
    return [(e["kind"], e["payload"]["tool"]) for e in events if e["kind"] in ("tool_call", "tool_result")]


def test_openclaw_works_an_example_task_and_its_tool_calls_are_recorded_in_order(openclaw_home, db):
    (task,) = load_tasks(str(EXAMPLE)).tasks
    plan = [tool_call(i, c.tool, c.args) for i, c in enumerate(task.solution or [])]  # read, write, exec
    outcome, row, events, model = _rollout(task, plan, db, "oc1", "local", openclaw_home)

    assert (outcome.kind.value, outcome.reward) == ("ok", 1.0), outcome.error
    # the instruction reached the model, with OpenClaw's own tools and no tool-search meta tool
    first = model.requests[0]
    assert task.instruction.strip().splitlines()[0] in str(first["messages"])
    names = {t["function"]["name"] for t in first["tools"]}
    assert {"read", "write", "exec"} <= names and not names & {"tool_search", "web_fetch", "memory_search"}
    assert _tool_events(events) == [("tool_call", "read"), ("tool_result", "read"), ("tool_call", "write"),
                                    ("tool_result", "write"), ("tool_call", "exec"), ("tool_result", "exec")]
    kinds = [e["kind"] for e in events if e["kind"] in ("model_request", "model_response", "tool_call",
                                                       "tool_result")]
    assert kinds[:6] == ["model_request", "model_response", "tool_call", "tool_result", "model_request",
                         "model_response"]
    calls = [e["payload"] for e in events if e["kind"] == "tool_call"]
    assert calls[1]["args"]["path"] == "log_report.py"
    assert calls[2]["args"]["command"].startswith("python3 log_report.py")
    results = [e["payload"] for e in events if e["kind"] == "tool_result"]
    assert '"total_requests"' in results[2]["content"]  # exec's output: the report it printed
    assert (row["n_tool_calls"], row["n_model_calls"], row["agent"], row["model"]) == (3, 4, "openclaw", "planned-7b")


def test_openclaw_on_a_clawgym_task_under_bwrap_reaches_the_proxy_and_leaves_no_files_of_its_own(openclaw_home, db):
    from clawsdk_plugins.sandboxes.bwrap import available

    why = available()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"bwrap is required in CI: {why}")
        pytest.skip(why)
    (task,) = load_tasks(f"clawgym:{CLAWGYM}").tasks
    plan = [tool_call(0, "exec", {"command": "pwd && mkdir -p out && tail -n +2 input/orders.csv | wc -l > "
                                             "out/count.txt && cat out/count.txt"}),
            # what OpenClaw's gateway mode writes for itself; the agent must remove it before scoring
            tool_call(1, "write", {"path": "SOUL.md", "content": "# Soul\n"}),
            tool_call(2, "write", {"path": ".openclaw/workspace-state.json", "content": "{}"})]
    outcome, row, events, _model = _rollout(task, plan, db, "oc2", "bwrap", openclaw_home)

    assert (outcome.kind.value, outcome.reward) == ("ok", 1.0), outcome.error
    results = [e["payload"] for e in events if e["kind"] == "tool_result"]
    assert results[0]["content"].split()[:2] == ["/root/.openclaw/workspace", "3"]  # the ClawGym path, inside
    assert _tool_events(events) == [("tool_call", "exec"), ("tool_result", "exec"), ("tool_call", "write"),
                                    ("tool_result", "write"), ("tool_call", "write"), ("tool_result", "write")]
    cleaned = [e["payload"]["cleaned"] for e in events if "cleaned" in e["payload"]]
    assert cleaned == [[".openclaw", "SOUL.md"]]
    assert row["n_tool_calls"] == 3
