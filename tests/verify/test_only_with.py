"""Credit for what the agent did not do: "the inputs are unchanged", "no housekeeping commits", a file that
exists. An agent that did nothing scored 0.20 to 0.25 on five example tasks that way, and the untrained
model's mean reward in `make demo` was that credit (found by a read-only audit with cheap agents)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import run_sync
from clawsdk.tasks.sources import load_tasks
from clawsdk.verify.checks import parse_checks

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def test_an_agent_that_does_nothing_scores_0_on_every_example_task(tmp_path):
    tasks = load_tasks(str(EXAMPLES)).tasks
    r = run_sync(tasks, agent=ScriptedAgent([]), db=tmp_path / "idle.db", sandbox="local", retries=0, concurrency=4)
    assert {o.task_id: o.reward for o in r.outcomes} == {t.id: 0.0 for t in tasks}
    assert all(o.kind.value == "ok" for o in r.outcomes)


def test_a_check_that_counts_only_with_another_scores_0_until_that_one_passes(tmp_path):
    from clawsdk.tasks.model import Task

    def task(content: str) -> Task:
        return Task.model_validate({"id": "t", "instruction": "Write out.txt saying done; keep in.txt.",
                                    "workspace": [{"path": "in.txt", "text": "keep\n"}],
                                    "verifier": {"checks": [
                                        {"type": "text_contains", "name": "done", "path": "out.txt", "text": content},
                                        {"type": "text_contains", "name": "kept", "path": "in.txt", "text": "keep",
                                         "only_with": "done"}]}})

    wrote = ScriptedAgent([{"tool": "write", "args": {"path": "out.txt", "content": "done\n"}}])
    [idle] = run_sync([task("done")], agent=ScriptedAgent([]), db=tmp_path / "a.db", sandbox="local").outcomes
    [good] = run_sync([task("done")], agent=wrote, db=tmp_path / "b.db", sandbox="local").outcomes
    assert (idle.reward, good.reward) == (0.0, 1.0)


def test_only_with_must_name_a_check_before_it():
    with pytest.raises(ValueError, match=r"verifier.checks\[0\].only_with: 'later' names no check before this one"):
        parse_checks([{"type": "file_exists", "path": "a", "only_with": "later"},
                      {"type": "file_exists", "name": "later", "path": "b"}])
