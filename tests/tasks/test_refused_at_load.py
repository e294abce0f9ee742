"""Task files no rollout could ever score are refused when they are read, one line per task, and the other
tasks run: a file name that is not UTF-8 ended the whole run at hashing, an inf limit made the store
unreadable, and a check of a file outside the workspace (or of a hidden file the task lacks) scored every
agent 0 or failed every rollout unscored."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from clawsdk import File
from clawsdk.cli import cli
from clawsdk.tasks.sources import load_tasks
from tests.conftest import make_task


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def skipped_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("skipped task:")]


def errors_by_task(spec) -> dict[str, tuple[str | None, str]]:
    loaded = load_tasks(spec)
    return {e.task_id: (e.field, e.message) for e in loaded.errors}


def test_a_workspace_file_name_that_is_not_utf8_is_one_skipped_task_and_the_run_goes_on(tmp_path, db):
    make_task(tmp_path / "tasks", "good")
    bad = make_task(tmp_path / "tasks", "bad")
    with open(os.fsencode(bad / "workspace") + b"/bad\xff.txt", "w") as f:
        f.write("x")
    line = f"skipped task: {bad}: workspace: file 'bad\\udcff.txt': the file name is not UTF-8; rename it"
    r = invoke("tasks", "validate", tmp_path / "tasks", "--sandbox", "local")
    assert r.exit_code == 1 and skipped_lines(r.output) == [line], r.output  # it said "2/2 valid"
    r = invoke("run", tmp_path / "tasks", "--agent", "oracle", "--sandbox", "local", "--db", db, "--run-id", "u")
    assert r.exit_code == 0, r.output
    assert skipped_lines(r.output) == [line]
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT task_id, passed FROM rollouts").fetchall() == [("good", 1)]
        assert con.execute("SELECT task_id, field FROM task_errors").fetchall() == [("bad", "workspace")]


@pytest.mark.parametrize("path, message", [
    ("bad\udcff.txt", "the file name is not UTF-8"),
    ("a/" + "x" * 256 + "/b.txt", "a file or folder name is at most 255 bytes"),
    ("é" * 128, "a file or folder name is at most 255 bytes"),  # 256 bytes in 128 characters
])
def test_a_file_no_file_system_can_name_is_refused(path, message):
    with pytest.raises(ValueError, match=message):
        File(path=path, text="x")
    File(path="é" * 127, text="x")  # 254 bytes


def test_text_that_is_not_utf8_is_refused_wherever_the_hash_covers_it():
    with pytest.raises(ValueError, match="the text is not UTF-8"):
        File(path="a.txt", text="\udcff")
    from clawsdk import Task

    with pytest.raises(ValueError, match=r"tags\s+Value error, \[0\] is not UTF-8 text"):
        Task(id="t", instruction="x", tags=["\udcff"])
    with pytest.raises(ValueError, match=r"verifier\s+Value error, checks\[0\]\.text is not UTF-8 text"):
        Task.model_validate({"id": "t", "instruction": "x", "verifier": {"checks": [
            {"type": "text_contains", "path": "a", "text": "\udcff"}]}})


def test_inf_and_nan_limits_are_refused_at_load_and_the_store_stays_readable(tmp_path, db):
    """`timeout_s: .inf` was stored as null, and `data select` then failed for the whole store."""
    make_task(tmp_path / "tasks", "good")
    make_task(tmp_path / "tasks", "inf", extra={"limits": {"timeout_s": float("inf")}})
    make_task(tmp_path / "tasks", "nan", extra={"limits": {"verifier_timeout_s": float("nan")}})
    r = invoke("run", tmp_path / "tasks", "--agent", "oracle", "--sandbox", "local", "--db", db, "--run-id", "l")
    assert r.exit_code == 0, r.output
    selected = invoke("data", "select", "--db", db, "--json")
    assert selected.exit_code == 0, selected.output
    assert len(skipped_lines(r.output)) == 2, r.output
    assert errors_by_task(tmp_path / "tasks") == {
        "inf": ("limits.timeout_s", "Input should be a finite number"),
        "nan": ("limits.verifier_timeout_s", "Input should be a finite number")}


HYBRID = {"type": "hybrid", "parts": [
    {"name": "a", "weight": 1, "verifier": {"checks": [{"type": "file_exists", "path": "done.txt"}]}},
    {"name": "b", "weight": 1, "verifier": {"checks": [{"type": "file_exists", "path": "done.txt"}]}}]}


@pytest.mark.parametrize("verifier, where", [
    ({"checks": [{"type": "file_exists", "path": "done.txt", "weight": float("inf")}]}, "checks[0].weight"),
    ({"checks": [{"type": "file_exists", "path": "done.txt", "weight": float("nan")}]}, "checks[0].weight"),
    ({"checks": [{"type": "json_equals", "path": "done.txt", "expected": float("nan")}]}, "checks[0].expected"),
    ({"checks": [{"type": "json_equals", "path": "done.txt", "expected": {"a": 1}, "tolerance": float("inf")}]},
     "checks[0].tolerance"),
    ({**HYBRID, "parts": [{**HYBRID["parts"][0], "weight": float("inf")}, HYBRID["parts"][1]]},
     "parts[0].weight"),
])
def test_inf_and_nan_anywhere_in_the_verifier_are_refused_at_load(tmp_path, verifier, where):
    make_task(tmp_path, "t", extra={"verifier": verifier})
    assert errors_by_task(tmp_path) == {
        "t": ("verifier", f"{where} is not a finite number; inf and nan are refused")}


def test_a_check_that_could_never_be_scored_is_refused_at_load_and_the_others_run(tmp_path, db):
    """Each of these loaded, then scored every agent 0 (a path outside the workspace) or made every rollout
    a verifier_error (a hidden file the task does not hold, a verifier without its files)."""
    root = tmp_path / "tasks"
    expected = {
        "abs": ([{"type": "file_exists", "path": "/etc/passwd"}], {},
                "verifier.checks[0].path", "absolute path '/etc/passwd': give a path relative to the workspace"),
        "dotdot": ([{"type": "text_contains", "path": "../../etc/passwd", "text": "root"}], {},
                   "verifier.checks[0].path", "path '../../etc/passwd' leaves the workspace"),
        "itself": ([{"type": "file_absent", "path": "a/.."}], {},
                   "verifier.checks[0].path", "path 'a/..' names the workspace itself, not a file in it"),
        "missing": ([{"type": "json_equals", "path": "done.txt", "expected_file": "nothere.json"}],
                    {"other.json": "{}"}, "verifier.checks[0].expected_file",
                    "'nothere.json' is not among the task's hidden files (other.json)"),
        "expdotdot": ([{"type": "json_equals", "path": "done.txt", "expected_file": "../../../etc/passwd"}], {},
                      "verifier.checks[0].expected_file",
                      "'../../../etc/passwd' must name a file among the task's hidden files (a relative path "
                      "inside hidden/)"),
        "notjson": ([{"type": "file_exists", "path": "done.txt"},
                     {"type": "json_equals", "path": "done.txt", "expected_file": "e.json"}], {"e.json": "{nope"},
                    "verifier.checks[1].expected_file", "hidden file 'e.json' cannot be read as JSON: "),
    }
    make_task(root, "good")
    for tid, (checks, hidden, _, _) in expected.items():
        make_task(root, tid, checks=checks, hidden=hidden)
    # an expected file named as ./x is the hidden file x
    make_task(root, "dotslash", checks=[{"type": "text_equals", "path": "done.txt", "expected_file": "./e.txt"}],
              hidden={"e.txt": "done\n"})
    errors = errors_by_task(root)
    assert set(errors) == set(expected)
    for tid, (_, _, field, message) in expected.items():
        assert errors[tid][0] == field and errors[tid][1].startswith(message), (tid, errors[tid])
    r = invoke("run", root, "--agent", "oracle", "--sandbox", "local", "--db", db, "--run-id", "c")
    assert r.exit_code == 0, r.output
    assert len(skipped_lines(r.output)) == len(expected), r.output
    with sqlite3.connect(db) as con:
        assert sorted(con.execute("SELECT task_id, passed FROM rollouts")) == [("dotslash", 1), ("good", 1)]


def test_a_verifier_without_the_hidden_files_it_runs_is_refused_at_load(tmp_path):
    """`verifier: {type: clawgym}` or `pinchbench` on a native task without their hidden files, or with a
    grade() that does not compile: every rollout was a verifier_error."""
    make_task(tmp_path, "cg", extra={"verifier": {"type": "clawgym"}})
    make_task(tmp_path, "pb", extra={"verifier": {"type": "pinchbench"}})
    make_task(tmp_path, "pbsyntax", extra={"verifier": {"type": "pinchbench"}},
              hidden={"pinchbench/grade.py": "def grade(:\n"})
    make_task(tmp_path, "hybrid", extra={"verifier": {"type": "hybrid", "parts": [
        {"name": "code", "weight": 0.7, "verifier": {"type": "clawgym"}},
        {"name": "checks", "weight": 0.3, "verifier": {"checks": [{"type": "file_exists", "path": "done.txt"}]}}]}})
    make_task(tmp_path, "pbok", extra={"verifier": {"type": "pinchbench"}},
              hidden={"pinchbench/grade.py": "def grade(transcript, workspace):\n    return {'ok': 1.0}\n"})
    make_task(tmp_path, "cgok", extra={"verifier": {"type": "clawgym"}},
              hidden={"reward/reward.sh": "echo 1\n"})
    errors = errors_by_task(tmp_path)
    field, message = errors.pop("pbsyntax")  # the parser's words vary with Python's version
    assert field == "verifier.grade_file" and message.startswith("'pinchbench/grade.py' does not compile: "), message
    assert errors == {
        "cg": ("verifier.script", "'reward/reward.sh' is not among the task's hidden files; the clawgym verifier "
                                  "runs it (in a native task: hidden/reward/reward.sh)"),
        "pb": ("verifier.grade_file", "'pinchbench/grade.py' is not among the task's hidden files; the pinchbench "
                                      "verifier runs its grade() (in a native task: hidden/pinchbench/grade.py)"),
        "hybrid": ("verifier.parts[0].verifier.script", "'reward/reward.sh' is not among the task's hidden files; "
                   "the clawgym verifier runs it (in a native task: hidden/reward/reward.sh)"),
    }, json.dumps(errors, indent=1)
    assert sorted(t.id for t in load_tasks(tmp_path).tasks) == ["cgok", "pbok"]
