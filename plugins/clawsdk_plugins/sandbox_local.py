"""The `local` sandbox: a fresh folder per rollout and plain subprocesses. No isolation.

Use it for trusted tasks only: commands run as you, with your network and your files.
The CLI says so whenever it is chosen.
"""

from __future__ import annotations

import os

from clawsdk.hookspecs import hookimpl
from clawsdk.sandbox.base import Capabilities, SandboxConfig
from clawsdk.sandbox.hostdir import HostDirSandbox


def exposure_warning() -> str:
    """What choosing `local` exposes, said wherever it is chosen (run, serve)."""
    who = "as root" if os.geteuid() == 0 else "as you"
    return (f"warning: the 'local' sandbox isolates nothing: the agent's commands run {who} on this host, with "
            "its whole file system (your files, the task sources, other rollouts' hidden verifier files), its "
            "network and its processes. Use it for trusted tasks only; bwrap or docker isolate.")


class LocalSandbox(HostDirSandbox):
    name = "local"
    capabilities = Capabilities(network_isolated=False, fs_isolated=False, persistent_processes=True)


def make_local(config: SandboxConfig | None = None) -> LocalSandbox:
    return LocalSandbox(config or SandboxConfig())


make_local.warning = exposure_warning  # type: ignore[attr-defined]  # the factory's warning contract


@hookimpl
def register_sandboxes(register):
    register("local", make_local)
