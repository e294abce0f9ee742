"""A value the store cannot write (bytes, a set, a lone surrogate) anywhere in one task, metadata and verifier
spec included, is that task's own `skipped task:` line, naming the file and the field, and the other tasks
run: `!!binary` in a task.yaml's metadata passed `tasks validate` and then ended the whole run at the store
("invalid utf-8 sequence"); in its verifier it ended `tasks list` and `run` for every task at the hash,
naming no file; a ClawGym line with "\\udcff" in an extra field ended the run like the first."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from clawsdk import Task
from clawsdk.cli import cli
from clawsdk.errors import TaskFormatError
from clawsdk.tasks.reading import parse_yaml
from clawsdk.tasks.sources import load_tasks
from tests.conftest import make_task

CHECK = "{type: text_contains, path: done.txt, text: done}"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def skipped_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("skipped task:")]


def bad_native(root, yaml_text: str):
    folder = make_task(root, "bad")
    (folder / "task.yaml").write_text(f"id: bad\ninstruction: Write done.txt containing done.\n{yaml_text}\n")
    return folder


@pytest.mark.parametrize("yaml_text, field, words", [
    (f"verifier: {{checks: [{CHECK}]}}\nmetadata: {{x: !!binary /w==}}", "metadata.x", "binary"),
    (f"verifier: {{checks: [{CHECK}]}}\nmetadata: {{s: !!set {{a: null}}}}", "metadata.s", "set"),
    (f"verifier: {{note: !!binary /w==, checks: [{CHECK}]}}", "verifier.note", "binary"),
    ("verifier: {checks: [{type: text_contains, path: done.txt, text: done, note: !!binary /w==}]}",
     "verifier.checks[0].note", "binary"),
])
def test_a_value_the_store_cannot_write_is_one_skipped_task_and_the_run_goes_on(tmp_path, db, yaml_text, field,
                                                                                words):
    make_task(tmp_path / "tasks", "good")
    bad = bad_native(tmp_path / "tasks", yaml_text)
    prefix = f"skipped task: {bad / 'task.yaml'}: {field}: "

    r = invoke("tasks", "list", tmp_path / "tasks")
    assert r.exit_code == 0, r.output
    [line] = skipped_lines(r.output)
    assert line.startswith(prefix) and words in line, r.output
    assert "1 task(s), 1 unreadable" in r.output

    r = invoke("tasks", "validate", tmp_path / "tasks", "--sandbox", "local")
    assert r.exit_code == 1, r.output  # it said "2/2 valid"
    assert [ln.startswith(prefix) for ln in skipped_lines(r.output)] == [True], r.output

    for _ in range(2):  # a rerun failed the same way
        r = invoke("run", tmp_path / "tasks", "--agent", "oracle", "--sandbox", "local", "--db", db, "--run-id", "u")
        assert r.exit_code == 0, r.output
        assert [ln.startswith(prefix) for ln in skipped_lines(r.output)] == [True], r.output
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT task_id, passed FROM rollouts").fetchall() == [("good", 1)]
        assert con.execute("SELECT DISTINCT task_id, field FROM task_errors").fetchall() == [("bad", field)]


def test_a_clawgym_line_with_a_lone_surrogate_in_an_extra_field_is_one_skipped_task(tmp_path, db):
    base = {"task_id": "ok1", "prompt": "Write out.txt with hello.", "input_files": [],
            "hook_code": "def grade(transcript, workspace):\n    return {'ok': 0.0}\n"}
    path = tmp_path / "syn_task.jsonl"
    path.write_text(json.dumps(base) + "\n" + json.dumps(dict(base, task_id="bad1", notes="\udcff")) + "\n")
    prefix = f"skipped task: {path}:2: metadata: clawgym_jsonl.notes is not UTF-8 text"
    r = invoke("tasks", "validate", f"clawgym-jsonl:{path}", "--sandbox", "local")
    assert [ln.startswith(prefix) for ln in skipped_lines(r.output)] == [True], r.output
    r = invoke("run", f"clawgym-jsonl:{path}", "--agent", "scripted", "--sandbox", "local", "--db", db,
               "--run-id", "j")  # idle: the tasks have no solution for the oracle
    assert r.exit_code == 0, r.output
    assert [ln.startswith(prefix) for ln in skipped_lines(r.output)] == [True], r.output
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT task_id, scored FROM rollouts").fetchall() == [("ok1", 1)]


@pytest.mark.parametrize("name, value, inner, words", [
    ("metadata", {"x": b"\xff"}, "x", "binary data"),
    ("metadata", {"x": {"y": {1, 2}}}, "x.y", "a set"),
    ("metadata", {"x": ["\udcff"]}, "x[0]", "not UTF-8"),
    ("provenance", {"path": "a\udcffb"}, "path", "not UTF-8"),
    ("verifier", {"checks": [], "note": b"\xff"}, "note", "binary data"),
    ("tags", ["\udcff"], "[0]", "not UTF-8"),
])
def test_the_model_refuses_what_the_store_cannot_write(name, value, inner, words):
    with pytest.raises(ValidationError) as e:
        Task(id="t", instruction="x", **{name: value})
    [err] = e.value.errors()
    assert err["loc"] == (name,) and err["msg"].startswith(f"Value error, {inner} {'is ' if inner else ''}")
    assert words in err["msg"], err["msg"]


@pytest.mark.parametrize("text, words", [
    ("a: !!binary /w==", "a: .*binary"),
    ("a: [1, !!set {b: null}]", r"a\[1\]: .*set"),
])
def test_parse_yaml_refuses_values_json_has_no_form_for(text, words):
    with pytest.raises(TaskFormatError, match=words):
        parse_yaml(text, "f.yaml")
    assert parse_yaml("a: 2024-01-05\nb: [1, x]", "f.yaml") == {"a": "2024-01-05", "b": [1, "x"]}


def test_a_task_a_loader_let_through_that_cannot_be_stored_is_that_tasks_error(tmp_path, monkeypatch):
    """The last guard: whatever a source yields is dumped and hashed as the store does, at load."""
    import clawsdk.tasks.native as native

    make_task(tmp_path / "tasks", "good")
    make_task(tmp_path / "tasks", "bad")
    real = native.load_task

    def load_task(folder):
        task = real(folder)
        if task.id == "bad":  # past every validator, as a plugin's source could build it
            task = Task.model_construct(**{**dict(task), "metadata": {"x": b"\xff"}})
        return task

    monkeypatch.setattr(native, "load_task", load_task)
    loaded = load_tasks(tmp_path / "tasks")
    assert [t.id for t in loaded.tasks] == ["good"]
    [err] = loaded.errors
    assert (err.task_id, err.field) == ("bad", "metadata.x"), str(err)
    assert "cannot be stored" in err.message, err.message
