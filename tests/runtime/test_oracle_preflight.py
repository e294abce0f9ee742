"""The oracle agent on tasks without a reference solution is refused before any rollout starts.

It ran them: every rollout ended agent_error, scored with the untouched workspace's reward, and the run
reported pass@1 0.00 with no warning; those rows then fed pass rates, `bench build --runs` and exports.
"""

from __future__ import annotations

import pytest

from clawsdk import run_sync
from clawsdk.runtime.oracle import OracleAgent
from clawsdk.tasks.sources import load_tasks
from tests.cli.test_cli_errors import call
from tests.conftest import make_task


def _tasks(root, without: int, with_solution: int = 0):
    for i in range(without):
        make_task(root, f"bare-{i}", steps=[])
    for i in range(with_solution):
        make_task(root, f"solved-{i}")
    return root


def test_the_cli_refuses_the_oracle_on_tasks_without_a_solution_in_one_line_exit_2(tmp_path, capsys):
    tasks = _tasks(tmp_path / "tasks", without=7, with_solution=1)
    db = tmp_path / "store.db"
    argv = ["run", str(tasks), "--agent", "oracle", "--sandbox", "local", "--db", str(db)]
    code, out, err = call(argv, capsys)
    assert "Traceback" not in out + err and code == 2, (code, out, err)
    text = " ".join(err.split())
    assert "7 of 8 task(s) have no reference solution" in text, text
    assert "bare-0" in text and "and 2 more" in text and "solved-0" not in text, text
    assert "another agent" in text, text
    assert not db.exists()  # nothing ran, nothing recorded


def test_the_python_api_refuses_it_too_and_runs_tasks_that_all_have_one(tmp_path):
    [bare] = load_tasks(str(_tasks(tmp_path / "a", without=1))).tasks
    with pytest.raises(ValueError, match="bare-0"):
        run_sync([bare], agent=OracleAgent(), sandbox="local", db=tmp_path / "a.db")
    assert not (tmp_path / "a.db").exists()
    solved = load_tasks(str(_tasks(tmp_path / "b", without=0, with_solution=2))).tasks
    result = run_sync(solved, agent="oracle", sandbox="local", db=tmp_path / "b.db")
    assert [o.reward for o in result.outcomes] == [1.0, 1.0]


def test_a_bench_run_refused_so_leaves_no_registration(tmp_path):
    """bench run registered the run as a partial benchmark run before the agent refused: a run that never was
    showed in `clawsdk bench list`."""
    import anyio

    from clawsdk.bench.build import BuildOptions, select
    from clawsdk.bench.run import bench_run
    from clawsdk.store.store import Store

    tasks = load_tasks(str(_tasks(tmp_path / "tasks", without=2))).tasks
    manifest = select(tasks, BuildOptions(name="refused", version="1", band=None)).manifest
    with pytest.raises(ValueError, match="have no reference solution"):
        anyio.run(lambda: bench_run(manifest, agent="oracle", sandbox="local", db=tmp_path / "s.db",
                                    task_specs=[str(tmp_path / "tasks")], run_id="refused"))
    with Store(tmp_path / "s.db") as s:
        assert s.query("SELECT run_id FROM bench_runs") == [] and s.run("refused") is None
