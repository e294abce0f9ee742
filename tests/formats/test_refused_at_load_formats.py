"""ClawGym and PinchBench tasks no rollout could score are refused when read, one line each, and the other
tasks run: a file name that is not UTF-8 ended the whole run at hashing, a name over 255 bytes made every
rollout a sandbox_error, and a grade() that does not compile every rollout a verifier_error."""

from __future__ import annotations

import json
import os
import sqlite3

from clawsdk_plugins.sources.clawgym import REWARD_SH
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.tasks.sources import load_tasks


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def skipped_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("skipped task:")]


def _row(task_id, **extra):
    return json.dumps({"task_id": task_id, "prompt": "do it", "hook_code": "print('{\"a\": 1}')",
                       "grading_type": "automated", **extra}) + "\n"


def test_a_jsonl_file_name_no_file_system_holds_is_one_skipped_line_and_the_run_goes_on(tmp_path, db):
    long = "x" * 300
    (tmp_path / "t.jsonl").write_text(
        _row("good", input_files=[{"file_path": "in.txt", "content": "x"}])
        + _row("surrogate", input_files=[{"file_path": "bad\udcff.txt", "content": "x"}])
        + _row("long", input_files=[{"file_path": f"/root/.openclaw/workspace/{long}", "content": "x"}])
        + _row("content", input_files=[{"file_path": "in.txt", "content": "\udcff"}]))
    r = invoke("run", f"clawgym-jsonl:{tmp_path / 't.jsonl'}", "--agent", "scripted", "--sandbox", "local",
               "--db", db, "--run-id", "names")  # idle: the tasks have no solution for the oracle
    assert r.exit_code == 0, r.output
    where = tmp_path / "t.jsonl"
    assert skipped_lines(r.output) == [
        f"skipped task: {where}:2: input_files: file 'bad\\udcff.txt': the file name is not UTF-8; rename it",
        f"skipped task: {where}:3: input_files: file '{long[:60]}'...: a file or folder name is at most 255 bytes; "
        f"'{long[:40]}'... is 300",
        f"skipped task: {where}:4: input_files: the text is not UTF-8 (it holds a lone surrogate, such as JSON's "
        "\"\\udcff\"); give bytes that are not text as 'b64'"]
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT task_id, scored FROM rollouts").fetchall() == [("good", 1)]


def test_a_clawgym_folder_with_a_file_name_that_is_not_utf8_is_one_error(tmp_path):
    for name in ("good", "bad"):
        folder = tmp_path / name
        (folder / "input_files").mkdir(parents=True)
        (folder / "reward").mkdir()
        (folder / "reward" / "reward.sh").write_text(REWARD_SH)
        (folder / "data_entry.json").write_text(json.dumps({"task_id": name, "user_query": "do it",
                                                            "metadata": {"grading_type": "automated"}}))
    with open(os.fsencode(tmp_path / "bad" / "input_files") + b"/bad\xff.txt", "w") as f:
        f.write("x")
    loaded = load_tasks(f"clawgym:{tmp_path}")
    assert [t.id for t in loaded.tasks] == ["good"]
    assert [str(e) for e in loaded.errors] == [
        f"{tmp_path / 'bad'}: file 'bad\\udcff.txt': the file name is not UTF-8; rename it"]


PINCH = """---
id: {id}
grading_type: {grading}
{extra}
---

## Prompt

Write done.txt.

## Automated Checks

```python
{code}
```

## LLM Judge Rubric

Be fair.
"""
GRADE = "def grade(transcript, workspace_path):\n    return {'ok': 1.0}"


def test_a_pinchbench_grade_that_does_not_compile_or_an_inf_weight_is_refused_at_load(tmp_path):
    """A grade() with a syntax error made every rollout a verifier_error; an inf weight a traceback's one line."""
    tasks = {"task_ok": ("automated", "", GRADE),
             "task_syntax": ("automated", "", "def grade(transcript, workspace_path):\n    return {'ok': 1.0\n"),
             "task_inf": ("hybrid", "grading_weights: {automated: .inf, llm_judge: 1}", GRADE),
             "task_nan": ("hybrid", "grading_weights: {automated: 1, llm_judge: .nan}", GRADE)}
    for tid, (grading, extra, code) in tasks.items():
        (tmp_path / f"{tid}.md").write_text(PINCH.format(id=tid, grading=grading, extra=extra, code=code))
    loaded = load_tasks(f"pinchbench:{tmp_path}")
    assert [t.id for t in loaded.tasks] == ["task_ok"]
    errors = {e.task_id: (e.field, e.message) for e in loaded.errors}
    assert sorted(errors) == ["task_inf", "task_nan", "task_syntax"], errors
    field, message = errors["task_syntax"]  # the parser's words vary with Python's version
    assert field == "## Automated Checks" and message.startswith("the python block does not compile: "), message
    assert message.endswith("(line 2 of the code)"), message
    # the field names the weight at fault
    assert errors["task_inf"] == ("grading_weights.automated", "must be a finite number >= 0, got inf")
    assert errors["task_nan"] == ("grading_weights.llm_judge", "must be a finite number >= 0, got nan")
