"""Files larger than the tools and verifiers read (MAX_READ_BYTES). They run in the runner's process:
`read` of one agent's 100 MiB file of short lines took the runner to 2.6 GB, and the sandbox lets a
command write 1 GiB, so one agent could take the memory every rollout of the run lives in."""

from __future__ import annotations

import json

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import Store, run_sync
from clawsdk.sandbox.base import MAX_READ_BYTES
from clawsdk.tasks.model import Task
from tests.formats.formats_helpers import use_scripted_judge
from tests.sandbox.sandbox_backends import skip_unless_available

MIB = MAX_READ_BYTES // 2**20
BIG = f"yes ab | head -c {MIB + 4}M > big.txt"  # short lines: what made `read` costly


@pytest.mark.parametrize("sandbox", ["local", "bwrap", "docker"])
def test_a_file_over_the_cap_is_a_clear_tool_error_and_a_scored_check(db, sandbox):
    skip_unless_available(sandbox)
    task = Task.model_validate({"id": "t-big", "instruction": "Write big.txt.", "verifier": {"type": "checks", "checks": [
        {"type": "file_exists", "path": "big.txt"}, {"type": "file_absent", "path": "big.txt"},
        {"type": "text_contains", "path": "big.txt", "text": "ab"},
        {"type": "json_equals", "path": "big.txt", "expected": [1]}]}})
    agent = ScriptedAgent([{"tool": "exec", "args": {"command": BIG}}, {"tool": "read", "args": {"path": "big.txt"}},
                           {"tool": "edit", "args": {"path": "big.txt", "old_text": "ab", "new_text": "cd"}},
                           {"tool": "grep", "args": {"pattern": "zz", "path": "big.txt"}},
                           {"tool": "exec", "args": {"command": "head -c 6 big.txt"}}])
    [o] = run_sync([task], agent=agent, db=db, retries=0, sandbox=sandbox).outcomes
    assert o.kind.value == "ok" and o.reward == pytest.approx(0.25), o.error
    with Store(db) as store:
        results = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "tool_result"]
        scores = {s["name"]: (s["score"], s["detail"]) for s in store.verdict(o.rollout_id)["subscores"]}
    too_big = f"big.txt is {MIB + 4:.1f} MiB, over the {MIB} MiB read of one file"
    for r in results[1:4]:  # read, edit, grep
        assert r["is_error"] and too_big in r["content"] and "exec (head" in r["content"], r
    assert json.loads(results[4]["content"])["stdout"] == "ab\nab\n"  # exec still sees it whole
    assert scores["file_exists:big.txt"] == (1.0, "exists") and scores["file_absent:big.txt"] == (0.0, "exists")
    assert scores["text_contains:big.txt"] == (0.0, too_big)


def test_the_judge_is_told_a_file_was_too_large_to_show(db):
    judge = use_scripted_judge(json.dumps({"scores": {"r": {"score": 0, "reason": "not shown"}}}))
    task = Task.model_validate({"id": "t-big-judge", "instruction": "Write big.txt.", "verifier": {
        "type": "rubric", "judge": "scripted-judge", "rules": [{"name": "r", "file_path": "big.txt",
                                                                "scores": {"0": "no", "1": "yes"}}]}})
    [o] = run_sync([task], agent=ScriptedAgent([{"tool": "exec", "args": {"command": BIG}}]), db=db,
                   retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.0), o.error
    assert f"[not shown: big.txt is {MIB + 4:.1f} MiB" in judge["calls"][0][-1]["content"]
