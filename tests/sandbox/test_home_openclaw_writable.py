"""The folders down to a workspace mounted inside HOME (~/.openclaw) are the agent's under bwrap and docker alike.

Under docker they were made by the engine for the bind mount, as root: `touch ~/.openclaw/x` failed
(Permission denied) where bwrap let it, so OpenClaw, which keeps its state in ~/.openclaw, ran
differently in the two.
"""

from __future__ import annotations

import anyio
import pytest
from sandbox_backends import skip_unless_available

from clawsdk.plugins import get_registry
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task

TASK = Task(id="home", instruction="x", workspace=[File(path="notes.md", text="hi\n")])


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_the_agent_can_write_in_the_folder_above_its_workspace(backend):
    skip_unless_available(backend)
    sb = get_registry().get("sandboxes", backend)(SandboxConfig())

    async def main():
        try:
            with anyio.fail_after(120):
                await sb.start(TASK)
                assert sb.workspace_path.endswith("/.openclaw/workspace")
                r = await sb.exec('touch ~/.openclaw/x && mkdir ~/.openclaw/state && test "$(stat -c %u ~/.openclaw)" '
                                  '= "$(id -u)" && cat notes.md && echo ok')
                assert (r.exit_code, r.stdout) == (0, "hi\nok\n"), r
                removed = await sb.end_turn()
                assert {"~/.openclaw/x", "~/.openclaw/state"} <= set(removed), removed
                assert (await sb.exec("cat notes.md")).stdout == "hi\n"
        finally:
            with anyio.CancelScope(shield=True):
                await sb.close()

    anyio.run(main)
