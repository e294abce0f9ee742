"""What an agent leaves in HOME, or in the local sandbox's root, around the workspace: its rollout is still
scored, and scored on the workspace itself.

- The local sandbox's root (the workspace's parent) is the agent's to write: a file at `home.agent`, where
  end_turn moved HOME's dot files, made end_turn fail (FileExistsError): verifier_error, unscored.
- `mv ~/.openclaw ~/.oc2` and a file or a dangling link named `~/.openclaw` (the folders down to the
  workspace, mounted inside HOME): every later bwrap command failed ("Can't mkdir parents for
  /root/.openclaw/workspace"), so a check expecting exit 1 (`grep -q TODO app.py`: no TODO left) passed for
  an agent that did nothing; `chmod 000 ~/.openclaw` did the same. Under docker a link
  `~/.openclaw -> /tmp/x` made the verifier run in `/tmp/x/workspace`, where a link to the hidden answer
  the agent left there was never scrubbed: the check comparing with it passed.
"""

from __future__ import annotations

import anyio
import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from sandbox_backends import skip_unless_available

from clawsdk import Store, run_sync
from clawsdk.plugins import get_registry
from clawsdk.sandbox import hostdir
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task


def checked_task(tid: str) -> Task:
    return Task.model_validate({
        "id": tid, "instruction": "Remove the TODO from app.py and write done to done.txt.",
        "workspace": [{"path": "app.py", "text": "x = 1  # TODO\n"}],
        "hidden": [{"path": "expected.txt", "text": "secret 42\n"}],
        "verifier": {"type": "checks", "checks": [
            {"type": "command", "name": "no-todo", "run": "grep -q TODO app.py", "expect_exit": 1},
            {"type": "command", "name": "cmp", "run": 'cmp -s out.txt "$CLAWSDK_HIDDEN/expected.txt"'},
            {"type": "text_contains", "path": "done.txt", "text": "done"}]}})


def run_and_scores(task: Task, command: str, backend: str, db):
    agent = ScriptedAgent([{"tool": "exec", "args": {"command": command}}])
    [o] = run_sync([task], agent=agent, sandbox=backend, db=db, retries=0).outcomes
    with Store(db) as store:
        scores = {r["name"]: r["score"] for r in store.query(
            "SELECT name, score FROM verdict_scores WHERE rollout_id = ?", [o.rollout_id])}
        runs = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "sandbox_exec"]
    return o, scores, runs


def test_files_the_agent_leaves_in_the_local_root_do_not_stop_end_turn(tmp_path):
    """Files at the names end_turn used in the root (for HOME's dot files; for folders the scrub had no time
    to walk): it now makes folders of fresh names."""
    task = checked_task("t-local-root")
    plant = ('touch ~/.profile_x ~/.sqliterc && for n in home.agent scrubbed; do '
             'echo x > "$CLAWSDK_WORKSPACE/../$n"; done && echo planted')
    o, _, _ = run_and_scores(task, plant, "local", tmp_path / "r.db")
    assert (o.kind.value, o.reward) == ("ok", 0.0), o
    with Store(tmp_path / "r.db") as store:
        note = next(e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "note"
                    and e["payload"].get("event") == "end_turn")
    assert {"~/.profile_x", "~/.sqliterc"} <= set(note["removed"]), note


def test_with_no_folder_to_move_them_to_the_agents_dot_files_are_renamed_in_home(monkeypatch):
    monkeypatch.setattr(hostdir.HostDirSandbox, "_aside_for_home", lambda self: -1)
    sb = get_registry().get("sandboxes", "local")(SandboxConfig())

    async def main():
        await sb.start(Task(id="t", instruction="x", workspace=[File(path="a.txt", text="a\n")]))
        try:
            assert sb.home is not None
            (sb.home / ".sqliterc").write_text("CREATE TEMP VIEW items AS SELECT 1;\n")
            (sb.home / "notes.txt").write_text("kept\n")
            removed = await sb.end_turn()
            left = sorted(p.name for p in sb.home.iterdir())
            assert "~/.sqliterc" in removed, removed
            assert left[-1] == "notes.txt" and left[0].startswith("clawsdk-moved-") and len(left) == 2, left
        finally:
            await sb.close()

    anyio.run(main)


MOVE = "cd / && mv /root/.openclaw /root/.oc2 && "


@pytest.mark.parametrize("sabotage", [
    MOVE + "echo x > /root/.openclaw",
    MOVE + "ln -s /nonexistent /root/.openclaw",
    MOVE + "mkdir /root/.openclaw && echo x > /root/.openclaw/workspace",
    MOVE + "mkdir -p /tmp/x/workspace && ln -s /tmp/x /root/.openclaw",
    "chmod 000 /root/.openclaw",
    "chmod 000 /root",
], ids=["file", "dangling-link", "file-for-workspace", "link-to-tmp", "unsearchable", "unsearchable-home"])
def test_the_verifier_runs_in_the_workspace_whatever_the_agent_left_on_the_way_to_it(tmp_path, sabotage):
    """bwrap mounts the workspace afresh for every command: end_turn moves aside what is not a folder on the
    way down from HOME, makes real folders again, and gives their owner r-x, so the verifier's commands run
    in the workspace itself and find the TODO the agent left."""
    skip_unless_available("bwrap")
    o, scores, runs = run_and_scores(checked_task("t-chain"), f"{sabotage} && echo done",
                                     "bwrap", tmp_path / "r.db")
    assert (o.kind.value, o.reward) == ("ok", 0.0), (o, scores, runs)
    grep = next(r for r in runs if r["command"] == "grep -q TODO app.py")
    assert grep["exit_code"] == 0, grep  # it ran in the workspace and found the TODO


@pytest.mark.parametrize("sabotage", [
    MOVE + "echo x > /root/.openclaw",
    MOVE + "mkdir -p /tmp/x/workspace && ln -s /clawsdk/hidden/expected.txt /tmp/x/workspace/out.txt"
           " && ln -s /tmp/x /root/.openclaw",
], ids=["file", "link-to-a-fake-workspace"])
def test_under_docker_the_verifier_never_runs_in_a_workspace_the_agent_pointed_elsewhere(tmp_path, sabotage):
    """A docker container mounts the workspace once, on the folder the agent then moved: its later commands
    (the verifier's) cannot start in the workspace path (exit 126) and score 0; through a link left in its
    place they ran in a folder of the agent's, reading the hidden answer through a link never scrubbed."""
    skip_unless_available("docker")
    o, scores, runs = run_and_scores(checked_task("t-chain-docker"), f"{sabotage} && echo done",
                                     "docker", tmp_path / "r.db")
    assert (o.kind.value, o.reward) == ("ok", 0.0), (o, scores, runs)


def test_under_docker_a_fake_workspace_folder_in_home_is_not_where_the_verifier_runs(tmp_path):
    """`mv ~/.openclaw ~/.oc2 && mkdir -p ~/.openclaw/workspace` and a link to the hidden answer in it: the
    container's workspace mount moved with `.oc2`, so the verifier's commands run in the agent's folder in
    HOME, which end_turn did not scrub, and `cmp` with the hidden answer passed (1 of 3 checks). end_turn now
    moves such a folder aside: the commands find no workspace and score 0."""
    skip_unless_available("docker")
    sabotage = MOVE + ("mkdir -p /root/.openclaw/workspace && "
                       "ln -s /clawsdk/hidden/expected.txt /root/.openclaw/workspace/out.txt")
    o, scores, runs = run_and_scores(checked_task("t-fake-docker"), f"{sabotage} && echo done",
                                     "docker", tmp_path / "r.db")
    assert (o.kind.value, o.reward) == ("ok", 0.0), (o, scores, runs)
