"""Names that are not UTF-8. Python reads such a byte back as a lone surrogate (os.fsdecode), which
SQLite and HTTP cannot encode: a task folder so named, or an agent's `ls` of a file so named, made
the store refuse a write and ended the whole run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from click.testing import CliRunner

from clawsdk import Store, run_sync
from clawsdk.cli import cli
from clawsdk.store.store import dumps
from clawsdk.tasks.model import Task
from tests.conftest import EXAMPLES
from tests.sandbox.sandbox_backends import skip_unless_available

BAD = os.fsdecode(b"n\xffm.txt")  # 'n\udcffm.txt'


def test_the_store_writes_a_lone_surrogate_as_the_replacement_character():
    text = dumps({"args": {"path": BAD}, "text": "caf\u00e9 \\" + "\udcff"})
    text.encode("utf-8")  # storable, and printable on a strict UTF-8 terminal
    assert json.loads(text) == {"args": {"path": "n\ufffdm.txt"}, "text": "caf\u00e9 \\\ufffd"}


@pytest.mark.parametrize("sandbox", ["local", "bwrap", "docker"])
def test_an_agent_that_makes_and_reads_a_file_so_named_is_scored(db, sandbox):
    skip_unless_available(sandbox)
    task = Task.model_validate({"id": "t-bytes", "instruction": "Write out.txt.", "verifier": {
        "type": "checks", "checks": [{"type": "file_exists", "path": "out.txt"},
                                     {"type": "command", "run": "ls; printf 'caf\\351'"}]}})
    agent = ScriptedAgent([
        {"tool": "exec", "args": {"command": "printf 'x\\377' > \"$(printf 'n\\377m.txt')\"; echo hi > out.txt"}},
        {"tool": "ls", "args": {"path": "."}}, {"tool": "glob", "args": {"pattern": "*.txt"}},
        {"tool": "grep", "args": {"pattern": "x", "path": "."}}, {"tool": "read", "args": {"path": BAD}}])
    [o] = run_sync([task], agent=agent, db=db, retries=0, sandbox=sandbox).outcomes
    assert (o.kind.value, o.reward) == ("ok", 1.0), o.error
    with Store(db) as store:
        calls = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "tool_call"]
        listed = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "tool_result"][1]
    assert calls[-1]["args"]["path"] == "n\ufffdm.txt"
    assert "n\ufffdm.txt" in str(listed["content"]) and "out.txt" in str(listed["content"])
    if sandbox == "local":  # and a terminal that will not print a lone surrogate shows the rollout
        shown = subprocess.run([sys.executable, "-m", "clawsdk", "show", o.rollout_id, "--db", str(db)],
                               capture_output=True, env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
        assert shown.returncode == 0 and "n\ufffdm.txt".encode() in shown.stdout, shown.stderr[-500:]


def test_a_task_folder_so_named_is_reported_and_the_other_tasks_run(tmp_path, db):
    tasks = tmp_path / "tasks"
    shutil.copytree(EXAMPLES / "fix-slugify-bug", tasks / "fix-slugify-bug")
    broken = tasks / os.fsdecode(b"br\xffken")
    broken.mkdir()
    (broken / "task.yaml").write_text("id: [\n")
    result = CliRunner().invoke(cli, ["run", str(tasks), "--agent", "oracle", "--sandbox", "local", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "1 task(s) could not be read" in result.output
    with Store(db) as store:
        [error] = store.query("SELECT path, message FROM task_errors")
        [rollout] = store.query("SELECT task_id, passed FROM rollouts")
    assert error["path"].startswith(str(tasks / "br\ufffdken")) and "invalid YAML" in error["message"]
    assert rollout == {"task_id": "fix-slugify-bug", "passed": 1}


def test_an_mcp_client_gets_a_listing_it_can_send_as_json(tmp_path, db):
    """`clawsdk serve` answers external agents over HTTP: a result that held a lone surrogate could not be
    serialized, and the agent got no answer to its `ls`."""
    import anyio
    from mcp import Client

    from clawsdk.serve import ServeConfig, hosting
    from clawsdk.tasks.native import load_task
    from tests.conftest import make_task

    task = load_task(make_task(tmp_path, "hello", instruction="Write done.txt containing done."))

    async def main():
        async with hosting(ServeConfig(task=task, db=db, run_id="srv")) as host:
            async with Client(host.server(), mode="legacy") as c:
                await c.call_tool("exec", {"command": "printf x > \"$(printf 'n\\377m')\""})
                listing = await c.call_tool("ls", {"path": "."})
                return listing.model_dump_json()

    assert "n\ufffdm" in json.loads(anyio.run(main))["content"][0]["text"]
