from pathlib import Path

import pytest
import yaml

from clawsdk import File, Task, TaskFormatError, load_task, load_tasks, save_task
from clawsdk.errors import PathEscapeError
from tests.conftest import EXAMPLES, make_task


def test_hash_is_stable_and_ignores_id_and_provenance(tmp_path):
    a = load_task(make_task(tmp_path, "a"))
    b = load_task(make_task(tmp_path / "other", "a"))
    assert a.hash == b.hash
    renamed = a.model_copy(update={"id": "b", "provenance": {"source": "x"}})
    assert renamed.hash == a.hash
    changed = a.model_copy(update={"instruction": a.instruction + " Now."})
    assert changed.hash != a.hash


def test_newer_schema_version_is_refused(tmp_path):
    folder = make_task(tmp_path, extra={"schema_version": 99})
    with pytest.raises(TaskFormatError, match="newer than this clawsdk"):
        load_task(folder)


def test_round_trip_native_folder(tmp_path):
    task = load_task(make_task(tmp_path, "t", hidden={"exp.json": "{}"}, workspace={"a/b.txt": "x", "c.bin": "y"}))
    binary = task.model_copy(update={"workspace": task.workspace + [File.from_bytes("img.png", b"\x89PNG\x00\xff")]})
    out = save_task(binary, tmp_path / "saved" / "t")
    again = load_task(out)
    assert again.hash == binary.hash
    assert {f.path for f in again.workspace} == {"a/b.txt", "c.bin", "img.png"}
    assert again.solution == binary.solution


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a\x00b", ""])
def test_file_paths_must_stay_inside_the_workspace(path):
    with pytest.raises((PathEscapeError, ValueError)):
        File(path=path, text="x")


def test_solve_sh_becomes_one_exec_step(tmp_path):
    folder = make_task(tmp_path, steps=[])
    (folder / "solution").mkdir(exist_ok=True)
    (folder / "solution" / "solve.sh").write_text("echo done > done.txt\n")
    task = load_task(folder)
    assert [s.tool for s in task.solution] == ["exec"]
    assert "done.txt" in task.solution[0].args["command"]


def _error_for(folder: Path) -> TaskFormatError:
    loaded = load_tasks(str(folder.parent))
    assert len(loaded.errors) == 1, loaded.errors
    return loaded.errors[0]


def test_malformed_yaml_names_file_and_line(tmp_path):
    folder = make_task(tmp_path)
    (folder / "task.yaml").write_text("id: x\ninstruction: [unclosed\n")
    err = _error_for(folder)
    assert err.path.endswith("task.yaml") and "invalid YAML" in err.message and "line" in err.message


def test_missing_instruction_names_the_field(tmp_path):
    folder = make_task(tmp_path)
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    del spec["instruction"]
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    err = _error_for(folder)
    assert err.field == "instruction" and "required" in err.message
    assert str(err).startswith(str(folder / "task.yaml"))


def test_unknown_field_and_bad_check_are_reported_at_load(tmp_path):
    folder = make_task(tmp_path, "typo", extra={"instructions": "x"})
    assert "not a known field" in _error_for(folder).message
    bad = make_task(tmp_path / "b", "badcheck", checks=[{"type": "json_equals", "path": "x.json"}])
    err = _error_for(bad)
    assert err.field == "verifier.checks[0]" and "expected" in err.message
    unknown = make_task(tmp_path / "c", "unknown", extra={"verifier": {"type": "nope"}})
    err = _error_for(unknown)
    assert err.field == "verifier.type" and "nope" in err.message


def test_one_bad_task_does_not_hide_the_others(tmp_path):
    make_task(tmp_path, "good")
    bad = make_task(tmp_path, "bad")
    (bad / "task.yaml").write_text(": : :")
    loaded = load_tasks(str(tmp_path))
    assert [t.id for t in loaded.tasks] == ["good"]
    assert len(loaded.errors) == 1 and "bad" in loaded.errors[0].path


def test_duplicate_ids_are_errors(tmp_path):
    make_task(tmp_path / "x", "same")
    make_task(tmp_path / "y", "same")
    loaded = load_tasks(str(tmp_path))
    assert len(loaded.tasks) == 1 and "duplicate task id" in loaded.errors[0].message


def test_examples_cover_the_six_categories():
    loaded = load_tasks(str(EXAMPLES))
    assert not loaded.errors
    assert len(loaded.tasks) >= 12
    from clawsdk.tasks.model import CATEGORIES

    assert {t.category for t in loaded.tasks} == set(CATEGORIES)
    assert all(t.solution for t in loaded.tasks)


def test_task_model_rejects_two_contents():
    with pytest.raises(ValueError, match="file 'a': give exactly one of 'text' or 'b64'"):
        File(path="a", text="x", b64="eA==")
    assert Task(id="x", instruction="y").tools == ["core"]
