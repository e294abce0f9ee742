"""The agent can never read reward/ or any hidden file during its run, through any file tool or exec."""

from __future__ import annotations

import glob
import json
import os
import tempfile

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from clawsdk_plugins.sources.clawgym import REWARD_SH

from clawsdk import Store, run_sync
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.sources import load_tasks
from tests.sandbox.sandbox_backends import skip_unless_available

MARKER = "SECRET-REWARD-7f3a9c"


def _task(root):
    folder = root / "src" / "task_hidden"
    (folder / "input_files").mkdir(parents=True)
    (folder / "input_files" / "notes.txt").write_text("hello\n")
    (folder / "reward").mkdir()
    (folder / "reward" / "reward.sh").write_text(REWARD_SH + f"# {MARKER}\n")
    (folder / "reward" / "check.py").write_text(
        f"import json, os, sys\n# {MARKER}\n"
        "print(json.dumps({'answer': float(os.path.exists(os.path.join(sys.argv[1], 'answer.txt')))}))\n")
    (folder / "data_entry.json").write_text(json.dumps(
        {"task_id": "task_hidden", "user_query": "Write answer.txt", "metadata": {"grading_type": "automated"}}))
    (task,) = load_tasks(f"clawgym:{folder}").tasks
    return task, folder


def _probes(sandbox_root: str, source: str, isolated: bool) -> list[dict]:
    split = f"'{MARKER[:6]}''{MARKER[6:]}'"  # the command itself must not hold the marker
    # the local sandbox does not isolate commands: the host's /tmp holds the task's source and the store
    wide = "/tmp /dev/shm /root" if isolated else ""
    calls = [
        {"tool": "read", "args": {"path": "reward/check.py"}},
        {"tool": "read", "args": {"path": "../hidden/reward/check.py"}},
        {"tool": "read", "args": {"path": f"{source}/reward/check.py"}},
        {"tool": "ls", "args": {"path": "..", "recursive": True}},
        {"tool": "ls", "args": {"path": ".", "recursive": True}},
        {"tool": "glob", "args": {"pattern": "**/*"}},
        {"tool": "glob", "args": {"pattern": "../**/check.py"}},
        {"tool": "grep", "args": {"pattern": MARKER, "path": "."}},
        {"tool": "grep", "args": {"pattern": MARKER, "path": ".."}},
        {"tool": "edit", "args": {"path": "../hidden/reward/check.py", "old_text": "#", "new_text": "#"}},
        {"tool": "write", "args": {"path": "link", "content": "x"}},
        {"tool": "exec", "args": {"command": "ln -s .. up; ln -s / rootlink; echo linked"}},
        {"tool": "read", "args": {"path": "up/hidden/reward/check.py"}},
        {"tool": "grep", "args": {"pattern": MARKER, "path": "up"}},
        {"tool": "exec", "args": {"command": f"echo hidden=$CLAWSDK_HIDDEN; env | grep -i hidden; "
                                             f"grep -rs {split} .. {sandbox_root} {wide} | head -5; "
                                             "find / -xdev -path /proc -prune -o -name check.py -path '*reward*' "
                                             "-print 2>/dev/null | head -5; true"}},
    ]
    if isolated:
        calls.append({"tool": "exec", "args": {"command": f"cat {source}/reward/check.py; ls -R {source}; true"}})
    calls.append({"tool": "write", "args": {"path": "answer.txt", "content": "42"}})
    return calls


@pytest.mark.parametrize("sandbox", ["local", "bwrap"])
def test_no_file_tool_or_exec_reaches_the_reward_scripts(tmp_path, db, sandbox):
    skip_unless_available(sandbox)  # in CI, a failure
    task, source = _task(tmp_path)
    # under /tmp itself: pytest's own temp folders are closed to bwrap's unprivileged user
    with tempfile.TemporaryDirectory() as root:
        calls = _probes(root, str(source), isolated=sandbox != "local")
        result = run_sync([task], agent=ScriptedAgent(calls), sandbox=sandbox,
                          sandbox_config=SandboxConfig(root=root), db=db, run_id=sandbox, retries=0)
        assert not glob.glob(os.path.join(root, "*", "sb-*")), "a sandbox was left behind"
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok", outcome.error
    assert outcome.reward == 1.0  # the hidden scripts did run afterwards, and saw answer.txt
    with Store(db) as store:
        events = store.events(store.rollouts(sandbox)[0]["id"])
    results = [e["payload"] for e in events if e["kind"] == "tool_result"]
    assert len(results) == len(calls)
    leaked = [r for r in results if MARKER in json.dumps(r)]
    assert not leaked, leaked
    assert all("reward" not in r["content"] for r in results if r["tool"] in ("ls", "glob"))
