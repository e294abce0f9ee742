"""The real Claude Code and Codex CLIs (installed from npm by `clawsdk <agent> install`) work two example tasks under
bwrap and docker against the scripted model server, through the recording proxy, recorded and scored.

Needs `clawsdk claude-code install` and `clawsdk codex install` (.clawsdk/<agent>, or CLAWSDK_<AGENT>_HOME):
skipped without them, a failure under CI=true; likewise bwrap and docker.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from clawsdk_plugins.agents.claude_code import ClaudeCodeAgent
from clawsdk_plugins.agents.codex import CodexAgent

from clawsdk.proxy import serving
from clawsdk.runtime.runner import run
from clawsdk.store.store import Store
from clawsdk.tasks.sources import load_tasks
from tests.cli_agent.conftest import installed_home
from tests.cli_agent.scripted_model import PlannedModel, plan_for, tool_call
from tests.sandbox.sandbox_backends import skip_unless_available

REPO = Path(__file__).resolve().parents[2]
TASKS = ["access-log-report", "eml-contacts"]
AGENTS = {"claude-code": ClaudeCodeAgent, "codex": CodexAgent}
#: each harness's own tools for clawsdk's read, write and exec
NATIVE = {"claude-code": {"read": "Read", "write": "Write", "exec": "Bash"},
          "codex": {"read": "exec_command", "write": "exec_command", "exec": "exec_command"}}
#: a file of the harness's own, as the CLI keeps it in a project folder: it must be gone before scoring
OWN = {"claude-code": ".claude/settings.local.json", "codex": ".codex/state.json"}

pytestmark = pytest.mark.slow


class Watched:
    """The agent, and what each rollout's workspace holds once the agent has cleaned up after its CLI."""

    def __init__(self, cls, **options):
        class Agent(cls):
            async def _clean(inner, sandbox, before):
                removed = await super()._clean(sandbox, before)
                self.left[sandbox.workspace_path, len(self.left)] = (before, await inner._listing(sandbox))
                return removed

        self.left: dict = {}
        self.agent = Agent(**options)


def _run(name: str, sandbox: str, stream: bool | None, db: Path, run_id: str):
    tasks = [load_tasks(str(REPO / "examples" / "tasks" / t)).tasks[0] for t in TASKS]
    workspace = "/root/.openclaw/workspace"
    own = {"claude-code": tool_call(99, "Write", {"file_path": f"{workspace}/{OWN[name]}", "content": "{}"}),
           "codex": tool_call(99, "exec_command", {"cmd": f"mkdir -p .codex && echo {{}} > {OWN[name]}"})}[name]
    model = PlannedModel({t.instruction.strip().splitlines()[0]: [*plan_for(name, t, workspace), own] for t in tasks})
    home = installed_home(AGENTS[name].package)

    async def main():
        async with serving(model) as url:
            watched = Watched(AGENTS[name], model="planned-7b", base_url=url + "/v1", home=home, stream=stream)
            result = await run(tasks, agent=watched.agent, db=db, run_id=run_id, sandbox=sandbox, retries=0,
                               concurrency=2)
            return result, watched

    result, watched = anyio.run(main)
    with Store(db) as s:
        rows = {r["task_id"]: r for r in s.rollouts(run_id)}
        events = {tid: s.events(r["id"]) for tid, r in rows.items()}
    return tasks, result, watched, rows, events, model


def _check(name, tasks, result, watched, rows, events):
    assert sorted((o.task_id, o.kind.value, o.reward) for o in result.outcomes) == \
        [(t, "ok", 1.0) for t in sorted(TASKS)], [o.error for o in result.outcomes]
    for task in tasks:
        evs = events[task.id]
        calls = [(e["kind"], e["payload"]["tool"]) for e in evs if e["kind"] in ("tool_call", "tool_result")]
        expected = []
        for tool in [*(c.tool for c in task.solution), "write"]:  # the solution, then the harness's own file
            expected += [("tool_call", NATIVE[name][tool]), ("tool_result", NATIVE[name][tool])]
        assert calls == expected, calls
        results = [e["payload"] for e in evs if e["kind"] == "tool_result"]
        assert not any(r["is_error"] for r in results), results
        kinds = [e["kind"] for e in evs if e["kind"] in ("model_request", "model_response", "tool_call", "tool_result")]
        assert kinds[:4] == ["model_request", "model_response", "tool_call", "tool_result"], kinds
        first = next(e["payload"] for e in evs if e["kind"] == "model_request")
        assert first["protocol"] == {"claude-code": "anthropic", "codex": "openai-responses"}[name]
        assert task.instruction.strip().splitlines()[0] in str(first["messages"])
        assert rows[task.id]["n_tool_calls"] == len(task.solution) + 1
        cleaned = [e["payload"]["cleaned"] for e in evs if "cleaned" in e["payload"]]
        assert cleaned == [[OWN[name].split("/")[0]]]
        exec_event = next(e["payload"] for e in evs if e["kind"] == "sandbox_exec")
        assert exec_event["exit_code"] == 0 and exec_event["boot_s"] is not None
    # nothing of the harness is left in the workspace it leaves to the verifier: every new entry is a deliverable
    for before, after in watched.left.values():
        new = {p.split("/", 1)[0] for p in after - before}
        assert not {p for p in new if p.startswith(".")} and not new & {"CLAUDE.md", "AGENTS.md"}, new


@pytest.mark.parametrize("name", sorted(AGENTS))
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_cli_agent_works_two_example_tasks_under_bwrap(name, stream, db):
    """`streamed`: the upstream streams as the CLI asks; `whole`: the upstream answers whole and the proxy streams
    it to the CLI (the CLIs always ask for a stream)."""
    skip_unless_available("bwrap")
    tasks, result, watched, rows, events, model = _run(name, "bwrap", None if stream else False, db, "b1")
    _check(name, tasks, result, watched, rows, events)
    assert all(bool(r.get("stream")) is stream for r in model.requests)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_cli_agent_works_two_example_tasks_under_docker(name, db):
    skip_unless_available("docker")
    tasks, result, watched, rows, events, _ = _run(name, "docker", None, db, "d1")
    _check(name, tasks, result, watched, rows, events)
