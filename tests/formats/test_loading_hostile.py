"""Hostile task folders: each bad task is one line naming its file, the rest load and run; nothing is read
from outside the task folder."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from clawsdk_plugins.sources.clawgym import REWARD_SH
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.tasks.sources import load_many, load_tasks
from tests.conftest import make_task

SECRET = "CANARY-not-for-any-task"


def invoke(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)


def skipped_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("skipped task:")]


def bad_folder(root):
    """The inputs that used to stop a whole folder, between two good tasks."""
    make_task(root, "a_good")
    make_task(root, "b_regex", checks=[{"type": "regex", "path": "done.txt", "pattern": "["}])
    f = make_task(root, "c_steps_dir")
    (f / "solution" / "steps.yaml").unlink()
    (f / "solution" / "real").mkdir()
    os.symlink("real", f / "solution" / "steps.yaml")
    f = make_task(root, "d_deep")
    with (f / "task.yaml").open("a") as out:
        out.write("metadata: " + "[" * 1000 + "]" * 1000 + "\n")
    f = make_task(root, "e_taskdir")
    (f / "task.yaml").unlink()
    (f / "task.yaml").mkdir()
    make_task(root, "f_huge", instruction="x" * 9_000_000)
    make_task(root, "z_good")
    return {"b_regex": "verifier.checks[0].pattern: pattern '[' is not a valid regular expression",
            "c_steps_dir": "steps.yaml: is a symlink",
            "d_deep": "nested deeper than 100 levels; set CLAWSDK_MAX_NESTING",
            "e_taskdir": "task.yaml: is a folder",
            "f_huge": "over the 8,388,608-byte limit; set CLAWSDK_MAX_TASK_FILE_BYTES"}


def test_crashing_inputs_are_one_line_each_and_the_other_tasks_run(tmp_path, db):
    expected = bad_folder(tmp_path / "tasks")
    r = invoke("run", tmp_path / "tasks", "--agent", "oracle", "--sandbox", "local", "--db", db, "--run-id", "x")
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    lines = skipped_lines(r.output)
    assert len(lines) == len(expected), lines
    for name, text in expected.items():
        assert sum(f"/{name}/" in ln and text in ln for ln in lines) == 1, (name, lines)
    con = sqlite3.connect(db)
    assert sorted(con.execute("SELECT task_id, status, reward FROM rollouts")) == [
        ("a_good", "finished", 1.0), ("z_good", "finished", 1.0)]
    assert con.execute("SELECT COUNT(*) FROM task_errors WHERE run_id = 'x'").fetchone()[0] == len(expected)

    r = invoke("tasks", "validate", tmp_path / "tasks", "--sandbox", "local")
    assert r.exit_code == 1 and "Traceback" not in r.output  # 1: some tasks are unreadable
    assert len(skipped_lines(r.output)) == len(expected) and "2/2 valid" in r.output


def test_limits_have_overrides(tmp_path, monkeypatch):
    f = make_task(tmp_path, "deep")
    with (f / "task.yaml").open("a") as out:
        out.write("metadata: {k: " + "[" * 150 + "]" * 150 + "}\n")
    (err,) = load_tasks(str(f)).errors
    assert "nested deeper than 100 levels" in str(err)
    monkeypatch.setenv("CLAWSDK_MAX_NESTING", "200")
    assert [t.id for t in load_tasks(str(f)).tasks] == ["deep"]
    monkeypatch.setenv("CLAWSDK_MAX_INSTRUCTION_CHARS", "10")
    (err,) = load_tasks(str(f)).errors
    assert "instruction: is 31 characters, over the 10-character limit" in str(err)
    monkeypatch.delenv("CLAWSDK_MAX_INSTRUCTION_CHARS")
    monkeypatch.setenv("CLAWSDK_MAX_FILE_BYTES", "3")
    (err,) = load_tasks(str(f)).errors
    assert "notes.md: the file is 6 bytes, over the 3-byte limit; set CLAWSDK_MAX_FILE_BYTES" in str(err)
    monkeypatch.setenv("CLAWSDK_MAX_FILE_BYTES", "lots")
    (err,) = load_tasks(str(f)).errors
    assert "CLAWSDK_MAX_FILE_BYTES: must be a whole number" in str(err)


def test_duplicate_ids_across_arguments_are_refused_before_any_rollout(tmp_path, db):
    make_task(tmp_path / "dupA", "same")
    make_task(tmp_path / "dupB", "same", instruction="Another task that took the same id.")
    make_task(tmp_path / "dupB", "other")
    r = invoke("run", tmp_path / "dupA", tmp_path / "dupB", "--sandbox", "local", "--db", db, "--run-id", "d")
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    (line,) = skipped_lines(r.output)
    assert f"{tmp_path / 'dupB' / 'same'}: id: duplicate task id 'same' (also in {tmp_path / 'dupA' / 'same'})" in line
    con = sqlite3.connect(db)
    assert sorted(con.execute("SELECT task_id, status FROM rollouts")) == [("other", "finished"),
                                                                          ("same", "finished")]
    loaded = load_many([str(tmp_path / "dupA"), str(tmp_path / "dupB")])
    assert [t.instruction for t in loaded.tasks if t.id == "same"] == ["Write done.txt containing done."]


# ---- file references stay inside the task ---------------------------------------------------


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text(SECRET)
    return d


def assert_no_secret(loaded):
    for t in loaded.tasks:
        assert SECRET not in t.model_dump_json()


def _clawgym(root, name):
    folder = root / name
    (folder / "input_files").mkdir(parents=True)
    (folder / "input_files" / "in.txt").write_text("x\n")
    (folder / "reward").mkdir()
    (folder / "reward" / "reward.sh").write_text(REWARD_SH)
    (folder / "reward" / "check.py").write_text("import json\nprint(json.dumps({'a': 0}))\n")
    (folder / "data_entry.json").write_text(json.dumps({"task_id": name, "user_query": f"do {name}",
                                                        "metadata": {"grading_type": "automated"}}))
    return folder


def test_native_symlinks_and_fifos_are_refused_naming_the_file(tmp_path, outside):
    root = tmp_path / "tasks"
    make_task(root, "ok")
    os.symlink(outside / "secret.txt", make_task(root, "ws_file") / "workspace" / "s.txt")
    os.symlink(outside, make_task(root, "ws_dir") / "workspace" / "sub")
    f = make_task(root, "ws_root")
    os.rename(f / "workspace", f / "gone")
    os.symlink(outside, f / "workspace")
    f = make_task(root, "hidden", hidden={"a.txt": "a"})
    os.symlink(outside / "secret.txt", f / "hidden" / "expected.txt")
    f = make_task(root, "sol")
    (f / "solution" / "steps.yaml").unlink()
    os.symlink(outside / "secret.txt", f / "solution" / "steps.yaml")
    f = make_task(root, "spec")
    (f / "task.yaml").unlink()
    os.symlink(outside / "secret.txt", f / "task.yaml")
    os.mkfifo(make_task(root, "fifo") / "workspace" / "pipe")
    loaded = load_tasks(str(root))
    assert [t.id for t in loaded.tasks] == ["ok"]
    msgs = {e.path.removeprefix(str(root) + "/"): e.message for e in loaded.errors}
    assert set(msgs) == {"ws_file/workspace/s.txt", "ws_dir/workspace/sub", "ws_root/workspace",
                         "hidden/hidden/expected.txt", "sol/solution/steps.yaml", "spec/task.yaml",
                         "fifo/workspace/pipe"}, msgs
    assert all(m.startswith("is a symlink (to '") for k, m in msgs.items() if k != "fifo/workspace/pipe")
    assert "not a regular file (a fifo" in msgs["fifo/workspace/pipe"]
    assert_no_secret(loaded)


def test_clawgym_input_files_symlinks_are_refused(tmp_path, outside):
    root = tmp_path / "cg"
    _clawgym(root, "ok")
    os.symlink(outside / "secret.txt", _clawgym(root, "file_link") / "input_files" / "s.txt")
    f = _clawgym(root, "dir_link")
    os.symlink(outside, f / "input_files" / "etc")
    f = _clawgym(root, "root_link")
    os.rename(f / "input_files", f / "gone")
    os.symlink(outside, f / "input_files")
    f = _clawgym(root, "reward_link")
    (f / "reward" / "check.py").unlink()
    os.symlink(outside / "secret.txt", f / "reward" / "check.py")
    f = _clawgym(root, "entry_link")
    (f / "data_entry.json").unlink()
    os.symlink(outside / "secret.txt", f / "data_entry.json")
    loaded = load_tasks(f"clawgym:{root}")
    assert [t.id for t in loaded.tasks] == ["ok"]
    msgs = {e.path.removeprefix(str(root) + "/"): e.message for e in loaded.errors}
    assert set(msgs) == {"file_link/input_files/s.txt", "dir_link/input_files/etc", "root_link/input_files",
                         "reward_link/reward/check.py", "entry_link/data_entry.json"}, msgs
    assert all(m.startswith("is a symlink") for m in msgs.values())
    assert_no_secret(loaded)


def test_pinchbench_sources_stay_in_the_assets_folder(tmp_path, outside):
    bench = tmp_path / "bench"
    (bench / "tasks").mkdir(parents=True)
    (bench / "assets").mkdir()
    (bench / "assets" / "data.csv").write_text("a,b\n1,2\n")
    os.symlink(outside / "secret.txt", bench / "assets" / "link.csv")
    os.symlink(outside, bench / "assets" / "linkdir")
    grade = "## Automated Checks\n```python\ndef grade(transcript, workspace_path):\n    return {'a': 1.0}\n```\n"

    def task(tid, source):
        (bench / "tasks" / f"task_{tid}.md").write_text(
            f"---\nid: {tid}\ngrading_type: automated\nworkspace_files:\n  - source: {json.dumps(source)}\n"
            f"    dest: s.txt\n---\n## Prompt\nhi\n{grade}")

    task("ok", "data.csv")
    depth = len(outside.parts) + 4
    task("up", "../" * depth + str(outside / "secret.txt").lstrip("/"))
    task("abs", str(outside / "secret.txt"))
    task("link", "link.csv")
    task("linkdir", "linkdir/secret.txt")
    os.symlink(outside / "secret.txt", bench / "tasks" / "task_mdlink.md")
    loaded = load_tasks(f"pinchbench:{bench / 'tasks'}")
    assert [t.id for t in loaded.tasks] == ["ok"] and loaded.tasks[0].workspace[0].text == "a,b\n1,2\n"
    msgs = {e.path.rsplit("/", 1)[-1]: str(e) for e in loaded.errors}
    assert set(msgs) == {"task_up.md", "task_abs.md", "task_link.md", "task_linkdir.md", "task_mdlink.md"}
    for name in ("task_up.md", "task_abs.md"):
        assert "workspace_files[0].source: source" in msgs[name] and "must be a relative path inside" in msgs[name]
    assert "is a symlink" in msgs["task_link.md"] and "is a symlink" in msgs["task_linkdir.md"]
    assert "task_mdlink.md: is a symlink" in msgs["task_mdlink.md"]
    assert_no_secret(loaded)


def test_a_socket_in_the_workspace_is_named_not_blamed_on_task_yaml(tmp_path):
    """ENXIO from opening a socket fell back to the task file: `task.yaml: cannot be read: No such device or
    address`, pointing the user at the wrong file."""
    import socket

    folder = make_task(tmp_path / "tasks", "sock")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "workspace" / "s.sock"))
        (err,) = load_tasks(str(tmp_path / "tasks")).errors
    finally:
        sock.close()
    assert err.path == str(folder / "workspace" / "s.sock"), str(err)
    assert "is not a regular file (a fifo, socket or device)" in err.message


def test_a_fifo_named_like_a_task_file_never_hangs(tmp_path):
    os.mkfifo(tmp_path / "task.yaml")
    (err,) = load_tasks(str(tmp_path)).errors
    assert "task.yaml: is not a regular file" in str(err)
    cg = tmp_path / "cg" / "t"
    cg.mkdir(parents=True)
    os.mkfifo(cg / "data_entry.json")
    (err,) = load_tasks(f"clawgym:{cg.parent}").errors
    assert "data_entry.json: is not a regular file" in str(err)
    pb = tmp_path / "pb"
    pb.mkdir()
    os.mkfifo(pb / "task_x.md")
    (err,) = load_tasks(f"pinchbench:{pb}").errors
    assert "task_x.md: is not a regular file" in str(err)


def test_a_jsonl_line_over_the_limit_is_one_error(tmp_path, monkeypatch):
    line = {"prompt": "p", "hook_code": "import json\nprint(json.dumps({'a': 0}))\n"}
    path = tmp_path / "syn_task.jsonl"
    path.write_text("\n".join([json.dumps(line), json.dumps({**line, "prompt": "x" * 5000}), json.dumps(line)]) + "\n")
    monkeypatch.setenv("CLAWSDK_MAX_TASK_FILE_BYTES", "1000")
    loaded = load_tasks(str(path))
    assert [t.id for t in loaded.tasks] == ["syn_task_00001", "syn_task_00003"]
    (err,) = loaded.errors
    assert str(err).startswith(f"{path}:2: the line is over the 1,000-byte limit")


def test_an_unforeseen_exception_in_a_source_is_one_error(tmp_path, monkeypatch):
    import clawsdk_plugins.sources.clawgym as clawgym
    import clawsdk_plugins.sources.clawgym_sources as clawgym_sources

    _clawgym(tmp_path / "cg", "a")
    _clawgym(tmp_path / "cg", "b")

    def boom(folder, real=clawgym.load_folder_task):
        if folder.name == "a":
            raise KeyError("surprise")
        return real(folder)

    monkeypatch.setattr(clawgym_sources, "load_folder_task", boom)
    loaded = load_tasks(f"clawgym:{tmp_path / 'cg'}")
    assert [t.id for t in loaded.tasks] == ["b"]
    assert str(loaded.errors[0]) == f"{tmp_path / 'cg' / 'a' / 'data_entry.json'}: cannot be loaded (KeyError: 'surprise')"


def test_yaml_aliases_cannot_make_a_structure_of_itself_or_a_billion_values(tmp_path):
    make_task(tmp_path, "ok", extra={"metadata": {"defaults": {"a": 1}}})
    with (tmp_path / "ok" / "task.yaml").open("a") as out:
        out.write("tags: &t [x, y]\nlimits: {timeout_s: 30}\n")  # an anchor used once is fine
    with (make_task(tmp_path, "rec") / "task.yaml").open("a") as out:
        out.write("metadata: &a {k: *a}\n")
    lines = ["metadata:", "  a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]  # 9**9 values
    with (make_task(tmp_path, "laughs") / "task.yaml").open("a") as out:
        out.write("\n".join(lines) + "\n")
    loaded = load_tasks(str(tmp_path))
    assert [t.id for t in loaded.tasks] == ["ok"]
    msgs = {e.path.split("/")[-2]: e.message for e in loaded.errors}
    assert "*a refers to the anchor it is inside of" in msgs["rec"]
    assert "aliases (*name) expand to more than 1,000,000 values" in msgs["laughs"]


# ---- a task id names a folder: it cannot name one outside the output ---------------------------

HOSTILE_IDS = ["../../escaped", "/tmp/escaped-abs", "..", "a\\..\\..\\b", "x\ny", "é" * 200]


def test_an_id_that_is_not_one_folder_name_is_refused_in_every_format_and_convert_writes_nothing(tmp_path):
    """Converting a downloaded task set put a task whose id was ../../x at OUT/../../x; now such an id
    is one error naming the file and the field, and the other tasks convert."""
    native, cg_root, pinch = tmp_path / "native", tmp_path / "cg", tmp_path / "pinch" / "tasks"
    pinch.mkdir(parents=True)
    grade = "## Automated Checks\n```python\ndef grade(transcript, workspace_path):\n    return {'a': 1.0}\n```\n"
    make_task(native, "good")
    _clawgym(cg_root, "good")
    (pinch / "task_good.md").write_text(f"---\nid: good\ngrading_type: automated\n---\n## Prompt\nhi\n{grade}")
    for n, bad in enumerate(HOSTILE_IDS):
        make_task(native, f"bad{n}", extra={"id": bad})
        entry = _clawgym(cg_root, f"bad{n}") / "data_entry.json"
        entry.write_text(json.dumps({**json.loads(entry.read_text()), "task_id": bad}))
        (pinch / f"task_bad{n}.md").write_text(
            f"---\nid: {json.dumps(bad)}\ngrading_type: automated\n---\n## Prompt\nhi\n{grade}")
    (tmp_path / "cg.jsonl").write_text("".join(
        json.dumps({"task_id": i, "prompt": "do it", "hook_code": "print('{}')", "grading_type": "automated"}) + "\n"
        for i in ["good", *HOSTILE_IDS]))
    for spec, field in [(native, "id"), (f"clawgym:{cg_root}", "task_id"), (f"pinchbench:{pinch}", "id"),
                        (f"clawgym-jsonl:{tmp_path / 'cg.jsonl'}", "task_id")]:
        loaded = load_tasks(spec)
        assert [t.id for t in loaded.tasks] == ["good"], (spec, loaded.errors)
        assert len(loaded.errors) == len(HOSTILE_IDS), (spec, loaded.errors)
        for e in loaded.errors:
            assert e.field == field and ("cannot be a task id" in str(e) or "at most 255 bytes" in str(e)), e
        for fmt in ("native", "clawgym") if "clawgym" in str(spec) else ("native",):
            out = tmp_path / "out" / f"{len(list((tmp_path / 'out').glob('*')))}" / "a" / "b"
            r = invoke("convert", spec, "--to", fmt, "-o", out)
            assert r.exit_code == 1 and "wrote 1 task(s)" in r.output, r.output
            assert sorted(p.name for p in out.iterdir()) == ["good"]
    assert not list(tmp_path.rglob("escaped*")) and not list((tmp_path / "out").glob("*/a/*[!b]"))
    assert not os.path.exists("/tmp/escaped-abs")


def test_a_writer_refuses_an_id_changed_after_loading(tmp_path):
    """`model_copy(update=...)` skips validation; the folder a writer makes still stays inside."""
    from clawsdk.errors import TaskFormatError
    from clawsdk.tasks.convert import export_tasks

    _clawgym(tmp_path / "tasks", "t1")
    task = load_tasks(f"clawgym:{tmp_path / 'tasks'}").tasks[0].model_copy(update={"id": "../../evil"})
    for fmt in ("native", "clawgym"):
        with pytest.raises(TaskFormatError, match="cannot be a task id"):
            export_tasks([task], tmp_path / "out" / fmt, fmt)
    assert not list(tmp_path.rglob("evil"))


def test_a_file_list_that_no_folder_can_hold_is_one_error_at_load_not_an_unscored_rollout(tmp_path, db):
    """A file named a/.. (the workspace itself), or a file that is also another file's folder, loaded and
    then failed every attempt to lay out the workspace: a sandbox_error, retried, and the task unscored."""
    rows = {"good": [{"file_path": "a", "content": "x"}],
            "itself": [{"file_path": "a/..", "content": "x"}],
            "clash": [{"file_path": "a", "content": "x"}, {"file_path": "a/b", "content": "y"}]}
    (tmp_path / "t.jsonl").write_text("".join(
        json.dumps({"task_id": tid, "prompt": "do it", "hook_code": "print('{}')", "grading_type": "automated",
                    "input_files": files}) + "\n" for tid, files in rows.items()))
    r = invoke("run", f"clawgym-jsonl:{tmp_path / 't.jsonl'}", "--agent", "scripted", "--sandbox", "local",
               "--db", db, "--run-id", "files", "--json")  # idle: the tasks have no solution for the oracle
    assert r.exit_code == 0, r.output
    assert sorted(skipped_lines(r.output)) == [
        f"skipped task: {tmp_path / 't.jsonl'}:2: input_files: file 'a/..' names the folder itself, not a file in it",
        f"skipped task: {tmp_path / 't.jsonl'}:3: workspace: 'a' is given as a file and as the folder of 'a/b'"]
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT task_id, scored FROM rollouts").fetchall() == [("good", 1)]


def test_a_task_naming_a_skill_that_is_not_installed_is_skipped_with_one_line_not_run_unscored(tmp_path, db):
    """Its every rollout was a sandbox_error, retried, unscored; loading cannot tell (it loads no skills),
    so the runner refuses it before any rollout, as one line and one task_errors row."""
    make_task(tmp_path / "tasks", "good")
    make_task(tmp_path / "tasks", "noskill", extra={"tools": ["core", "nope"]})
    r = invoke("run", tmp_path / "tasks", "--agent", "oracle", "--sandbox", "local", "--db", db, "--run-id", "s")
    assert r.exit_code == 0, r.output
    [line] = skipped_lines(r.output)
    assert "/noskill: tools: no skill named 'nope' (installed: calendar, core," in line, line
    assert "1 task(s) could not be read and were skipped" in r.output
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT task_id, passed FROM rollouts").fetchall() == [("good", 1)]
        assert con.execute("SELECT task_id, field FROM task_errors").fetchall() == [("noskill", "tools")]


def test_a_jsonl_convert_that_writes_no_task_leaves_the_existing_file_as_it_was(tmp_path):
    """fix-slugify-bug's command check has no ClawGym form: converting it alone wrote nothing and used to
    empty the output file first."""
    from pathlib import Path

    task = Path(__file__).parents[2] / "examples" / "tasks" / "fix-slugify-bug"
    keep = tmp_path / "keep.jsonl"
    keep.write_text('{"task_id": "kept"}\n')
    r = invoke("convert", task, "--to", "clawgym-jsonl", "-o", keep)
    assert r.exit_code == 1 and "wrote 0 task(s)" in r.output, r.output
    assert keep.read_text() == '{"task_id": "kept"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["keep.jsonl"]  # no partial file left behind
    # a convert that writes a task replaces the file whole
    _clawgym(tmp_path / "tasks", "good")
    r = invoke("convert", f"clawgym:{tmp_path / 'tasks'}", "--to", "clawgym-jsonl", "-o", keep)
    assert r.exit_code == 0, r.output
    assert [json.loads(line)["task_id"] for line in keep.read_text().splitlines()] == ["good"]


def test_a_key_given_twice_is_one_error_naming_the_file_the_line_and_the_key(tmp_path):
    """YAML and JSON parsers keep the last of two equal keys without a word; a task that says `id` twice
    is refused, and the other tasks load."""
    native = tmp_path / "native"
    make_task(native, "good")
    bad = make_task(native, "twice")
    (bad / "task.yaml").write_text((bad / "task.yaml").read_text() + "id: other\n")
    loaded = load_tasks(native)
    assert [t.id for t in loaded.tasks] == ["good"]
    (err,) = loaded.errors
    assert err.path == str(bad / "task.yaml") and err.field == "id"
    assert "key 'id' appears twice (first at line " in str(err) and "keep one" in str(err)
    # a merge key may still be overridden
    merged = make_task(native, "merged")
    (merged / "task.yaml").write_text((merged / "task.yaml").read_text()
                                      + "metadata:\n  base: &b {a: 1}\n  m:\n    <<: *b\n    a: 2\n")
    assert sorted(t.id for t in load_tasks(native).tasks) == ["good", "merged"]

    cg = tmp_path / "cg"
    _clawgym(cg, "good")
    entry = _clawgym(cg, "twice") / "data_entry.json"
    entry.write_text(entry.read_text()[:-1] + ', "user_query": "something else"}')
    loaded = load_tasks(f"clawgym:{cg}")
    assert [t.id for t in loaded.tasks] == ["good"]
    (err,) = loaded.errors
    assert err.path == str(entry) and err.field == "user_query" and "appears twice" in str(err)

    jsonl = tmp_path / "syn_task.jsonl"
    line = {"prompt": "p", "hook_code": "import json\nprint(json.dumps({'a': 0}))\n"}
    jsonl.write_text(json.dumps(line) + "\n" + json.dumps(line)[:-1] + ', "prompt": "q"}\n')
    loaded = load_tasks(str(jsonl))
    assert [t.id for t in loaded.tasks] == ["syn_task_00001"]
    (err,) = loaded.errors
    assert str(err).startswith(f"{jsonl}:2: prompt: key 'prompt' appears twice"), err
