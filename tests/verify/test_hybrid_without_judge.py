"""A hybrid task with no judge model: its automated part is scored and reported, the task unscored."""

from __future__ import annotations

import json

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import Store, run_sync
from clawsdk.bench.render import status_line
from clawsdk.bench.report import build_report
from clawsdk.bench.results import load_run
from clawsdk.tasks.model import Task

CODE = {"type": "checks", "checks": [{"type": "file_exists", "path": "out/report.md"},
                                     {"type": "text_contains", "path": "out/report.md", "text": "Total"}]}
RUBRIC = {"type": "rubric", "rules": [{"name": "tone", "scores": {"0": "rude", "1": "polite"}}]}


def task(tid: str, gate: bool = False) -> Task:
    return Task.model_validate({
        "id": tid, "instruction": "Write out/report.md with the total, politely.",
        "verifier": {"type": "hybrid", "gate": gate, "parts": [{"name": "code", "weight": 0.6, "verifier": CODE},
                                                              {"name": "rubric", "weight": 0.4, "verifier": RUBRIC}]}})


@pytest.fixture(autouse=True)
def no_judge(monkeypatch):
    monkeypatch.delenv("CLAWSDK_JUDGE", raising=False)


def test_the_automated_part_is_recorded_and_reported_and_the_task_is_unscored(tmp_path):
    db = tmp_path / "store.db"
    agent = ScriptedAgent([{"tool": "write", "args": {"path": "out/report.md", "content": "Total: 42\n"}}])
    out = run_sync([task("hy-nojudge")], agent=agent, sandbox="local", db=db, run_id="nojudge", retries=2).outcomes[0]
    assert out.kind.value == "verifier_error" and out.reward is None and out.passed is None
    assert out.attempts == 1  # a missing judge is setup: retrying the rollout would not help
    assert "part(s) 'rubric' not judged (rubric: no judge model for the rubric: set CLAWSDK_JUDGE" in out.error
    assert "the automated part(s) scored 'code' 1.00, recorded as sub-scores" in out.error
    with Store(db) as store:
        row = store.rollouts("nojudge")[0]
        assert not row["scored"] and row["reward"] is None
        subs = {s["name"]: s["score"] for s in store.verdict(row["id"])["subscores"]}
        report = build_report(load_run(store, "nojudge"), n_boot=50)
    assert subs == {"code": 1.0, "code/file_exists:out/report.md": 1.0, "code/text_contains:out/report.md": 1.0}
    assert "rubric" not in subs  # missing, never a 0
    assert report["subscores"]["code"]["value"] == 1.0
    assert report["overall"]["tasks_scored"] == 0 and report["partly_verified"] == 1
    assert "hybrids whose judged part had no judge model" in status_line(report)
    json.dumps(report)


def test_a_failed_gate_decides_the_verdict_without_the_judge(tmp_path):
    db = tmp_path / "store.db"
    agent = ScriptedAgent([{"tool": "write", "args": {"path": "out/report.md", "content": "no numbers\n"}}])
    out = run_sync([task("hy-gate", gate=True)], agent=agent, sandbox="local", db=db, run_id="gate",
                   retries=0).outcomes[0]
    assert out.kind.value == "ok" and out.passed is False and out.reward == pytest.approx(0.6 * 0.5)
