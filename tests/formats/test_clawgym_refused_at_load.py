"""ClawGym tasks that no rollout could score fairly are refused when read, one line naming the file and field:
a check.py (or syn_task.jsonl hook_code) that does not compile scored every rollout 0 and blamed the agent;
an `input_mount_dir` of "/" made the reward scripts' path rewrite put the workspace path between every two
characters; input_files entries with no content or an unknown encoding were turned into garbage files.
A task whose reward files are not UTF-8 is refused by `convert --to jsonl` with a message naming it."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from clawsdk_plugins.sources import clawgym as cg
from clawsdk_plugins.sources.clawgym_export import jsonl_record, write_jsonl
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.tasks.convert import ConvertError
from clawsdk.tasks.model import Task, VerifierSpec
from clawsdk.tasks.sources import load_tasks
from tests.formats.formats_helpers import CLAWGYM, SYN_TASKS


def _folders(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "tasks"
    for name in names:
        shutil.copytree(CLAWGYM / name, root / name)
    return root


def _entry(folder: Path, **changes) -> None:
    path = folder / "data_entry.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _lines(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "syn_task.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _fixture_records() -> list[dict]:
    return [json.loads(line) for line in SYN_TASKS.read_text().splitlines() if line.strip()]


# ---- 1. verifier code that does not compile --------------------------------------------------------------


def test_a_clawgym_check_py_that_does_not_compile_is_refused_at_load_naming_file_and_line(tmp_path):
    root = _folders(tmp_path, "task_0001", "task_0003")
    (root / "task_0003" / "reward" / "check.py").write_text("import json\n\ndef (:\n")
    loaded = load_tasks(f"clawgym:{root}")
    assert [t.id for t in loaded.tasks] == ["task_0001"]
    [err] = loaded.errors
    assert err.task_id == "task_0003"
    assert err.path == str(root / "task_0003") and err.field == "reward/check.py", str(err)
    assert err.message.startswith("does not compile: SyntaxError: "), err.message
    assert "(line 3)" in err.message, err.message


def test_the_cli_prints_one_skipped_line_for_a_check_py_that_does_not_compile(tmp_path):
    root = _folders(tmp_path, "task_0001", "task_0002")
    (root / "task_0002" / "reward" / "check.py").write_text("def (:\n")
    r = CliRunner().invoke(cli, ["tasks", "list", f"clawgym:{root}"], catch_exceptions=False)
    skipped = [ln for ln in r.output.splitlines() if ln.startswith("skipped task:")]
    assert len(skipped) == 1, r.output
    assert skipped[0].startswith(f"skipped task: {root / 'task_0002'}: reward/check.py: does not compile: "
                                 "SyntaxError: "), skipped
    assert skipped[0].endswith("(line 1)"), skipped


def test_a_check_py_that_is_not_utf8_is_refused_at_load(tmp_path):
    root = _folders(tmp_path, "task_0001")
    (root / "task_0001" / "reward" / "check.py").write_bytes(b"print('caf\xe9')\n")
    loaded = load_tasks(f"clawgym:{root}")
    assert loaded.tasks == []
    [err] = loaded.errors
    assert err.field == "reward/check.py" and err.message.startswith("does not compile: SyntaxError: "), str(err)


def test_a_jsonl_hook_code_that_does_not_compile_is_refused_at_load_naming_line_and_field(tmp_path):
    good, other = _fixture_records()[:2]
    path = _lines(tmp_path, good, dict(other, hook_code="def grade(transcript, workspace_path):\n    return {'a': 1\n"))
    loaded = load_tasks(f"clawgym-jsonl:{path}")
    assert len(loaded.tasks) == 1
    [err] = loaded.errors
    assert err.path == f"{path}:2" and err.field == "hook_code", str(err)
    assert err.message.startswith("does not compile: SyntaxError: ") and "(line 2)" in err.message, err.message


def test_a_native_task_whose_clawgym_check_does_not_compile_is_refused_by_the_verifier():
    spec = VerifierSpec.model_validate({"type": "clawgym"})
    task = Task.model_validate({
        "id": "t1", "instruction": "do it", "verifier": spec,
        "hidden": [{"path": "reward/reward.sh", "text": cg.REWARD_SH}, {"path": "reward/check.py", "text": "def (:\n"}]})
    with pytest.raises(ValueError, match=r"^verifier\.check: 'reward/check\.py' does not compile: SyntaxError: .*"
                                         r"\(line 1\)"):
        cg.ClawGymVerifier(spec).check_task(task)


def test_the_fixture_tasks_still_load():
    assert len(load_tasks(f"clawgym:{CLAWGYM}").tasks) == 3
    assert len(load_tasks(f"clawgym-jsonl:{SYN_TASKS}").tasks) == len(_fixture_records())


# ---- 2. input_mount_dir ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mount", ["/", "//", "/root/../etc", "/root/.openclaw/workspace/..", "/a\nb", "/a\x00b",
                                   "root/x", 7])
def test_a_clawgym_input_mount_dir_that_is_root_or_unclean_is_refused_naming_the_field(tmp_path, mount):
    root = _folders(tmp_path, "task_0001")
    _entry(root / "task_0001", input_mount_dir=mount)
    loaded = load_tasks(f"clawgym:{root}")
    assert loaded.tasks == []
    [err] = loaded.errors
    assert err.field == "input_mount_dir", str(err)
    assert err.path == str(root / "task_0001" / "data_entry.json")


@pytest.mark.parametrize("mount", ["/", "/x/../y", "/a\nb"])
def test_a_jsonl_input_mount_dir_that_is_root_or_unclean_is_refused(tmp_path, mount):
    path = _lines(tmp_path, dict(_fixture_records()[0], input_mount_dir=mount))
    loaded = load_tasks(f"clawgym-jsonl:{path}")
    assert loaded.tasks == []
    [err] = loaded.errors
    assert err.field == "input_mount_dir" and err.path == f"{path}:1", str(err)


def test_a_mount_dir_with_a_trailing_slash_or_doubled_slashes_is_normalised(tmp_path):
    root = _folders(tmp_path, "task_0001")
    _entry(root / "task_0001", input_mount_dir="//root/.openclaw//workspace/./")
    [task] = load_tasks(f"clawgym:{root}").tasks
    assert task.verifier.model_dump()["mount_dir"] == cg.MOUNT_DIR


def test_the_clawgym_verifier_refuses_a_root_mount_dir_and_rewrite_never_spreads_an_empty_mount():
    with pytest.raises(ValueError, match=r"^verifier\.mount_dir: "):
        cg.ClawGymVerifier(VerifierSpec.model_validate({"type": "clawgym", "mount_dir": "/"}))
    assert cg._rewrite(b"echo 1\n", "", "/tmp/ws") == b"echo 1\n"


# ---- 3. convert --to jsonl with reward files that are not UTF-8 ---------------------------------------------


def _task_with(tmp_path: Path, name: str, rel: str, data: bytes) -> Task:
    root = _folders(tmp_path / name, "task_0001")
    (root / "task_0001" / rel).write_bytes(data)
    _entry(root / "task_0001", task_id=name)
    [task] = load_tasks(f"clawgym:{root}").tasks
    return task


def test_convert_to_jsonl_refuses_a_reward_sh_that_is_not_utf8_naming_task_and_file(tmp_path):
    sh = cg.REWARD_SH.encode() + b"# caf\xe9\n"
    task = _task_with(tmp_path, "latin_sh", "reward/reward.sh", sh)
    with pytest.raises(ConvertError, match=r"task latin_sh: reward/reward\.sh is not UTF-8 text"):
        jsonl_record(task)


def test_convert_to_jsonl_refuses_a_check_py_that_is_not_utf8_and_writes_the_other_tasks(tmp_path):
    # a coding declaration makes it valid Python, but a jsonl line holds only text
    check = (CLAWGYM / "task_0001" / "reward" / "check.py").read_bytes()
    task = _task_with(tmp_path, "latin_py", "reward/check.py", b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + check)
    [good] = load_tasks(f"clawgym:{_folders(tmp_path / 'g', 'task_0002')}").tasks
    out = tmp_path / "out.jsonl"
    n, errors = write_jsonl([task, good], out)
    assert n == 1 and [str(e) for e in errors] == [
        "task latin_py: reward/check.py is not UTF-8 text; a syn_task.jsonl line holds it as text "
        "(hook_code); export it as clawgym folders or native instead"]
    assert json.loads(out.read_text())["task_id"] == "task_0002"


# ---- 4. input_files entries ------------------------------------------------------------------------------


@pytest.mark.parametrize("item, says", [
    ({"file_path": "a.txt", "content": None}, "input_files[0].content is null"),
    ({"file_path": "a.bin", "content": None, "encoding": "base64"}, "input_files[0].content is null"),
    ({"file_path": "a.bin", "content": 1234, "encoding": "base64"}, "input_files[0].content must be base64 text"),
    ({"file_path": "a.bin", "content": "aGk=", "encoding": "hex"}, "input_files[0].encoding 'hex' is unknown"),
])
def test_a_jsonl_input_file_without_usable_content_or_encoding_is_refused(tmp_path, item, says):
    path = _lines(tmp_path, dict(_fixture_records()[1], input_files=[item]))
    loaded = load_tasks(f"clawgym-jsonl:{path}")
    assert loaded.tasks == []
    [err] = loaded.errors
    assert err.path == f"{path}:1" and err.field == "input_files", str(err)
    assert err.message.startswith(says), err.message


def test_jsonl_input_files_that_are_fine_still_load(tmp_path):
    items = [{"file_path": "a.bin", "content": base64.b64encode(b"\x00\xff").decode(), "encoding": "base64"},
             {"file_path": "b.json", "content": {"k": 1}}, {"file_path": "c.txt"},
             {"file_path": "d.txt", "content": "x", "encoding": "utf-8"}]
    path = _lines(tmp_path, dict(_fixture_records()[1], input_files=items))
    [task] = load_tasks(f"clawgym-jsonl:{path}").tasks
    got = {f.path: f.data for f in task.workspace}
    assert got == {"a.bin": b"\x00\xff", "b.json": b'{\n  "k": 1\n}', "c.txt": b"", "d.txt": b"x"}
