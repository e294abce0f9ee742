"""benchmarks/learning.py, the learning experiment, end to end on its --tiny settings (a tiny random model
built offline): a part of the table (one split, three conditions) and its refusals. Its numbers mean
nothing; what is checked is that the documented command runs and reports what it ran."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "learning.py"


def learning(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_part_of_the_table_runs_and_reports_only_that_part(tmp_path):
    out = tmp_path / "learn"
    done = learning("--tiny", "--threads", "1", "--out", str(out), "--splits", "unseen_templates",
                    "--conditions", "lookup,base,sft")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| unseen_templates |")]
    assert [r.split("|")[2].strip() for r in rows] == ["lookup", "base", "sft"]
    assert "sft - base" in done.stdout and "sft - lookup" in done.stdout and "format" not in done.stdout.split(
        "evaluation:")[1]
    result = json.loads((out / "result.json").read_text())
    assert list(result["table"]) == ["unseen_templates"]
    assert set(result["table"]["unseen_templates"]) == {"lookup", "base", "sft"}
    cell = result["table"]["unseen_templates"]["sft"]
    assert cell["n"] == 2 and len(cell["per_task"]) == 2 and 0 <= cell["pass_ci"][0] <= cell["pass_ci"][1] <= 1
    assert result["sft"]["steps"] == 2 and result["sft"]["micro_batch"] == 1 and result["format"] is None
    # how every rollout ended, and what the model turns did (none for the replayed lookup)
    ends = result["endings"]
    assert list(ends) == ["unseen_templates: lookup", "unseen_templates: base", "unseen_templates: sft"]
    assert all(sum(e["ended"].values()) == 2 for e in ends.values()), ends
    assert ends["unseen_templates: lookup"]["model_turns"] == 0 and ends["unseen_templates: lookup"]["tool_calls"] > 0
    assert all(ends[f"unseen_templates: {c}"]["model_turns"] >= 2 for c in ("base", "sft")), ends
    assert "how the rollouts ended" in done.stdout
    # a second run resumes: the checkpoint is reused and every rollout comes from the store
    again = learning("--tiny", "--threads", "1", "--out", str(out), "--splits", "unseen_templates",
                     "--conditions", "lookup,base,sft")
    assert again.returncode == 0 and "sft: reusing" in again.stdout
    assert "-> learning-sft@v1" in again.stdout and "learning-sft@v2" not in again.stdout  # the same rows, not re-exported
    assert [r for r in again.stdout.splitlines() if r.startswith("| unseen_templates |")] == rows


def test_an_unknown_split_or_condition_is_refused_in_one_line(tmp_path):
    for args in (["--splits", "unseen_tmpl"], ["--conditions", "base,sft,rlhf"]):
        done = learning("--tiny", "--out", str(tmp_path / "x"), *args, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.strip().count("\n") == 0 and ("unseen_tmpl" in done.stderr or "rlhf" in done.stderr)


def test_the_train_split_is_the_training_tasks_themselves(tmp_path):
    """--splits train measures recall: lookup replays each training task's own solution there and passes it,
    while on held-out templates the nearest training solution names files the task does not have."""
    done = learning("--tiny", "--out", str(tmp_path / "learn"), "--splits", "train,unseen_templates",
                    "--conditions", "lookup", timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = json.loads((tmp_path / "learn" / "result.json").read_text())["table"]
    assert list(table) == ["train", "unseen_templates"]
    assert (table["train"]["lookup"]["passed"], table["train"]["lookup"]["n"]) == (2, 2)
    assert table["unseen_templates"]["lookup"]["passed"] == 0
