"""PinchBench dialects: assets per task, grading_weights as the reference grader reads them, a hybrid gate.

The score is checked against `reference_score`, a re-implementation of the rule of PinchBench's own grader
(`_combine_grades` and `_average_scores` in the PinchBench skill's scripts/lib_grading.py: `automated` and
`llm_judge` read from grading_weights, 0.5 each when absent, 0.5/0.5 when they sum to 0, any other key
ignored) with the dialect's gate on top (the judge part counts 0 when grade()'s mean is below it).
"""

from __future__ import annotations

import logging

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import Store, run_sync
from clawsdk.tasks.sources import load_tasks
from tests.conftest import FIXTURES
from tests.formats.formats_helpers import use_scripted_judge

DIALECTS = FIXTURES / "pinchbench-dialects" / "tasks"
NOTES = (FIXTURES / "pinchbench-dialects" / "assets" / "task_gated_notes" / "notes.txt").read_text()
JUDGE = ('{"scores": {"Faithful Digest": {"score": 0.5, "reason": "an owner is vague"}, '
         '"Readable Format": {"score": 1, "reason": "as asked"}}}')


def reference_score(grade: dict, judge_total: float, weights: dict | None, gate: float | None) -> float:
    values = [float(v) for v in grade.values() if isinstance(v, (int, float))]
    automated = sum(values) / len(values) if values else 0.0
    weights = weights or {"automated": 0.5, "llm_judge": 0.5}
    auto_w, judge_w = float(weights.get("automated", 0.5)), float(weights.get("llm_judge", 0.5))
    total = auto_w + judge_w
    if total <= 0:
        auto_w = judge_w = 0.5
        total = 1.0
    if gate is not None and automated < gate:
        judge_total = 0.0
    return (automated * auto_w + judge_total * judge_w) / total


def _task(caplog=None):
    with caplog.at_level(logging.WARNING) if caplog else _nothing():
        loaded = load_tasks(f"pinchbench:{DIALECTS}")
    assert not loaded.errors, loaded.errors
    (task,) = loaded.tasks
    return task


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_assets_come_from_the_tasks_own_folder_first_and_the_dialect_is_recorded(caplog):
    task = _task(caplog)
    files = {f.path: f.data.decode() for f in task.workspace}
    assert files["notes.txt"] == NOTES  # assets/task_gated_notes/notes.txt, not the decoy in assets/
    assert files["owners.csv"].startswith("project,owner")  # no per-task copy: assets/owners.csv
    meta = task.metadata["pinchbench"]
    assert meta["assets"] == {"notes.txt": "assets/task_gated_notes/notes.txt", "owners.csv": "assets/owners.csv"}
    assert meta["grading_weights"] == {"automated": 0.7, "llm_judge": 0.5}
    assert meta["hybrid_gate"] == {"min_automated": 0.75}
    # the misspelled key: a warning naming the task and the weight used (the reference says nothing)
    (warning,) = [r.getMessage() for r in caplog.records if "grading_weights" in r.getMessage()]
    assert "task_gated_notes" in warning and "'llm-judge'" in warning and "llm_judge weighs 0.5" in warning
    assert meta["warnings"] and "llm-judge" in meta["warnings"][0]


def test_the_gate_and_the_weights_are_part_of_the_tasks_hash():
    task = _task()
    parts = task.verifier.model_dump()["parts"]
    assert parts[0]["gate"] is True and parts[0]["verifier"]["pass_threshold"] == 0.75
    ungated = [{k: v for k, v in parts[0].items() if k != "gate"}, parts[1]]
    other = task.model_copy(update={"verifier": type(task.verifier).model_validate(
        {**task.verifier.model_dump(), "parts": ungated})})
    assert other.hash != task.hash
    reweighed = [{**parts[0], "weight": 0.5}, parts[1]]
    assert task.model_copy(update={"verifier": type(task.verifier).model_validate(
        {**task.verifier.model_dump(), "parts": reweighed})}).hash != task.hash


@pytest.mark.parametrize("digest, grade, judged", [
    ("- Mira: renew the TLS certificate\n- Tomas: ship the beta to the pilot group\nItems: 2\n",
     {"digest_written": 1, "renew_cert": 1, "ship_beta": 1, "item_count": 1}, True),
    ("- Mira: renew the TLS certificate\n",  # half of grade(): under the gate, the judge does not count
     {"digest_written": 1, "renew_cert": 1, "ship_beta": 0, "item_count": 0}, False),
], ids=["above-the-gate", "below-the-gate"])
def test_the_score_is_the_reference_rule_with_the_gate(db, monkeypatch, digest, grade, judged):
    monkeypatch.setenv("CLAWSDK_JUDGE", "scripted-judge")
    judge = use_scripted_judge(JUDGE)
    task = _task()
    calls = [{"tool": "write", "args": {"path": "digest.md", "content": digest}}]
    result = run_sync([task], agent=ScriptedAgent(calls), db=db, run_id="gate", retries=0)
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok", outcome.error
    judge_total = 0.6 * 0.5 + 0.4 * 1.0
    raw_weights = {"automated": 0.7, "llm-judge": 0.3}  # as the task file gives them
    assert outcome.reward == pytest.approx(reference_score(grade, judge_total, raw_weights, 0.75))
    assert bool(judge["calls"]) is judged  # below the gate the judge is not even asked
    with Store(db) as store:
        subs = {s["name"]: s["score"] for s in store.verdict(outcome.rollout_id)["subscores"]}
    assert subs["automated"] == pytest.approx(sum(grade.values()) / len(grade))
    assert subs["llm_judge"] == pytest.approx(judge_total if judged else 0.0)
