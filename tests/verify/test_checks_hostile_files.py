"""What the agent leaves where a check reads is the agent's: the check scores it, never ends unscored.

Each of these ended verifier_error (unscored) or, for the regex, held the run's event loop: a CSV field
over csv's limit or a newline in an unquoted field, JSON nested past Python's recursion or holding a
5,000-digit number, a symlink out of the workspace, a text the task's pattern backtracks on without end.
"""

from __future__ import annotations

import anyio
import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import run_sync
from clawsdk.tasks.sources import load_tasks
from clawsdk.verify import checks as checks_module
from tests.conftest import loop_ticks, make_task
from tests.sandbox.sandbox_backends import skip_unless_available

CHECKS = {
    "json": {"type": "json_equals", "path": "out", "expected": {"a": 1}},
    "json-subset": {"type": "json_equals", "path": "out", "expected": {"a": [1]}, "subset": True, "ignore_order": True},
    "csv": {"type": "csv_equals", "path": "out", "expected": [["a"], ["1"]], "ignore_row_order": True},
    "text": {"type": "text_equals", "path": "out", "text": "x"},
    "contains": {"type": "text_contains", "path": "out", "texts": ["zz"]},
    "regex": {"type": "regex", "path": "out", "pattern": "(a+)+$"},
}
FILES = {
    "nested JSON": "python3 -c \"print('[' * 100000 + ']' * 100000)\" > out",
    "a 5,000-digit number": "python3 -c \"print('{\\\"a\\\": ' + '9' * 5000 + '}')\" > out",
    "a 400-digit number": "python3 -c \"print('{\\\"a\\\": 1' + '0' * 400 + '}')\" > out",
    "a CSV field over the limit": "python3 -c \"print('a,' + 'x' * 200000)\" > out",
    "a newline in an unquoted field": "printf 'a\\r\\nb\\rc\\n' > out",
    "a symlink out": "ln -s /etc/hostname out",
    "a text (a+)+$ backtracks on": "python3 -c \"print('a' * 40 + '!')\" > out",
}


@pytest.mark.parametrize("what", sorted(FILES))
def test_a_file_no_check_can_read_scores_0(what, tmp_path, monkeypatch):
    monkeypatch.setattr(checks_module, "REGEX_TIMEOUT_S", 2.0)
    tasks = [load_tasks(make_task(tmp_path / name, name, checks=[check])).tasks[0] for name, check in CHECKS.items()]
    r = run_sync(tasks, agent=ScriptedAgent([{"tool": "exec", "args": {"command": FILES[what]}}]),
                 db=tmp_path / "r.db", retries=0, concurrency=len(tasks))
    assert {o.task_id: (o.kind.value, o.reward) for o in r.outcomes} == {n: ("ok", 0.0) for n in CHECKS}, r.outcomes


def test_a_regex_check_that_backtracks_is_stopped_and_the_loop_stays_free(tmp_path, monkeypatch):
    monkeypatch.setattr(checks_module, "REGEX_TIMEOUT_S", 2.0)
    task = load_tasks(make_task(tmp_path / "t", "t", checks=[CHECKS["regex"]])).tasks[0]

    async def main():
        from clawsdk.runtime.runner import run

        async with loop_ticks() as ticks:
            started = anyio.current_time()
            result = await run([task], agent=ScriptedAgent([{"tool": "write", "args": {
                "path": "out", "content": "a" * 40 + "!\n"}}]), db=tmp_path / "r.db", retries=0)
            took = anyio.current_time() - started
        return result, took, ticks

    result, took, ticks = anyio.run(main)
    [o] = result.outcomes
    assert o.kind.value == "ok" and o.reward == 0.0, o
    assert len(ticks) >= took / 0.05 / 3, f"the event loop ran {len(ticks)} times in {took:.1f} s: the check blocked it"


@pytest.mark.parametrize("backend", ["local", "bwrap"])
def test_checks_slowed_by_the_agents_content_score_0_within_the_verifiers_time(tmp_path, backend):
    """A check that runs long on what the agent left (an endless VIEW in its database; two regexes that
    each take their 20 s on a 200,000-digit line) ran until the whole verification timed out:
    verifier_timeout, unscored. Each check now gets at most what is left of the verifier's time."""
    skip_unless_available(backend)
    checks = [{"type": "command", "name": "count", "run": "sqlite3 out.db 'SELECT count(*) FROM items'"},
              {"type": "regex", "path": "report.txt", "pattern": r"(\d+)+\.\d\d"},
              {"type": "regex", "path": "report.txt", "pattern": r"(\d+)+\.\d+%"},
              {"type": "text_contains", "path": "done.txt", "text": "done"}]
    task = load_tasks(make_task(tmp_path / "t", "t", checks=checks,
                                extra={"limits": {"verifier_timeout_s": 8}})).tasks[0]
    slow = ("sqlite3 out.db 'CREATE VIEW items AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
            "SELECT x FROM n' && python3 -c \"print('1' * 200000)\" > report.txt && echo done > done.txt")
    r = run_sync([task], agent=ScriptedAgent([{"tool": "exec", "args": {"command": slow}}]), sandbox=backend,
                 db=tmp_path / "r.db", retries=0)
    [o] = r.outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.25), o


def test_a_command_check_slow_on_the_untouched_task_too_stays_unscored(tmp_path):
    """The other half: a check that is slow whatever the agent did is the task's, not the agent's 0."""
    task = load_tasks(make_task(tmp_path / "t", "t", checks=[{"type": "command", "run": "sleep 30"}],
                                extra={"limits": {"verifier_timeout_s": 6}})).tasks[0]
    [o] = run_sync([task], agent="oracle", db=tmp_path / "r.db", retries=0).outcomes
    assert o.kind.value == "verifier_timeout" and "untouched files too" in o.error, o


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_the_untouched_run_does_not_see_the_agents_files_above_it(tmp_path, backend):
    """Like pytest (conftest.py) or git (.git/config), a check may look for its configuration in the folders
    above its own. A copy of the untouched task inside the workspace found the agent's, hung there too, and
    the rollout ended unscored; beside the hidden files it finds none, and the agent's hang scores 0."""
    skip_unless_available(backend)
    find_rc = ('p=$PWD; while [ "$p" != / ]; do if [ -f "$p/.checkrc" ]; then . "$p/.checkrc"; break; fi; '
               'p=$(dirname "$p"); done; test -f done.txt')
    task = load_tasks(make_task(tmp_path / "t", "t", checks=[{"type": "command", "run": find_rc}],
                                extra={"limits": {"verifier_timeout_s": 8}})).tasks[0]
    hang = {"tool": "write", "args": {"path": ".checkrc", "content": "sleep 60\n"}}
    [o] = run_sync([task], agent=ScriptedAgent([hang]), sandbox=backend, db=tmp_path / "r.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.0), o
