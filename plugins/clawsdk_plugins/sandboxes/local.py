"""The `local` sandbox: a fresh folder per rollout and plain subprocesses. No isolation.

Use it for trusted tasks only: commands run as you, with your network and your files.
The CLI says so whenever it is chosen.
"""

from __future__ import annotations

import os
import secrets
import stat

import anyio

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

    async def end_turn(self) -> list[str]:
        made = await anyio.to_thread.run_sync(self._make_workspace_again)
        return made + await super().end_turn()

    def _make_workspace_again(self) -> list[str]:
        """Here the workspace and its root are the agent's to remove (`rm -rf "$CLAWSDK_WORKSPACE"`, or a `mv`
        of it): scoring then failed, verifier_error, the agent's doing made unscored. What is gone is made
        again, empty (what stands in its place, a file or a link, moved aside), so the verifier scores what is
        there: nothing. Returns what was made, for the end_turn note."""
        made = []
        for path in (self.root, self.workspace):
            assert path is not None
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                continue
            if st is not None:
                os.rename(path, path.with_name(f"{path.name}.aside-{secrets.token_hex(8)}"))
            path.mkdir(mode=0o755)
            made.append(f"{path.name}/ (gone at the end of the turn: made again, empty)")
        return made


def make_local(config: SandboxConfig | None = None) -> LocalSandbox:
    return LocalSandbox(config or SandboxConfig())


make_local.warning = exposure_warning  # type: ignore[attr-defined]  # the factory's warning contract


@hookimpl
def register_sandboxes(register):
    register("local", make_local)
