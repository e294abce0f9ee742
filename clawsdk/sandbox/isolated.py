"""The common ground of the isolating sandboxes (bwrap, docker): a host sandbox root whose
workspace, home and hidden folders are mounted into the isolated side.

File tools keep acting on the host folder (through descriptors, clawsdk.sandbox.safefs); the isolated
side sees the same files through mounts, so a file written either way is there for the
other at once, with no copying. The host writes as root or as you; the isolated side runs as
an unprivileged uid, so files the host writes are handed to that uid (`file_owner`), and
hidden files are made readable but stay the host's, so a verifier script cannot rewrite them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path, PurePosixPath

import anyio

from clawsdk.errors import SandboxError
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.sandbox.egress import EgressProxy, proxy_env
from clawsdk.sandbox.hostdir import HostDirSandbox, workspace_root
from clawsdk.sandbox.hostroot import SandboxRoot, remove_tree, sweep_orphans
from clawsdk.sandbox.limits import IsolationOptions
from clawsdk.tasks.model import NetworkPolicy, Task

log = logging.getLogger(__name__)

#: Kept free in a root with a disk quota until the agent's turn ends, for what scoring writes: the
#: hidden files and their folders, twice (ClawGym's verifier copies its reward files into the
#: workspace), and this much room and this many files for the verifier's own output. An agent that
#: fills its quota, in bytes or in files, cannot make its rollout unscored.
SCORING_ROOM_BYTES = 8 * 1024 * 1024
SCORING_ROOM_FILES = 64
ROOM = "scoring-room"

_swept: set[tuple[str, Path]] = set()


class IsolatedHostDirSandbox(HostDirSandbox):
    """A host sandbox root mounted into an isolated side; subclasses implement setup/teardown/exec."""

    name = "isolated"
    #: the tool runtime appears at clawsdk.sandbox.toolruntime.ROOT inside (`spawn` mounts it)
    mounts_tool_runtime = True

    def __init__(self, config: SandboxConfig | None = None):
        super().__init__(config)
        self.opts = IsolationOptions.from_extra(self.config.extra, self.name)
        self.privileged = os.geteuid() == 0
        self.sandbox_root: SandboxRoot | None = None
        self.io_dir: Path | None = None
        #: where the task's logs folder is mounted inside (Harbor's /logs), and its host folder
        self.logs_path: str | None = None
        self.logs_dir: Path | None = None
        #: a task's network policy when it has an allowlist, and the proxy that enforces it
        self.network: NetworkPolicy | None = None
        self.egress: EgressProxy | None = None

    # ---- subclass hooks --------------------------------------------------------------------

    async def preflight(self) -> None:
        """Raise SandboxError (saying what to do) if the backend cannot run here."""

    async def sweep(self, base: Path) -> None:
        """Remove what killed processes left behind (once per process and root)."""

    async def setup(self, task: Task) -> None:
        """Start the isolated side once the host folders exist."""

    async def teardown(self) -> None:
        """Stop the isolated side; runs shielded, before the host folders go."""

    # ---- lifecycle -------------------------------------------------------------------------

    def sandbox_base(self) -> Path:
        """The folder that holds this backend's sandbox roots."""
        return workspace_root(self.config.root)

    def cannot_run(self, task: Task) -> str | None:
        env = task.environment
        if env is not None and env.dockerfile:
            return super().cannot_run(task)
        if env is not None:
            try:
                self.task_paths(task)
            except SandboxError as e:
                return str(e)
        return None

    def phase_hosts(self) -> list[str]:
        """The hosts the phase now running may reach through the egress proxy (none when its mode is not
        allowlist): the agent's while its turn lasts, the verifier's once it is over."""
        net = self.network
        if net is None:
            return []
        phase = net.verifier if self.turn_over else net.agent
        return list(phase.hosts) if phase.mode == "allowlist" else []

    def task_paths(self, task: Task) -> None:
        """Mount the workspace, the hidden files and a logs folder where the task's environment says (Harbor's
        /app, /tests, /logs); SandboxError when those paths cannot be told apart."""
        env = task.environment
        self.logs_path = env.logs_dir if env is not None else None
        # an allowlist in either phase: the way out is the egress proxy (clawsdk.sandbox.egress)
        self.network = task.network if task.network is not None and "allowlist" in task.network.modes() else None
        if env is None:
            return
        # the task's resources in place of the run's options (Harbor's cpus, memory_mb, storage_mb)
        if env.cpus:
            self.opts.cpus = float(env.cpus)
        if env.memory_mb:
            self.opts.mem_mb = int(env.memory_mb)
        if env.storage_mb:
            self.opts.disk_mb = int(env.storage_mb)
        if not (env.workdir or env.tests_dir):
            return
        extra = {**self.config.extra, **({"workspace_path": env.workdir} if env.workdir else {}),
                 **({"hidden_path": env.tests_dir} if env.tests_dir else {})}
        opts = IsolationOptions.from_extra(extra, self.name)
        self.opts.workspace_path, self.opts.hidden_path = opts.workspace_path, opts.hidden_path
        if self.logs_path and any(self.logs_path == p or self.logs_path.startswith(p + "/") or p.startswith(
                self.logs_path + "/") for p in (opts.workspace_path, opts.hidden_path, opts.home)):
            raise SandboxError(f"{self.name} sandbox: the task's logs folder {self.logs_path} overlaps its "
                               "workspace, tests or home")

    async def start(self, task: Task) -> None:
        self.task_paths(task)
        await self.preflight()
        base = self.sandbox_base()
        if (self.name, base) not in _swept:
            _swept.add((self.name, base))
            # what still runs on a dead owner's folders (its containers) goes first, then the folders
            await self.sweep(base)
            n = await anyio.to_thread.run_sync(sweep_orphans, base, self.name)
            if n:
                log.warning("removed %d %s sandbox folder(s) left by a killed process", n, self.name)
        self.sandbox_root = SandboxRoot(base, self.name, self.opts.disk_mb if self.privileged else 0,
                                        self.opts.files)
        self.root = self.sandbox_root.path
        try:
            if self.privileged:
                base.chmod(0o711)  # an unprivileged uid must reach its own root, never list the others
            self.sandbox_root.create()
            self.workspace = self.root / "workspace"
            self.home = self.root / "home"
            self.hidden_dir = None
            self.io_dir = self.root / "io"
            for d in (self.workspace, self.home):
                d.mkdir()
                self._own(d)
            if self.network is not None:  # the sandbox's only way out; the socket is bound in at SOCKET_INSIDE
                self.egress = EgressProxy(self.phase_hosts, self.file_owner)
            if self.logs_path:  # the verifier's to write in; emptied after the agent's turn (Harbor's /logs)
                self.logs_dir = self.root / "logs"
                self.logs_dir.mkdir()
                self._own(self.logs_dir)
            self.io_dir.mkdir(mode=0o755)
            (self.root / "hidden").mkdir(mode=0o755)
            for f in task.workspace:
                self._write_sync(f.path, f.data, f.executable)
            self.keep_scoring_room(task)
        except OSError as e:
            await self.close()
            raise SandboxError(f"could not create the {self.name} sandbox under {base}: {e}") from e
        self.workspace_path = self.visible_workspace()
        try:
            await self.setup(task)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.close()
            raise

    def keep_scoring_room(self, task: Task) -> None:
        """In a root with a disk quota, set aside the room and the files scoring `task` will need, in a
        folder outside every folder the isolated side sees; start_scoring() frees it."""
        if self.sandbox_root is not None and self.sandbox_root.mounted:
            pages = sum(-(-len(f.data) // 4096) * 4096 for f in task.hidden)
            folders = {str(p) for f in task.hidden for p in PurePosixPath(f.path).parents}
            path = self.sandbox_root.path / ROOM
            try:
                path.mkdir(mode=0o700)
                with open(path / "bytes", "wb") as room:
                    os.posix_fallocate(room.fileno(), 0, 2 * pages + SCORING_ROOM_BYTES)
                for i in range(2 * (len(task.hidden) + len(folders)) + SCORING_ROOM_FILES):
                    (path / str(i)).touch()
            except OSError as e:  # a quota squeezed by memory: run without the room rather than not at all
                remove_tree(path)
                log.warning("%s sandbox: no room kept for scoring in its disk quota (%s); an agent that fills "
                            "it may end unscored", self.name, e)

    async def start_scoring(self) -> None:
        if self.root is not None:  # the agent's processes were stopped by end_turn
            await anyio.to_thread.run_sync(remove_tree, self.root / ROOM)

    async def close(self) -> None:
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            if self.egress is not None:
                self.egress.close()
                self.egress = None
            try:
                await self.teardown()
            finally:
                try:
                    await super().close()  # kills host-side processes, removes the files
                finally:
                    if self.sandbox_root is not None:
                        await anyio.to_thread.run_sync(self.sandbox_root.remove)

    def visible_workspace(self) -> str:
        return self.opts.workspace_path

    def visible_home(self) -> str:
        return self.opts.home

    def visible_hidden(self) -> str:
        return self.opts.hidden_path

    def inside(self, rel: str) -> str:
        """The isolated side's path of a folder given by its path from the workspace root."""
        rel = rel.strip("/")
        return self.opts.workspace_path if rel in ("", ".") else f"{self.opts.workspace_path.rstrip('/')}/{rel}"

    # ---- files -----------------------------------------------------------------------------

    def _own(self, path: Path) -> None:
        """Hand a folder the host just made for the sandbox (home, tmp) to the sandbox's uid."""
        if self.file_owner is not None:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.fchown(fd, self.file_owner, self.file_owner)
            finally:
                os.close(fd)

    def base_env(self) -> dict[str, str]:
        env = super().base_env()
        env.update(PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME=self.opts.home,
                   USER="sandbox", LOGNAME="sandbox", TMPDIR="/tmp", SHELL="/bin/bash")
        if self.network is not None:
            env.update(proxy_env())
        return env
