"""Fault injection: each fault gets the right failure kind, retries happen where they should, the run goes on."""

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from clawsdk_plugins.sandboxes.local import LocalSandbox
from mcp import StdioServerParameters

from clawsdk import Store, load_tasks, run_sync
from clawsdk.errors import SandboxError
from clawsdk.plugins import get_registry
from clawsdk.runtime.agent import Agent
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.verify.verdict import Verifier
from tests.conftest import make_task

HERE = Path(__file__).parent


def tasks_in(path):
    loaded = load_tasks(str(path))
    assert not loaded.errors
    return loaded.tasks


def kinds(db, run_id):
    with Store(db) as store:
        return {r["task_id"]: (r["failure_kind"], r["scored"], r["attempt"]) for r in store.rollouts(run_id)}


def test_a_tool_server_that_crashes_is_a_tool_error_and_the_rollout_goes_on(tmp_path, db, monkeypatch):
    """A skill whose server is a program of its own (its factory returns StdioServerParameters) runs inside the
    sandbox, and its crash is the call's tool error: the agent may have caused it (a file that made it run out
    of memory), so it can never make the rollout unscored. The next call starts the server again."""
    monkeypatch.setitem(get_registry().tables["skills"], "crashy", lambda sandbox, task: StdioServerParameters(
        command=sys.executable, args=[str(HERE / "crashy_server.py")]))
    make_task(tmp_path / "t", "crashes", extra={"tools": ["core", "crashy"]})
    make_task(tmp_path / "t", "fine")
    agent = ScriptedAgent(lambda task: [{"tool": "ping"}, {"tool": "crash"}, {"tool": "ping"},
                                        {"tool": "write", "args": {"path": "done.txt", "content": "done"}}]
                          if task.id == "crashes" else [{"tool": "write", "args": {"path": "done.txt", "content": "done"}}])
    tasks = tasks_in(tmp_path / "t")
    result = run_sync(tasks, agent=agent, db=db, run_id="crash", retries=1, backoff_s=0.01, sandbox="local")
    got = kinds(db, "crash")
    assert got["crashes"] == ("ok", 1, 0) and got["fine"][0] == "ok"
    with Store(db) as store:
        [row] = [r for r in store.rollouts("crash") if r["task_id"] == "crashes"]
        results = [e["payload"] for e in store.events(row["id"]) if e["kind"] == "tool_result"]
    assert [(r["tool"], r["is_error"]) for r in results] == [
        ("ping", False), ("crash", True), ("ping", False), ("write", False)]
    assert "crash failed: its tool server stopped" in results[1]["content"] and "exited with 3" in results[1]["content"]
    assert {o.task_id for o in result.outcomes} == {"crashes", "fine"}


class DyingSandbox(LocalSandbox):
    """Its exec breaks for good after the first command, as a container that died would."""

    async def exec(self, command, **kw):
        self.execs = getattr(self, "execs", 0) + 1
        if self.execs > 1:
            self.failure = "container exited (137)"
            raise SandboxError(self.failure)
        return await super().exec(command, **kw)


def test_a_sandbox_that_dies_mid_exec_is_a_sandbox_error_even_if_the_agent_carries_on(tmp_path, db, monkeypatch):
    monkeypatch.setitem(get_registry().tables["sandboxes"], "dying",
                        lambda config=None: DyingSandbox(config or SandboxConfig()))
    tasks = tasks_in(make_task(tmp_path, "dies"))
    agent = ScriptedAgent([{"tool": "exec", "args": {"command": "echo one"}},
                           {"tool": "exec", "args": {"command": "echo two"}},
                           {"tool": "write", "args": {"path": "done.txt", "content": "done"}}])
    [o] = run_sync(tasks, agent=agent, sandbox="dying", db=db, retries=0).outcomes
    assert o.kind.value == "sandbox_error" and o.reward is None and "container exited" in o.error
    with Store(db) as store:
        events = store.events(o.rollout_id)
        assert [e["payload"]["tool"] for e in events if e["kind"] == "tool_call"] == ["exec", "exec"]


class CrashingVerifier(Verifier):
    name = "crashing"
    calls = 0

    def __init__(self, spec):
        pass

    async def verify(self, ctx):
        CrashingVerifier.calls += 1
        raise KeyError("score")


def test_a_verifier_that_crashes_is_retried_then_unscored(tmp_path, db, monkeypatch):
    monkeypatch.setitem(get_registry().tables["verifiers"], "crashing", CrashingVerifier)
    tasks = tasks_in(make_task(tmp_path, extra={"verifier": {"type": "crashing"}}))
    CrashingVerifier.calls = 0
    [o] = run_sync(tasks, agent="oracle", db=db, retries=2, backoff_s=0.01).outcomes
    assert o.kind.value == "verifier_error" and o.reward is None and CrashingVerifier.calls == 3
    assert "KeyError" in o.error


@pytest.mark.skipif(subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0",
                    reason="mounting a small tmpfs needs root")
def test_a_full_workspace_disk_is_the_agents_problem_not_a_crash(tmp_path, db):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount tmpfs here")
    try:
        tasks = tasks_in(make_task(tmp_path, "fill"))
        agent = ScriptedAgent([{"tool": "write", "args": {"path": "big.txt", "content": "x" * 3_000_000}},
                               {"tool": "exec", "args": {"command": "head -c 5000000 /dev/zero > big2"}},
                               {"tool": "write", "args": {"path": "done.txt", "content": "done"}}])
        # local: bwrap puts each workspace on a size-limited tmpfs of its own (tests/sandbox covers that)
        [o] = run_sync(tasks, agent=agent, db=db, sandbox="local",
                       sandbox_config=SandboxConfig(root=str(mnt))).outcomes
        with Store(db) as store:
            results = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "tool_result"]
        assert results[0]["is_error"] and "No space left" in results[0]["content"]
        assert '"exit_code": 1' in results[1]["content"]
        assert o.kind.value == "ok"  # the run goes on; the verifier scores what is there
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


class Raises(Agent):
    """Raises what it is given on one task; works the others."""

    name = "raises"

    def __init__(self, exc):
        self.exc = exc

    async def run(self, ctx):
        if ctx.task.id == "bad":
            raise self.exc
        await ctx.tools.call("write", {"path": "done.txt", "content": "done"})


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt(), GeneratorExit(),
                                 asyncio.CancelledError(), BaseExceptionGroup("g", [SystemExit(1)])],
                         ids=["sys.exit", "KeyboardInterrupt", "GeneratorExit", "cancelled", "group"])
def test_an_agent_raising_a_base_exception_fails_its_rollout_not_the_run(tmp_path, db, exc):
    for tid in ("bad", "good1", "good2"):
        make_task(tmp_path / "t", tid)
    result = run_sync(tasks_in(tmp_path / "t"), agent=Raises(exc), db=db, sandbox="local", retries=1,
                      backoff_s=0.01, run_id="base")
    by_id = {o.task_id: (o.kind.value, o.passed, o.attempts) for o in result.outcomes}
    assert by_id == {"bad": ("agent_error", False, 1), "good1": ("ok", True, 1), "good2": ("ok", True, 1)}
    with Store(db) as store:
        assert store.run("base")["status"] == "finished"
