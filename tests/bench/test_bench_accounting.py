"""What a benchmark report must not hide: task files skipped unread, a refused resume, honest resume advice."""

from __future__ import annotations

import json

import anyio
import pytest
from clawsdk_plugins.commands.bench import make_group
from click.testing import CliRunner

from clawsdk.bench.render import status_line
from clawsdk.bench.report import build_report
from clawsdk.bench.results import load_run
from clawsdk.bench.run import bench_run
from clawsdk.runtime.runner import RunConflict, run
from clawsdk.store.store import Store
from clawsdk.tasks.sources import load_tasks
from tests.conftest import make_task


def _folder(root):
    """Two good tasks and one whose task.yaml is not YAML."""
    make_task(root, "t-a")
    make_task(root, "t-b", instruction="Write done.txt containing done, please.")
    (root / "t-broken").mkdir()
    (root / "t-broken" / "task.yaml").write_text("id: [unclosed\n")
    return root


def test_bench_run_of_a_folder_records_and_says_the_tasks_it_could_not_read(tmp_path, db):
    tasks = _folder(tmp_path / "tasks")
    res = CliRunner().invoke(make_group(), ["run", str(tasks), "--agent", "oracle", "--sandbox", "local", "-k", "1",
                                            "--run-id", "b1", "--db", str(db)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "skipped task:" in res.output and "t-broken" in res.output
    assert "complete:" not in res.output and "PARTIAL" in res.output
    with Store(db) as store:
        assert [e["path"] for e in store.task_errors("b1")] == [str(tasks / "t-broken" / "task.yaml")]
    res = CliRunner().invoke(make_group(), ["report", "b1", "--db", str(db), "--json", "-"])
    r = json.loads(res.output)
    assert r["status"] == "partial" and len(r["skipped_tasks"]) == 1


def test_bench_report_of_a_plain_run_counts_its_skipped_tasks_until_a_resume_reads_them(tmp_path, db):
    folder = _folder(tmp_path / "tasks")
    loaded = load_tasks(str(folder))
    anyio.run(lambda: run(loaded.tasks, agent="oracle", sandbox="local", run_id="r1", db=db,
                          task_errors=loaded.errors))
    res = CliRunner().invoke(make_group(), ["report", "r1", "--db", str(db), "--md", "-"])
    assert res.exit_code == 0, res.output
    assert "complete:" not in res.output
    assert "1 task file(s) could not be read" in res.output and "| **all** | 2/3 (1 unreadable) |" in res.output

    make_task(folder, "t-broken", instruction="Write done.txt with done in it.")  # fixed, and read by a resume: no longer skipped
    loaded = load_tasks(str(folder))
    assert not loaded.errors
    anyio.run(lambda: run(loaded.tasks, agent="oracle", sandbox="local", run_id="r1", db=db))
    with Store(db) as store:
        data = load_run(store, "r1")
    assert data.complete and data.skipped_tasks == [] and len(data.tasks) == 3


def test_a_refused_bench_resume_leaves_the_store_as_it_was(tmp_path, db):
    make_task(tmp_path / "tasks", "t-vt", checks=[{"type": "command", "run": "sleep 30"}],
              extra={"limits": {"verifier_timeout_s": 1}})
    first = anyio.run(lambda: bench_run(str(tmp_path / "tasks"), agent="oracle", sandbox="local", samples=1,
                                        db=db, run_id="b2", retries=0))
    assert first.data.unscored == 1
    with pytest.raises(RunConflict, match="started with agent 'oracle'"):
        anyio.run(lambda: bench_run(str(tmp_path / "tasks"), agent="scripted", sandbox="local", samples=1,
                                    db=db, run_id="b2", retries=0))
    with Store(db) as store:
        data = load_run(store, "b2")
    assert (data.unscored, data.pending) == (1, 0)


def test_partial_advice_for_a_plain_run_says_what_clawsdk_run_can_resume(tmp_path, db):
    make_task(tmp_path / "tasks", "t-vt", checks=[{"type": "command", "run": "sleep 30"}],
              extra={"limits": {"verifier_timeout_s": 1}})
    tasks = load_tasks(str(tmp_path / "tasks")).tasks
    anyio.run(lambda: run(tasks, agent="oracle", sandbox="local", run_id="r2", db=db, retries=0))
    with Store(db) as store:
        line = status_line(build_report(load_run(store, "r2")))
    assert "Resume with `clawsdk run" not in line
    assert "resumes samples not finished" in line and "add --retry-unscored to run the 1 unscored again" in line
    # bench run refuses a run it did not create
    res = CliRunner().invoke(make_group(), ["run", str(tmp_path / "tasks"), "--agent", "oracle", "--sandbox",
                                            "local", "--run-id", "r2", "--db", str(db)])
    assert res.exit_code != 0 and "not a benchmark run" in res.output


def test_a_plain_run_resumed_with_retry_unscored_runs_its_unscored_samples_again(tmp_path, db):
    """What the PARTIAL advice says works: the unscored sample gets a next attempt, the scored one is kept."""
    from clawsdk.cli import cli

    up = tmp_path / "verifier-can-run"  # the verifier hangs (verifier_timeout: unscored) until this file exists
    make_task(tmp_path / "tasks", "t-ok")
    make_task(tmp_path / "tasks", "t-flaky", checks=[{"type": "command", "run": f"test -f {up} || sleep 30"}],
              extra={"limits": {"verifier_timeout_s": 1}})
    args = ["run", str(tmp_path / "tasks"), "--agent", "oracle", "--sandbox", "local", "--run-id", "r3",
            "--db", str(db), "--retries", "0", "--json"]
    first = json.loads(CliRunner().invoke(cli, args).stdout)
    assert first["failure_kinds"] == {"ok": 1, "verifier_timeout": 1}
    up.touch()
    again = json.loads(CliRunner().invoke(cli, args).stdout)  # a plain resume keeps both
    assert (again["resumed_skipped"], again["retried_unscored"], again["unscored"]) == (2, 0, 1)
    retried = json.loads(CliRunner().invoke(cli, [*args, "--retry-unscored"]).stdout)
    assert (retried["resumed_skipped"], retried["retried_unscored"], retried["unscored"]) == (1, 1, 0)
    assert retried["total"]["passed"] == 2
    with Store(db) as store:
        (row,) = [r for r in store.rollouts("r3") if r["task_id"] == "t-flaky"]
    assert row["attempt"] == 1  # the next attempt; the first one's events stay under attempt 0


def test_two_ids_of_one_content_are_two_tasks_in_a_plain_runs_report(tmp_path):
    """The store keeps one task row per content (hash): grouped by hash, two ids merged into one task, which
    counted as complete on one id's pass beside the other's unscored sample."""
    from clawsdk import Store, load_tasks, run_sync
    from clawsdk.bench.results import load_run
    from tests.conftest import make_task

    for tid in ("dup-a", "dup-b", "other"):
        make_task(tmp_path / "tasks", tid)  # the same content under three ids
    db = tmp_path / "s.db"
    run_sync(load_tasks(str(tmp_path / "tasks")).tasks, agent="oracle", db=db, sandbox="local", run_id="d")
    with Store(db) as store:
        data = load_run(store, "d")
    assert sorted(t.id for t in data.tasks) == ["dup-a", "dup-b", "other"]
    assert all(t.n == 1 for t in data.tasks) and data.complete


def test_compare_pairs_every_id_of_one_content(tmp_path):
    from clawsdk import Store, load_tasks, run_sync
    from clawsdk.bench.compare import compare_runs
    from clawsdk.bench.results import load_run
    from tests.conftest import make_task

    for tid in ("dup-a", "dup-b", "other"):
        make_task(tmp_path / "tasks", tid)
    db = tmp_path / "s.db"
    for run_id in ("a", "b"):
        run_sync(load_tasks(str(tmp_path / "tasks")).tasks, agent="oracle", db=db, sandbox="local", run_id=run_id)
    with Store(db) as store:
        result = compare_runs(load_run(store, "a"), load_run(store, "b"))
    assert sorted(r["id"] for r in result["tasks"]) == ["dup-a", "dup-b", "other"]  # one of the two was dropped


def test_a_rate_is_never_shown_as_100_or_0_when_it_is_not():
    from clawsdk.bench.render import pct

    assert pct({"value": 1999 / 2000, "low": 0.997, "high": 1.0, "n": 2000}) == ">99.9 [99.7, 100.0]"
    assert pct({"value": 1 / 20000, "low": 0.0, "high": 0.0003, "n": 20000}) == "<0.1 [0.0, <0.1]"
    assert pct({"value": 1.0}) == "100.0" and pct({"value": 0.0}) == "0.0"
