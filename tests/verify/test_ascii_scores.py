"""A score a script prints is an ASCII number: float() also reads "１" (U+FF11) and "٠.٥", which scored
1.0 and 0.5 where any other unreadable line scores 0."""

from __future__ import annotations

import json

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from clawsdk_plugins.sources.clawgym import parse_score

from clawsdk import Store, run_sync
from clawsdk.tasks.model import Task
from clawsdk.tasks.sources import load_tasks
from clawsdk.verify.verdict import read_score


@pytest.mark.parametrize("text", ["１", "٠.٥", "0.5_0", "nan", "inf", "1 0", "0x1", ""])
def test_only_an_ascii_decimal_is_a_score(text):
    assert read_score(text) is None
    assert parse_score(f"checking\n{text}\n")[0] is None


@pytest.mark.parametrize("text, value", [("1", 1.0), (" 0.25 ", 0.25), (".5", 0.5), ("1.", 1.0), ("1e0", 1.0),
                                         ("+0", 0.0), ("0.6666666666666666", 0.6666666666666666)])
def test_the_ways_scripts_print_numbers_still_read(text, value):
    assert read_score(text) == value
    assert parse_score(f"{text}\r\n") == (value, f"reward.sh printed {text.strip()}")


def _clawgym_task(root, printed: str) -> Task:
    folder = root / "cg" / "t1"
    (folder / "input_files").mkdir(parents=True)
    (folder / "input_files" / "in.txt").write_text("x\n")
    (folder / "reward").mkdir()
    (folder / "reward" / "reward.sh").write_text(f"#!/usr/bin/env bash\necho '{printed}'\n")
    (folder / "reward" / "check.py").write_text("print('{}')\n")
    entry = {"task_id": "t1", "user_query": "do t1", "metadata": {"grading_type": "automated"}}
    (folder / "data_entry.json").write_text(json.dumps(entry))
    (task,) = load_tasks(f"clawgym:{root / 'cg'}").tasks
    return task


def _command_task(root, printed: str) -> Task:
    # the check prints what the agent wrote: the agent's "１" must not be its 1.0
    check = {"type": "command", "name": "score", "run": "cat score.txt", "score_from_stdout": True}
    return Task.model_validate({"id": "t1", "instruction": "Write score.txt.",
                                "verifier": {"type": "checks", "checks": [check]}})


@pytest.mark.parametrize("make", [_clawgym_task, _command_task], ids=["clawgym", "command"])
@pytest.mark.parametrize("printed, reward", [("１", 0.0), ("1", 1.0)])
def test_a_full_width_digit_scores_0_like_any_unreadable_line(make, printed, reward, tmp_path):
    agent = ScriptedAgent([{"tool": "write", "args": {"path": "score.txt", "content": printed + "\n"}}])
    [o] = run_sync([make(tmp_path, printed)], agent=agent, db=tmp_path / "r.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", reward), o
    if reward == 0.0:
        with Store(tmp_path / "r.db") as store:
            verdict = store.verdict(o.rollout_id)
        detail = " ".join([verdict["detail"] or ""] + [s["detail"] or "" for s in verdict["subscores"]])
        assert "'１'" in detail and ("not a number" in detail or "not a score" in detail), detail
