"""Every command of the CLI, plugin groups included, given bad arguments: one line on stderr and exit 2.

The commands come from the click tree itself, so a command added later is covered without editing this
file. Each runs through `clawsdk.cli.main` (the entry point users run), in this process.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import click
import pytest

from clawsdk.cli import cli, main
from clawsdk.store.store import Store

NOT_SQLITE = "this is not a SQLite file\n" * 40


def leaf_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    found = []

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), path + (name,))
        else:
            found.append((path, cmd))

    walk(cli, ())
    return found


COMMANDS = leaf_commands()
IDS = [" ".join(p) for p, _ in COMMANDS]


def call(argv: list[str], capsys) -> tuple[int, str, str]:
    """`clawsdk ARGV` in this process: exit code, stdout, stderr (a command that hangs is cut by pytest-timeout)."""
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def bad_value(param: click.Parameter, tmp: Path) -> str:
    """A value that names something missing or unreadable, of the parameter's type."""
    t = param.type
    if param.name == "db":
        return os.environ["CLAWSDK_DB"]
    if isinstance(t, click.Choice):
        return str(t.choices[0])  # valid: the other values are what is wrong
    if isinstance(t, (click.types.IntParamType, click.types.FloatParamType)):
        return "1"
    if (isinstance(t, click.Path) and param.name in ("out", "rootfs")) or param.name == "out":
        return str(tmp / "a-file" / "out")  # under a file: it can be neither read nor created
    if isinstance(t, (click.Path, click.File)) or isinstance(param, click.Argument):
        return str(tmp / "missing" / "nope")
    if param.name in ("upstream", "base_url"):
        return "not a url"
    return "nope"


def filled(cmd: click.Command) -> list[click.Parameter]:
    """The parameters a bad invocation gives a value: required ones, the store, and files."""
    out = []
    for p in cmd.params:
        if isinstance(p, click.Argument):
            if p.required or p.name in ("names_or_folders", "run_id"):
                out.append(p)
        elif (p.required or p.name == "db" or isinstance(p.type, (click.Path, click.File))) and not p.is_flag:
            out.append(p)
    return out


def bad_invocation(path: tuple[str, ...], cmd: click.Command, tmp: Path) -> list[str]:
    argv = list(path)
    for p in filled(cmd):
        argv += [bad_value(p, tmp)] if isinstance(p, click.Argument) else [p.opts[0], bad_value(p, tmp)]
    return argv


def bad_cases() -> list:
    """Each command with each bad store, leaving out the pairs where nothing would be wrong: a command
    that takes nothing, and one that takes only a store, given the empty (valid) store."""
    cases = []
    for (path, cmd), name in zip(COMMANDS, IDS, strict=True):
        params = filled(cmd)
        for store in ("not-a-store.db", "empty-store.db"):
            if any(p.name != "db" for p in params) or (store == "not-a-store.db" and params):
                cases.append(pytest.param(path, cmd, store, id=f"{name}-{store}"))
    return cases


@pytest.fixture
def bad_files(request, tmp_path, monkeypatch):
    """Files to name, and $CLAWSDK_DB at the store the test asks for (indirect parameter): one that is
    not SQLite (the default), or a real one that holds nothing, so the other bad values are what the
    command meets."""
    (tmp_path / "not-a-store.db").write_text(NOT_SQLITE)
    Store(tmp_path / "empty-store.db").close()
    (tmp_path / "a-file").write_text("a file, not a folder\n")
    monkeypatch.setenv("CLAWSDK_DB", str(tmp_path / getattr(request, "param", "not-a-store.db")))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def assert_one_line_error(code: int, out: str, err: str, argv: list[str]) -> None:
    shown = f"clawsdk {' '.join(argv)}\n--- stdout\n{out}\n--- stderr\n{err}"
    assert "Traceback" not in out + err, shown
    assert code == 2, shown
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, shown
    assert lines[-1].lower().startswith(("error", "usage", "try ")) or "error" in err.lower(), shown


@pytest.mark.parametrize("path,cmd,bad_files", bad_cases(), indirect=["bad_files"])
def test_every_command_with_missing_files_unknown_names_and_a_bad_store_is_one_line_exit_2(path, cmd, bad_files,
                                                                                          capsys):
    argv = bad_invocation(path, cmd, bad_files)
    code, out, err = call(argv, capsys)
    assert_one_line_error(code, out, err, argv)
    errors = [line for line in err.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1, err


@pytest.mark.parametrize("bad_files", ["not-a-store.db"], indirect=True)  # usage errors come before any store
@pytest.mark.parametrize("path,cmd", COMMANDS, ids=IDS)
def test_every_command_with_an_unknown_option_or_a_bad_option_value_is_a_usage_error(path, cmd, bad_files, capsys):
    code, out, err = call([*path, "--no-such-option"], capsys)
    assert_one_line_error(code, out, err, [*path, "--no-such-option"])
    typed = [p for p in cmd.params if isinstance(p, click.Option) and not p.is_flag
             and isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType, click.Choice))]
    for p in typed[:3]:
        argv = [*path, p.opts[0], "not-a-value"]
        code, out, err = call(argv, capsys)
        assert_one_line_error(code, out, err, argv)
        assert p.opts[0] in err or p.name in err, err


def test_readers_of_a_non_sqlite_file_name_it(bad_files, capsys):
    not_sqlite = str(bad_files / "not-a-store.db")
    for argv in (["runs", "--db", not_sqlite], ["show", "r123", "--db", not_sqlite], ["watch", "--db", not_sqlite],
                 ["runs", "--db", str(bad_files / "a-file")]):
        code, out, err = call(argv, capsys)
        assert_one_line_error(code, out, err, argv)
        assert ("not a SQLite" in err and "not-a-store.db" in err) or "a-file" in err, err


def test_readers_of_a_store_another_process_is_still_creating_say_so(bad_files, capsys, monkeypatch):
    """The file exists (the writer opened it) but has no tables yet."""
    db = bad_files / "creating.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    con.commit()
    for argv in (["runs", "--db", str(db)], ["show", "r1", "--db", str(db)], ["watch", "--db", str(db)]):
        code, out, err = call(argv, capsys)
        assert_one_line_error(code, out, err, argv)
        assert "being created" in err and "try again" in err, err
    con.close()


def test_show_refuses_an_attempt_the_rollout_never_had_and_shows_an_earlier_one_as_it_ended(
        tmp_path, capsys, flaky_sandbox):
    """`show --attempt 7` printed a header "attempt 7" under the last attempt's status and score, and an
    earlier real attempt showed the last one's `ok 1.00`."""
    from clawsdk import load_tasks, run_sync
    from tests.conftest import make_task

    db = tmp_path / "store.db"
    tasks = load_tasks(make_task(tmp_path / "tasks")).tasks
    run_sync(tasks, agent="oracle", sandbox=flaky_sandbox, db=db, backoff_s=0.01, run_id="f")
    with Store(db) as store:
        [row] = store.rollouts("f")
    assert row["attempt"] == 1 and row["failure_kind"] == "ok"
    for bad in ("7", "-1"):
        argv = ["show", row["id"], "--attempt", bad, "--db", str(db)]
        code, out, err = call(argv, capsys)
        assert_one_line_error(code, out, err, argv)
        assert f"rollout {row['id']} has attempts 0..1" in err, err
    code, out, err = call(["show", row["id"], "--attempt", "0", "--db", str(db)], capsys)
    text = " ".join(out.split())
    assert code == 0, err
    assert "attempt 0" in text and "ending sandbox_error" in text and "no verdict" in text, text
    assert "ending ok" not in text and "reward 1.00" not in text and "disk went away" in text
    code, out, err = call(["show", row["id"], "--db", str(db)], capsys)
    assert code == 0 and "ending ok reward 1.00" in " ".join(out.split())


def test_a_sandbox_root_that_cannot_hold_workspaces_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    """It made every rollout end sandbox_error (unscored, retried) and the run exit 0; the reason showed only
    in `clawsdk show`."""
    from tests.conftest import make_task

    make_task(tmp_path / "tasks", "t1")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    db = tmp_path / "store.db"
    run = ["run", str(tmp_path / "tasks"), "--sandbox", "local", "--db", str(db)]
    for argv, env, named in ([[*run, "--sandbox-root", str(a_file)], None, "--sandbox-root"],
                             [[*run, "--sandbox-root", str(a_file / "below")], None, "--sandbox-root"],
                             [run, str(a_file), "CLAWSDK_SANDBOX_ROOT"]):
        if env:
            monkeypatch.setenv("CLAWSDK_SANDBOX_ROOT", env)
        code, out, err = call(argv, capsys)
        assert_one_line_error(code, out, err, argv)
        text = " ".join(err.split())
        assert named in text and str(a_file) in text, text
        assert "point it at a folder you can write to" in text, text
        assert not db.exists()  # nothing ran, nothing recorded


def test_a_run_that_scored_nothing_exits_1_with_the_reason(tmp_path, capsys):
    """A model that could not load ended every rollout model_error (unscored, retried, each retry loading it
    again) and the run exited 0, as if it had measured something."""
    from tests.conftest import make_task

    make_task(tmp_path / "tasks", "t1")
    make_task(tmp_path / "tasks", "t2")
    db = tmp_path / "store.db"
    argv = ["run", str(tmp_path / "tasks"), "--sandbox", "local", "--db", str(db), "--agent", "tool-loop",
            "--model", f"transformers:{tmp_path / 'no-such-checkpoint'}"]
    code, out, err = call(argv, capsys)
    assert "Traceback" not in out + err
    assert code == 1, err
    text = " ".join(err.split())
    assert "no rollout of this run was scored; the first reason:" in text, text
    assert f"transformers:{tmp_path / 'no-such-checkpoint'}: no such folder" in text, text
    assert "endings: model_error 2" in " ".join(out.split())
    with Store(db) as s:
        assert {r["failure_kind"] for r in s.rollouts(s.runs()[0]["id"])} == {"model_error"}


def test_bench_run_refuses_such_a_sandbox_root_before_it_records_anything(tmp_path, monkeypatch):
    import anyio

    from clawsdk.bench.run import bench_run
    from clawsdk.errors import SandboxError
    from clawsdk.sandbox.base import SandboxConfig

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    db = tmp_path / "store.db"
    with pytest.raises(SandboxError, match=r"--sandbox-root .*a-file: is a file, not a folder"):
        anyio.run(lambda: bench_run(tmp_path / "no-manifest.json",
                                    sandbox_config=SandboxConfig(root=str(a_file)), db=db))
    monkeypatch.setenv("CLAWSDK_SANDBOX_ROOT", str(a_file))
    with pytest.raises(SandboxError, match=r"CLAWSDK_SANDBOX_ROOT=.*a-file: is a file"):
        anyio.run(lambda: bench_run(tmp_path / "no-manifest.json", db=db))
    assert not db.exists()


def test_watch_of_a_run_the_store_does_not_hold_says_so_instead_of_waiting(tmp_path, capsys):
    db = tmp_path / "store.db"
    Store(db).close()
    argv = ["watch", "--db", str(db), "--run", "nope"]
    code, out, err = call(argv, capsys)
    assert_one_line_error(code, out, err, argv)
    assert "no run 'nope'" in err and "clawsdk runs" in err, err


def test_a_sqlite_file_that_is_not_a_clawsdk_store_is_left_alone_and_named(tmp_path, capsys):
    """`run --db other.db` wrote clawsdk's tables into someone else's database; readers then said it was
    "being created by another process"."""
    from tests.conftest import make_task

    make_task(tmp_path / "tasks", "t1")
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.execute("INSERT INTO notes VALUES ('mine')")
    con.commit()
    con.close()
    for argv in (["run", str(tmp_path / "tasks"), "--sandbox", "local", "--db", str(other)],
                 ["data", "select", "--db", str(other)], ["runs", "--db", str(other)],
                 ["show", "r1", "--db", str(other)], ["watch", "--db", str(other)]):
        code, out, err = call(argv, capsys)
        assert_one_line_error(code, out, err, argv)
        text = " ".join(err.split())
        assert f"{other}: not a clawsdk store" in text and "being created" not in text, text
    con = sqlite3.connect(other)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["notes"]
    assert con.execute("SELECT body FROM notes").fetchall() == [("mine",)]


def test_a_store_written_by_a_newer_clawsdk_says_upgrade_not_a_bug(tmp_path, capsys):
    db = tmp_path / "store.db"
    with Store(db) as store:
        store.db.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_future', 'x')")
        store.db.conn.commit()
    argv = ["data", "select", "--db", str(db)]
    code, out, err = call(argv, capsys)
    assert_one_line_error(code, out, err, argv)
    text = " ".join(err.split())
    assert f"{db}: written by a newer clawsdk" in text and "upgrade clawsdk" in text, text
    assert "a bug" not in text, text


@pytest.mark.parametrize("columns", ["0", "-3", "abc"])
def test_an_odd_columns_value_still_shows_the_error(tmp_path, columns):
    """COLUMNS=0 made every line rich prints vanish, errors too: `clawsdk run` exited 2 in silence."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "clawsdk", "run", str(tmp_path / "missing")], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": columns}, timeout=120)
    assert proc.returncode == 2
    assert f"error: {tmp_path / 'missing'}: no such file or folder" in " ".join(proc.stderr.split()), proc.stderr


def test_a_scripted_agents_script_is_read_as_untrusted_input(tmp_path, capsys):
    """A YAML error in --agent-opt script=FILE was `ParserError ... (a bug in clawsdk)`; a fifo or an alias bomb
    hung the run before it started."""
    from tests.conftest import make_task

    make_task(tmp_path / "tasks", "t1")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- tool: write\n  args: [\n")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)))
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for script, why in ((bad, "invalid YAML: line 3"), (fifo, "is not a regular file"), (bomb, "")):
        argv = ["run", str(tmp_path / "tasks"), "--agent", "scripted", "--agent-opt", f"script={script}",
                "--sandbox", "local", "--db", str(tmp_path / "s.db")]
        code, out, err = call(argv, capsys)
        assert_one_line_error(code, out, err, argv)
        text = " ".join(err.split())
        assert f"the scripted agent's script: {script}" in text and why in text, text


@pytest.mark.parametrize("spec", ["", "  ", "clawgym:"])
def test_an_empty_task_path_is_refused_not_read_as_the_working_folder(tmp_path, capsys, monkeypatch, spec):
    """`clawsdk run ""` (an unset $TASKS) ran every task found under the working folder."""
    from tests.conftest import make_task

    make_task(tmp_path, "here")
    monkeypatch.chdir(tmp_path)
    argv = ["run", spec, "--sandbox", "local", "--db", str(tmp_path / "s.db")]
    code, out, err = call(argv, capsys)
    assert_one_line_error(code, out, err, argv)
    assert "an empty task path; give a task file or folder" in err, err
    assert not (tmp_path / "s.db").exists()
