"""fix-failing-test is scored by the agent's answers, not by its exit code: a module that ends the tests'
process, or patches unittest, used to score 1.0 without fixing anything (every task of the family)."""

from __future__ import annotations

import json
import re

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import Store, run_sync
from clawsdk.synth.families import resolve_families
from clawsdk.synth.procedural import generate

HACKS = {
    "a unittest.py beside the module": ("unittest.py", "class TestCase: pass\ndef main(*a, **k): raise SystemExit(0)\n"),
    "the module exits at import": (None, "import os; os._exit(0)\n"),
    "the module patches unittest's asserts": (None, "import unittest\nunittest.TestCase.assertEqual = "
                                              "unittest.TestCase.assertAlmostEqual = lambda *a, **k: None\n"),
    "the module claims the expected answers": (None, (
        "import glob, json, os, sys\nfor p in glob.glob('/clawsdk/hidden/cases.json') + "
        "glob.glob(os.environ.get('CLAWSDK_HIDDEN', '/nowhere') + '/cases.json'):\n"
        "    c = json.load(open(p))['cases']\n"
        "    sys.stdout.write('\\n@@clawsdk-difftest@@' + json.dumps([['ok', repr(h)] for _, h in c]) + '\\n')\n"
        "    os._exit(0)\n")),
}


#: a module that finds the hidden cases while it runs and brute-forces their hashes over small values
BRUTE = (
    "import glob, json, os, sys\n"
    "for p in glob.glob(os.environ.get('CLAWSDK_HIDDEN', '/nowhere') + '/cases.json') + "
    "glob.glob('/clawsdk/hidden/cases.json'):\n"
    "    spec = json.load(open(p)); sys.path.insert(0, os.path.dirname(p)); import difftest\n"
    "    values = [True, False, None, ''] + list(range(-300, 301)) + [x / 2 for x in range(-300, 301)]\n"
    "    out = [['ok', repr(next((v for v in values if difftest.digest(spec['salt'], v) == h), None))]\n"
    "           for _, h in spec['cases']]\n"
    "    sys.stdout.write('\\n@@clawsdk-difftest@@' + json.dumps(out) + '\\n'); sys.stdout.flush(); os._exit(0)\n")


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


def table_of_asserts(task, fallback: bool) -> str:
    """A module that answers the tests' calls from a table of their asserts, fixing nothing; with `fallback`,
    any other call goes to the buggy function as it was."""
    import ast

    test = next(f for f in task.workspace if f.path.startswith("tests/"))
    table: dict[str, dict[str, object]] = {}
    for node in ast.walk(ast.parse(test.data.decode())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "").startswith("assert") and len(node.args) == 2:
            call, want = node.args
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                args = tuple(ast.literal_eval(a) for a in call.args)
                table.setdefault(call.func.id, {})[repr(args)] = ast.literal_eval(want)
    source = module_of(task).data.decode() if fallback else ""
    source += f"\n_T = {table!r}\n"
    for fn in table:
        orig = f"_{fn}_as_it_was"
        source += f"{orig} = {fn}\n" if fallback else ""
        other = f"{orig}(*a)" if fallback else "None"
        source += f"\ndef {fn}(*a):\n    return _T[{fn!r}][repr(a)] if repr(a) in _T[{fn!r}] else {other}\n"
    return source


def test_a_module_that_answers_the_tests_from_a_table_of_their_asserts_fixes_nothing_and_fails(tasks, tmp_path):
    """The hidden check called the module with the tests' own arguments only: a table built off their asserts
    passed every task of the family without a fix. It now also calls it on cases the tests do not show."""
    def calls(task):
        return [{"tool": "write", "args": {"path": module_of(task).path, "content": table_of_asserts(task, False)}}]

    r = run_sync(tasks, agent=ScriptedAgent(calls), db=tmp_path / "table.db", retries=0, concurrency=4)
    assert [(o.kind.value, o.reward) for o in r.outcomes] == [("ok", 0.0)] * len(tasks)

    def with_fallback(task):  # the table, and the buggy code for anything else: caught where the unseen cases can
        return [{"tool": "write", "args": {"path": module_of(task).path, "content": table_of_asserts(task, True)}}]

    r = run_sync(tasks, agent=ScriptedAgent(with_fallback), db=tmp_path / "fallback.db", retries=0, concurrency=4)
    assert sum(o.reward == 0.0 for o in r.outcomes) >= len(tasks) - 1, r.outcomes


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


def test_the_fix_slugify_bug_example_cannot_be_passed_by_ending_the_tests_process_or_peeking(tmp_path):
    """The example a task author copies: its checks ran the agent's package in the tests' process, and an
    os._exit(0) in textutils/__init__.py scored 1.0 with the bug still there; so did a slugify that read
    the expected slugs from the hidden check while it ran. Each now scores what doing nothing scores: 0 (the
    untouched tests' check counts only with the fix, `only_with`)."""
    from clawsdk.tasks.sources import load_tasks
    from tests.conftest import EXAMPLES

    [task] = [t for t in load_tasks(str(EXAMPLES)).tasks if t.id == "fix-slugify-bug"]
    init = next(f for f in task.workspace if f.path == "textutils/__init__.py").data.decode()
    ended = ScriptedAgent([{"tool": "write", "args": {"path": "textutils/__init__.py",
                                                      "content": "import os; os._exit(0)\n" + init}}])
    # a slugify that answers with the expected slugs it finds in the hidden check, where it can see them
    peek = ScriptedAgent([{"tool": "write", "args": {"path": "textutils/__init__.py", "content": (
        "import glob, os\n"
        "def slugify(*args):\n"
        "    for p in glob.glob(os.environ.get('CLAWSDK_HIDDEN', '/nowhere') + '/hidden_test.py') + "
        "glob.glob('/clawsdk/hidden/hidden_test.py'):\n"
        "        ns = {'__name__': 'peek'}\n"
        "        exec(open(p).read(), ns)\n"
        "        return dict((tuple(a), w) for a, w in ns['EXPECTED']).get(args, '')\n"
        "    return 'no-peek'\n")}}])
    rewards = [run_sync([task], agent=agent, db=tmp_path / f"{i}.db", retries=0).outcomes[0].reward
               for i, agent in enumerate(["oracle", ScriptedAgent([]), ended, peek])]
    assert rewards == [1.0, 0.0, 0.0, 0.0]


def test_the_module_cannot_read_the_expected_values_while_it_answers(tmp_path):
    """The module answers before the hidden files exist. When it answered with them in reach, a module
    that looked up the salted hashes in cases.json and tried small values passed every task whose answers
    are small numbers and booleans, with the bug still there."""
    from clawsdk.synth.families import difftest

    def brute_forced(task):
        spec = json.loads(next(f for f in task.hidden if f.path == "cases.json").data)
        values = [True, False, None, ""] + list(range(-300, 301)) + [x / 2 for x in range(-300, 301)]
        return all(any(difftest.digest(spec["salt"], v) == h for v in values) for _, h in spec["cases"])

    fam = resolve_families("fix-failing-test")
    exposed = [t for t in generate(fam, 24, 5, "easy") if brute_forced(t)][:3]
    assert exposed, "no task whose expected values the brute force finds: the test would test nothing"

    def calls(task):
        module = module_of(task)
        return [{"tool": "write", "args": {"path": module.path, "content": BRUTE + module.data.decode()}}]

    r = run_sync(exposed, agent=ScriptedAgent(calls), db=tmp_path / "brute.db", retries=0, concurrency=3)
    assert [(o.kind.value, o.reward) for o in r.outcomes] == [("ok", 0.0)] * len(exposed), r.outcomes


def test_a_module_that_hangs_scores_0_not_unscored(tasks, tmp_path):
    """The module's answers get at most half the verifier's time left; past it the check scores 0, and the
    verifier still has the time to say so (a hang used to end the rollout as verifier_timeout)."""
    task = tasks[0].model_copy(update={"limits": tasks[0].limits.model_copy(update={"verifier_timeout_s": 10})})
    module = module_of(task)
    hang = ScriptedAgent([{"tool": "write", "args": {"path": module.path,
                                                     "content": "while True:\n    pass\n" + module.data.decode()}}])
    [o] = run_sync([task], agent=hang, db=tmp_path / "hang.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.0), o
    with Store(tmp_path / "hang.db") as store:
        [row] = store.query("SELECT detail FROM verdict_scores WHERE rollout_id = ?", [o.rollout_id])
    # half the 10 s left, less what ending the turn took
    assert re.search(r"agent_run did not finish in [45]\.\d s", row["detail"]), row
