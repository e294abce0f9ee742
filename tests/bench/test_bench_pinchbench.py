"""PinchBench as a benchmark: `clawsdk bench run` scores what each task's own grade() gives."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest
import yaml
from clawsdk_plugins.commands.bench import make_group
from click.testing import CliRunner

from clawsdk.bench.report import build_report
from clawsdk.bench.results import load_run
from clawsdk.hookspecs import hookimpl
from clawsdk.models.base import ChatResponse, Model
from clawsdk.plugins import register_plugin
from clawsdk.store.store import Store
from clawsdk.tasks.sources import load_tasks
from tests.conftest import FIXTURES, SHARED_DATA, needs_shared_data

JUDGE_SCORE = 0.75

# what the scripted agent writes in every task's workspace: right for some criteria, wrong for others
WRITES = {
    "app/main.py": 'print("Hello from Lantern")\n',
    "README.md": "# Lantern\n\nA small demo.\n",
    ".gitignore": "__pycache__/\n",  # no *.log: one criterion of task_02 fails
    "sales_summary.md": ("# Sales summary\n\nTotal revenue: $5,550. Total margin: $2,064.\n"
                         "Top region: North\nTotal team costs: $4,210.\n"),  # East is the top region
}
SAMPLE_WRITES = {
    "src/main.py": 'print("Hello, world!")\n',
    "README.md": "# Demo Project\n\nA small demo.\n",
    ".gitignore": "*.log\n",  # no __pycache__: one criterion of task_09 fails
    "data_summary.md": ("# Data summary\n\nTotal revenue: $119,900. Total profit: $47,960.\n"
                        "The top region by revenue is East.\nTotal Q1 expenses: $15,430.\n"),
}
# (tasks, what the agent writes, a task it scores partially, the hybrid task)
DATA = [
    pytest.param(FIXTURES / "pinchbench", WRITES, "task_02_project_layout", "task_03_sales_summary", id="fixtures"),
    pytest.param(SHARED_DATA / "pinchbench-sample", SAMPLE_WRITES, "task_09_files", "task_18_spreadsheet_summary",
                 marks=needs_shared_data, id="sample"),
]


class FixedJudge(Model):
    """A judge that gives every rubric rule the same score (the rubric plumbing is tested elsewhere)."""

    name = "fixed-judge"

    def __init__(self, name: str | None = None, **_: object):
        pass

    async def chat(self, messages, tools=None, **params):
        text = messages[-1]["content"]
        rules = json.loads(re.search(r"# Rules to score\n\n(\[.*?\n\])", text, re.S).group(1))
        answer = {"scores": {r["name"]: {"score": JUDGE_SCORE, "reason": "fixed"} for r in rules}}
        return ChatResponse(message={"role": "assistant", "content": json.dumps(answer)})


def _judge_plugin() -> types.ModuleType:
    mod = types.ModuleType("bench_test_judge")

    @hookimpl
    def register_models(register):
        register("fixedjudge", FixedJudge)

    mod.register_models = register_models
    return mod


def own_grade(md: Path, workspace: Path) -> dict[str, float]:
    """Run the task's grade() exactly as PinchBench does: its own code, on a plain folder."""
    text = md.read_text()
    section = text.split("## Automated Checks", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    ns: dict = {}
    exec(compile(code, str(md), "exec"), ns)  # the benchmark's own grader, on our copy
    transcript = [{"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "task"}]}},
                  {"type": "message", "message": {"role": "assistant", "content": [
                      {"type": "toolCall", "id": "c0", "name": "write", "arguments": {"path": "README.md"}}]}}]
    return ns["grade"](transcript, str(workspace))


@pytest.mark.parametrize("pinch, writes, partial_id, hybrid_id", DATA)
def test_bench_run_on_pinchbench_scores_what_its_grade_gives(tmp_path, db, monkeypatch, pinch, writes, partial_id,
                                                             hybrid_id):
    loaded = load_tasks(f"pinchbench:{pinch}")
    assert len(loaded.tasks) == 3 and not loaded.errors
    register_plugin(_judge_plugin())
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"tool": "write", "args": {"path": p, "content": c}} for p, c in writes.items()]))

    # what each task's own grade() says about that workspace, and the weighting its frontmatter gives
    expected: dict[str, tuple[float, dict]] = {}
    for md in sorted(pinch.glob("task_*.md")):
        task = next(t for t in loaded.tasks if t.provenance.get("path", "").endswith(md.name)
                    or t.id in md.read_text().split("---")[1])
        ws = tmp_path / "ws" / task.id
        for f in task.workspace:
            (ws / f.path).parent.mkdir(parents=True, exist_ok=True)
            (ws / f.path).write_bytes(f.data)
        for p, c in writes.items():
            (ws / p).parent.mkdir(parents=True, exist_ok=True)
            (ws / p).write_text(c)
        grades = own_grade(md, ws)
        auto = sum(grades.values()) / len(grades)
        front = yaml.safe_load(md.read_text().split("---")[1])
        if front["grading_type"] == "hybrid":
            w = front.get("grading_weights") or {"automated": 0.5, "llm_judge": 0.5}
            score = (w["automated"] * auto + w["llm_judge"] * JUDGE_SCORE) / (w["automated"] + w["llm_judge"])
        else:
            score = auto
        expected[task.id] = (score, grades)
    assert 0 < expected[partial_id][0] < 1  # a partial score, not just all-or-nothing

    cli = make_group()
    runner = CliRunner()
    args = ["run", f"pinchbench:{pinch}", "--agent", "scripted", "--agent-opt", f"script={script}", "-k", "2",
            "--run-id", "pb", "--db", str(db), "--retries", "0"]
    # no judge configured: the hybrid task cannot be scored; it is reported unscored, never a zero
    monkeypatch.delenv("CLAWSDK_JUDGE", raising=False)
    res = runner.invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    with Store(db) as store:
        r = build_report(load_run(store, "pb"))
    assert r["status"] == "partial" and r["unscored_kinds"] == {"verifier_error": 2}
    hybrid = next(t for t in r["tasks"] if t["id"] == hybrid_id)
    assert hybrid["n"] == 0 and hybrid["mean_score"] is None

    # with a judge, resuming the run scores the missing samples
    monkeypatch.setenv("CLAWSDK_JUDGE", "fixedjudge:v1")
    res = runner.invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "retried 2 sample(s)" in res.output
    with Store(db) as store:
        data = load_run(store, "pb")
    r = build_report(data)
    assert r["status"] == "complete" and r["unscored"] == 0
    got = {t["id"]: t for t in r["tasks"]}
    for task_id, (score, grades) in expected.items():
        assert got[task_id]["n"] == 2
        assert got[task_id]["mean_score"] == pytest.approx(score, abs=1e-9), task_id
        ts = next(t for t in data.tasks if t.id == task_id)
        for criterion, value in grades.items():  # every grade() criterion kept as a sub-score
            subs = [v for name, v in ts.subscores.items() if name.split("/")[-1] == criterion]
            assert subs and all(x == pytest.approx(value) for x in subs[0]), (task_id, criterion)
    overall = sum(s for s, _ in expected.values()) / 3
    assert r["overall"]["mean_score"]["value"] == pytest.approx(overall)
    assert r["pins"]["judges_used"] == ["fixed-judge"]  # the judge that actually scored, from the events
