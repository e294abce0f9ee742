"""The `local` sandbox: a fresh folder per rollout and plain subprocesses. No isolation.

Use it for trusted tasks only: commands run as you, with your network and your files.
The CLI says so whenever it is chosen.
"""

from __future__ import annotations

from clawsdk.hookspecs import hookimpl
from clawsdk.sandbox.base import Capabilities, SandboxConfig
from clawsdk.sandbox.hostdir import HostDirSandbox


class LocalSandbox(HostDirSandbox):
    name = "local"
    capabilities = Capabilities(network_isolated=False, fs_isolated=False, persistent_processes=True)


@hookimpl
def register_sandboxes(register):
    register("local", lambda config=None: LocalSandbox(config or SandboxConfig()))
