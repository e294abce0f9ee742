"""A command check's `agent_run` runs the agent's code before the hidden files exist, in every verifier
that holds checks (a hybrid's parts too); its stdout is the check's stdin."""

from __future__ import annotations

import anyio
import pytest

from clawsdk import Store, run_sync
from clawsdk.errors import VerifierError
from clawsdk.runtime.recorder import Recorder
from clawsdk.sandbox.hostdir import HostDirSandbox
from clawsdk.tasks.model import File, Task
from clawsdk.verify.checks import ChecksVerifier
from clawsdk.verify.verdict import VerifyContext
from clawsdk_plugins.agents import ScriptedAgent

SEES = {"type": "command", "name": "what the agent's side saw", "agent_run": 'echo "hidden=${CLAWSDK_HIDDEN:-none}"; '
        'ls "$CLAWSDK_HIDDEN" /clawsdk/hidden 2>/dev/null | grep -c expected.txt', "run": "tr '\\n' ' ' | grep -qx 'hidden=none 0 '"}
LATER = {"type": "text_equals", "name": "the hidden files are there for the rest", "path": "out.txt",
         "expected_file": "expected.txt"}


def task(verifier: dict) -> Task:
    return Task.model_validate({"id": "t-agent-run", "instruction": "Write out.txt.", "verifier": verifier,
                                "hidden": [{"path": "expected.txt", "text": "42\n"}]})


@pytest.mark.parametrize("kind", ["checks", "hybrid"])
def test_agent_run_sees_no_hidden_files_and_the_checks_after_it_do(kind, tmp_path):
    checks = {"type": "checks", "checks": [SEES, LATER]}
    verifier = checks if kind == "checks" else {"type": "hybrid", "parts": [
        {"name": "agent", "weight": 1, "verifier": {"type": "checks", "checks": [SEES]}},
        {"name": "files", "weight": 1, "verifier": {"type": "checks", "checks": [LATER]}}]}
    agent = ScriptedAgent([{"tool": "write", "args": {"path": "out.txt", "content": "42\n"}}])
    [o] = run_sync([task(verifier)], agent=agent, db=tmp_path / "r.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 1.0), o
    with Store(tmp_path / "r.db") as store:
        stages = [e["payload"].get("stage") for e in store.events(o.rollout_id) if e["kind"] == "sandbox_exec"]
    assert stages == ["agent_run", "run"]


def test_a_caller_that_injects_the_hidden_files_first_is_told_what_to_do(tmp_path):
    t = task({"type": "checks", "checks": [SEES]})

    async def main():
        async with HostDirSandbox() as box:
            await box.start(t)
            where = await box.inject_hidden(t.hidden)
            ctx = VerifyContext(task=t, sandbox=box, recorder=Recorder(None, "t"), hidden_path=where)
            with pytest.raises(VerifierError, match=r"agent_run commands ran; call the verifier's before_hidden"):
                await ChecksVerifier(t.verifier).verify(ctx)

    anyio.run(main)
