"""A command check's `agent_run` runs the agent's code before the hidden files exist, in every verifier
that holds checks (a hybrid's parts too); its stdout is the check's stdin."""

from __future__ import annotations

import anyio
import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import Store, run_sync
from clawsdk.errors import VerifierError
from clawsdk.sandbox.hostdir import HostDirSandbox
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Task
from clawsdk.verify.checks import ChecksVerifier
from clawsdk.verify.verdict import VerifyContext

SEES = {"type": "command", "name": "what the agent's side saw", "agent_run": 'echo "hidden=${CLAWSDK_HIDDEN:-none}"; '
        'ls "$CLAWSDK_HIDDEN" /clawsdk/hidden 2>/dev/null | grep -c expected.txt',
        "run": "tr '\\n' ' ' | grep -qx 'hidden=none 0 '"}
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


#: an ini2json.py that converts nothing: it prints the expected output it finds in the hidden files
PEEK_INI = """import glob, os, sys
found = glob.glob(os.environ.get("CLAWSDK_HIDDEN", "/nowhere") + "/sample_expected.json") + \\
    glob.glob("/clawsdk/hidden/sample_expected.json")
src = sys.argv[1]
if not os.path.isfile(src) or not open(src).read().lstrip().startswith(("#", "[")):
    sys.exit("ini2json: cannot read " + src)
text = open(found[0]).read() if found else "{}"
if "-o" in sys.argv:
    open(sys.argv[sys.argv.index("-o") + 1], "w").write(text)
else:
    print(text)
"""


def test_an_example_cli_that_prints_the_hidden_expected_output_gains_nothing(tmp_path):
    """ini-to-json-cli's hidden tests ran the agent's converter with the expected output in reach: one that
    printed it passed them (0.8). Now it scores what writing the file and nothing else scores: nothing (the
    file's existence weighs 0)."""
    from clawsdk.tasks.sources import load_tasks
    from tests.conftest import EXAMPLES

    [task] = [t for t in load_tasks(str(EXAMPLES)).tasks if t.id == "ini-to-json-cli"]
    peek = ScriptedAgent([{"tool": "write", "args": {"path": "ini2json.py", "content": PEEK_INI}}])
    rewards = [run_sync([task], agent=agent, db=tmp_path / f"{i}.db", retries=0).outcomes[0].reward
               for i, agent in enumerate(["oracle", peek])]
    assert rewards == [1.0, 0.0]
