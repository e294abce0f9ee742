"""The workspace as the tool host sees it from inside the sandbox: a `Sandbox` over a folder it can reach.

The skill servers take a sandbox; inside, they get this one. Files go through descriptors from the
workspace folder (clawsdk.sandbox.safefs), so a tool still never follows a link out of the workspace, and
commands are children of the tool host: inside the sandbox's namespaces, as its uid, under its limits.
Starting, hidden files and closing belong to the real sandbox, outside.
"""

from __future__ import annotations

import os
from pathlib import Path

from clawsdk.errors import SandboxError
from clawsdk.sandbox.base import Capabilities, SandboxConfig
from clawsdk.sandbox.hostdir import HostDirSandbox
from clawsdk.tasks.model import File, Task


class WorkspaceView(HostDirSandbox):
    """The sandbox seen from a process already inside it."""

    name = "inside"

    def __init__(self, workspace: str, *, home: str | None = None, capabilities: Capabilities | None = None,
                 config: SandboxConfig | None = None):
        super().__init__(config)
        self.workspace: Path = Path(workspace)
        self.workspace_path = workspace
        self.home = Path(home or os.environ.get("HOME") or workspace)
        if capabilities is not None:
            self.capabilities = capabilities

    def visible_workspace(self) -> str:
        return self.workspace_path

    async def start(self, task: Task) -> None:
        if not self.workspace.is_dir():
            raise SandboxError(f"the workspace {self.workspace} is not a folder here")

    async def inject_hidden(self, files: list[File]) -> str:
        raise SandboxError("hidden files are the sandbox's to inject, never a tool's")

    async def end_turn(self) -> list[str]:
        raise SandboxError("the agent's turn is ended by the sandbox, never by a tool")

    async def close(self) -> None:
        """Stop the commands still running; the workspace stays (it is the sandbox's)."""
        self._closed = True
        self.stop_commands()
