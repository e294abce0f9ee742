"""fix-failing-test is scored by the agent's answers, not by its exit code: a module that ends the tests'
process, or patches unittest, used to score 1.0 without fixing anything (every task of the family)."""

from __future__ import annotations

import pytest

from clawsdk import run_sync
from clawsdk.synth.families import resolve_families
from clawsdk.synth.procedural import generate
from clawsdk_plugins.agents import ScriptedAgent

HACKS = {
    "a unittest.py beside the module": ("unittest.py", "class TestCase: pass\ndef main(*a, **k): raise SystemExit(0)\n"),
    "the module exits at import": (None, "import os; os._exit(0)\n"),
    "the module patches unittest's asserts": (None, "import unittest\nunittest.TestCase.assertEqual = "
                                              "unittest.TestCase.assertAlmostEqual = lambda *a, **k: None\n"),
    "the module claims the expected answers": (None, (
        "import glob, json, os, sys\nfor p in glob.glob('/**/cases.json', recursive=True) + "
        "glob.glob(os.environ.get('CLAWSDK_HIDDEN', '/nowhere') + '/cases.json'):\n"
        "    c = json.load(open(p))['cases']\n"
        "    sys.stdout.write('\\n@@clawsdk-difftest@@' + json.dumps([['ok', repr(h)] for _, h in c]) + '\\n')\n"
        "    os._exit(0)\n")),
}


@pytest.fixture(scope="module")
def tasks():
    fam = resolve_families("fix-failing-test")
    return list(generate(fam, 2, 3, "easy")) + list(generate(fam, 1, 4, "hard"))


def module_of(task):
    return next(f for f in task.workspace if f.path.endswith(".py") and "/" not in f.path)


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_an_agent_that_does_not_fix_the_bug_scores_0_however_it_games_the_tests(tasks, hack, tmp_path):
    path, code = HACKS[hack]

    def calls(task):
        module = module_of(task)
        return [{"tool": "write", "args": {"path": path or module.path,
                                           "content": code if path else code + module.data.decode()}}]

    r = run_sync(tasks, agent=ScriptedAgent(calls), db=tmp_path / "hack.db", retries=0, concurrency=4)
    assert [(o.kind.value, o.reward) for o in r.outcomes] == [("ok", 0.0)] * len(tasks), (hack, r.outcomes)


def test_the_fix_scores_1_even_printing_and_behind_a_stale_bytecode_cache(tasks, tmp_path):
    r = run_sync(tasks, agent="oracle", db=tmp_path / "oracle.db", retries=0, concurrency=4)
    assert [(o.kind.value, o.reward) for o in r.outcomes] == [("ok", 1.0)] * len(tasks)
    one_bug = [t for t in tasks if len(_oracle_edits(t)) == 1]
    assert one_bug

    def calls(task):
        # the buggy module imported (its .pyc cached), then fixed with a print, at the same size and
        # modification time: only a fresh bytecode cache sees the fix
        module, name = module_of(task), module_of(task).path[:-3]
        buggy = module.data.decode() + "#" * 200
        fixed = _oracle_edits(task)[0].args
        noisy = "print('loading')\n" + module.data.decode().replace(fixed["old_text"], fixed["new_text"])
        noisy += "#" * (len(buggy) - len(noisy))
        return [{"tool": "write", "args": {"path": module.path, "content": buggy}},
                {"tool": "exec", "args": {"command": f"python3 -c 'import {name}' && stat -c %Y {name}.py > .t"}},
                {"tool": "write", "args": {"path": module.path, "content": noisy}},
                {"tool": "exec", "args": {"command": f"touch -d @$(cat .t) {name}.py && python3 -c 'import {name}'"}}]

    r = run_sync(one_bug, agent=ScriptedAgent(calls), db=tmp_path / "noisy.db", retries=0, concurrency=4)
    assert [(o.kind.value, o.reward) for o in r.outcomes] == [("ok", 1.0)] * len(one_bug)


def _oracle_edits(task):
    return [c for c in task.solution if c.tool == "edit"]


def test_the_fix_slugify_bug_example_cannot_be_passed_by_ending_the_tests_process(tmp_path):
    """The example a task author copies: its checks ran the agent's package in the tests' process, and an
    os._exit(0) in textutils/__init__.py scored 1.0 with the bug still there. Now it scores what doing
    nothing scores (the untouched tests' check)."""
    from clawsdk.tasks.sources import load_tasks
    from tests.conftest import EXAMPLES

    [task] = [t for t in load_tasks(str(EXAMPLES)).tasks if t.id == "fix-slugify-bug"]
    init = next(f for f in task.workspace if f.path == "textutils/__init__.py").data.decode()
    ended = ScriptedAgent([{"tool": "write", "args": {"path": "textutils/__init__.py",
                                                      "content": "import os; os._exit(0)\n" + init}}])
    rewards = [run_sync([task], agent=agent, db=tmp_path / f"{i}.db", retries=0).outcomes[0].reward
               for i, agent in enumerate(["oracle", ScriptedAgent([]), ended])]
    assert rewards == [1.0, 0.25, 0.25]
