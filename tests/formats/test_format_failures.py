"""Broken reward scripts and grade() functions: a clear message in the store and the CLI, and the run goes on."""

from __future__ import annotations

import json

from clawsdk_plugins.sources.clawgym import REWARD_SH
from click.testing import CliRunner

from clawsdk import Store
from clawsdk.cli import cli


def _clawgym(root, tid, reward_sh=REWARD_SH, check="import json\nprint(json.dumps({'a': 1, 'b': True}))\n",
             entry_extra=None):
    folder = root / "cg" / tid
    (folder / "input_files").mkdir(parents=True)
    (folder / "input_files" / "in.txt").write_text("x\n")
    (folder / "reward").mkdir()
    (folder / "reward" / "reward.sh").write_text(reward_sh)
    (folder / "reward" / "check.py").write_text(check)
    entry = {"task_id": tid, "user_query": f"do {tid}", "metadata": {"grading_type": "automated"}}
    entry.update(entry_extra or {})
    (folder / "data_entry.json").write_text(json.dumps(entry))


def _pinch(root, tid, body):
    folder = root / "pb"
    folder.mkdir(exist_ok=True)
    (folder / f"task_{tid}.md").write_text(
        f"---\nid: {tid}\nname: x\ngrading_type: automated\ntimeout_seconds: 30\n---\n\n## Prompt\n\nDo {tid}.\n\n"
        f"## Automated Checks\n\n```python\ndef grade(transcript, workspace_path):\n{body}\n```\n")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_each_broken_verifier_is_named_and_the_others_still_score(tmp_path, db):
    _clawgym(tmp_path, "good")
    _clawgym(tmp_path, "garbage", reward_sh="#!/usr/bin/env bash\necho 'all done!'\necho banana\n")
    _clawgym(tmp_path, "crashes", reward_sh="#!/usr/bin/env bash\necho 'check.py: No such file' >&2\nexit 3\n")
    _clawgym(tmp_path, "silent", reward_sh="#!/usr/bin/env bash\ntrue\n")
    _clawgym(tmp_path, "hangs", reward_sh="#!/usr/bin/env bash\nsleep 60\necho 1\n",
             entry_extra={"clawsdk": {"verifier": {"type": "clawgym", "timeout_s": 1}}})
    _pinch(tmp_path, "raises", "    raise KeyError('score_me')")
    _pinch(tmp_path, "notdict", "    return [1, 2]")
    _pinch(tmp_path, "fine", "    return {'x': 1.0, 'y': 0.0}")
    (tmp_path / "cg" / "broken").mkdir()
    (tmp_path / "cg" / "broken" / "data_entry.json").write_text("{oops")

    r = invoke("run", f"clawgym:{tmp_path / 'cg'}", f"pinchbench:{tmp_path / 'pb'}", "--agent", "scripted",
               "--db", db, "--run-id", "bad", "--retries", "0", "-c", "4", "--json")
    assert r.exit_code in (0, 1), r.output
    assert "data_entry.json: invalid JSON at line 1" in r.output  # reported, the rest ran
    with Store(db) as store:
        rows = {o["task_id"]: o for o in store.rollouts("bad")}
        errs = store.task_errors("bad")
        verdicts = {tid: store.verdict(o["id"]) for tid, o in rows.items()}
    assert len(rows) == 8 and "invalid JSON" in errs[0]["message"]
    assert rows["good"]["reward"] == 1.0 and rows["fine"]["reward"] == 0.5
    # a script that runs but says nothing usable is a scored 0 with the reason kept
    for tid, reason in [("garbage", "not a number: 'banana'"), ("crashes", "exited with code 3: check.py: No such"),
                        ("silent", "printed nothing")]:
        assert rows[tid]["failure_kind"] == "ok" and rows[tid]["reward"] == 0.0
        assert reason in verdicts[tid]["detail"], verdicts[tid]["detail"]
    assert rows["hangs"]["failure_kind"] == "verifier_timeout" and rows["hangs"]["reward"] is None
    assert "reward/reward.sh did not finish within 1 s" in rows["hangs"]["error"]
    assert rows["raises"]["failure_kind"] == "verifier_error"
    assert "grade() raised KeyError: 'score_me'" in rows["raises"]["error"]
    assert "must return a dict" in rows["notdict"]["error"]

    shown = " ".join(invoke("show", rows["garbage"]["id"], "--db", db).output.split())
    assert "scored 0: the last line of reward.sh's output is not a number: 'banana'" in shown
    shown = " ".join(invoke("show", rows["raises"]["id"], "--db", db).output.split())
    assert "grade() raised KeyError" in shown


def test_validate_reports_baselines_and_a_missing_judge_clearly(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAWSDK_JUDGE", raising=False)
    _clawgym(tmp_path, "zero", check="import json\nprint(json.dumps({'a': 0}))\n")
    _clawgym(tmp_path, "credit", check="import json\nprint(json.dumps({'a': 1, 'b': 0}))\n")
    entry = {"task_id": "judged", "user_query": "x",
             "metadata": {"grading_type": "hybrid", "rule": [{"name": "r", "scores": {"0": "bad", "1": "good"}}]}}
    _clawgym(tmp_path, "judged", entry_extra=entry)
    r = invoke("tasks", "validate", f"clawgym:{tmp_path / 'cg'}", "--json")
    out = {t["task_id"]: t for t in json.loads(r.output)["tasks"]}
    assert out["zero"]["ok"] and out["zero"]["baseline_score"] == 0.0
    assert out["credit"]["baseline_score"] == 0.5 and "untouched workspace scores 0.500" in out["credit"]["problem"]
    assert "no judge model for the rubric: set CLAWSDK_JUDGE" in out["judged"]["problem"]
    assert r.exit_code == 1


def test_a_grade_that_breaks_on_what_the_agent_left_scores_it_0_not_unscored(tmp_path):
    """grade() raising on the agent's deliverable (not UTF-8, another JSON shape) ended verifier_error, so an
    agent could drop a task it failed from its score; a grade that raises on the untouched task too is
    still the task's error."""
    from clawsdk_plugins.agents.builtin import ScriptedAgent

    from clawsdk import run_sync
    from clawsdk.tasks.sources import load_tasks

    _pinch(tmp_path, "fragile", "    import json\n    from pathlib import Path\n"
                                "    p = Path(workspace_path) / 'out.json'\n"
                                "    if not p.is_file():\n        return {'total': 0.0}\n"
                                "    return {'total': float(json.loads(p.read_text())['total'] == 42)}")
    _pinch(tmp_path, "broken", "    return {'total': float(transcript[0]['no such key'])}")
    tasks = {t.id: t for t in load_tasks(f"pinchbench:{tmp_path / 'pb'}").tasks}
    for i, (command, reward) in enumerate((("echo '{\"total\": 42}' > out.json", 1.0),
                                           ("echo '[1, 2]' > out.json", 0.0),  # TypeError in grade()
                                           ("printf '\\377\\376' > out.json", 0.0),  # UnicodeDecodeError
                                           ("mkdir out.json", 0.0), ("true", 0.0))):
        calls = [{"tool": "exec", "args": {"command": command}}]
        [o] = run_sync([tasks["fragile"]], agent=ScriptedAgent(calls), db=tmp_path / f"{i}.db", retries=0).outcomes
        assert (o.kind.value, o.reward) == ("ok", reward), (command, o)
    [o] = run_sync([tasks["broken"]], agent=ScriptedAgent([]), db=tmp_path / "broken.db", retries=0).outcomes
    assert o.kind.value == "verifier_error" and "on the task's untouched files too" in o.error, o


def test_a_grade_the_agents_files_slow_down_scores_0_and_one_slow_on_its_own_stays_unscored(tmp_path):
    """grade() past its timeout ended verifier_timeout (unscored) even when what slowed it was the agent's
    deliverable. As for an error, the untouched task decides: quick there, 0; slow there too, unscored."""

    from clawsdk import run_sync
    from clawsdk.tasks.model import VerifierSpec
    from clawsdk.tasks.sources import load_tasks

    _pinch(tmp_path, "slowed", "    import re\n    from pathlib import Path\n"
                               "    p = Path(workspace_path) / 'out.txt'\n"
                               "    text = p.read_text() if p.is_file() else ''\n"
                               "    re.findall(r'(\\d+)+\\.', text)\n    return {'total': float(text == '42')}")
    _pinch(tmp_path, "slow", "    import re\n    re.findall(r'(\\d+)+\\.', '1' * 40)\n    return {'total': 1.0}")
    tasks = {}
    for t in load_tasks(f"pinchbench:{tmp_path / 'pb'}").tasks:
        spec = VerifierSpec.model_validate({**t.verifier.model_dump(), "timeout_s": 3.0})
        tasks[t.id] = t.model_copy(update={"verifier": spec})
    calls = [{"tool": "write", "args": {"path": "out.txt", "content": "1" * 40}}]
    from clawsdk_plugins.agents.builtin import ScriptedAgent
    [o] = run_sync([tasks["slowed"]], agent=ScriptedAgent(calls), db=tmp_path / "a.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.0), o
    [o] = run_sync([tasks["slow"]], agent=ScriptedAgent([]), db=tmp_path / "b.db", retries=0).outcomes
    assert o.kind.value == "verifier_timeout" and "untouched files" in o.error, o
