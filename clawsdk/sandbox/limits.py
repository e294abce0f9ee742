"""Resource limits and the container-side paths shared by the isolating sandboxes (bwrap, docker).

Options come from ``SandboxConfig.extra``; an unknown key or a bad value is an error that
names the key and what it accepts, so a typo never silently runs a task without limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from clawsdk.errors import SandboxError

#: ClawGym's scripts use this absolute path; mounting the workspace there runs them unchanged.
DEFAULT_WORKSPACE = "/root/.openclaw/workspace"
#: Hidden verifier files appear here, outside the workspace, only after inject_hidden.
DEFAULT_HIDDEN = "/clawsdk/hidden"


@dataclass
class IsolationOptions:
    """What an isolating sandbox enforces. Sizes in MiB, times in seconds; 0 turns a limit off."""

    workspace_path: str = DEFAULT_WORKSPACE
    hidden_path: str = DEFAULT_HIDDEN
    home: str = "/root"
    uid: int = 1000  # the unprivileged user commands run as, inside
    gid: int = 1000
    cpu_s: float = 0  # CPU seconds per process; 0: the exec timeout, rounded up, plus one
    mem_mb: int = 4096  # address space per process (bwrap) / container memory (docker)
    nproc: int = 256  # processes per exec (bwrap) / per container (docker)
    file_mb: int = 1024  # largest file a command may write
    nofile: int = 1024  # open files and sockets per process: no flood of connections to the runner's sockets
    disk_mb: int = 2048  # what the sandbox may write in all (workspace, home); a tmpfs, as root only
    files: int = 131072  # files and folders the sandbox may hold (each costs the host ~1 KiB); as root only
    tmp_mb: int = 512  # docker: /tmp inside (bwrap's /tmp lies in the sandbox root, under disk_mb)
    cpus: float = 1.0  # docker: CPU share
    network: bool = False  # docker: give the container a network (bwrap never does)
    host_uid: int = 61000  # bwrap as root: the unprivileged host uid the sandbox runs under
    image: str = "clawsdk-sandbox:latest"  # docker
    ro_binds: list[str] = field(default_factory=list)  # extra host paths, read-only at the same path
    pool_size: int = 64  # docker: idle containers kept warm for reuse (per option set); 0: one per sandbox

    @classmethod
    def from_extra(cls, extra: dict | None, backend: str) -> IsolationOptions:
        extra = dict(extra or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(extra) - set(known))
        if unknown:
            raise SandboxError(
                f"{backend} sandbox: unknown option(s) {', '.join(unknown)} in SandboxConfig.extra; "
                f"known: {', '.join(sorted(known))}"
            )
        opts = cls()
        for key, value in extra.items():
            default = getattr(opts, key)
            try:
                if isinstance(default, bool):
                    if isinstance(value, str):
                        value = value.strip().lower() in ("1", "true", "yes", "on")
                    value = bool(value)
                elif isinstance(default, list):
                    value = [value] if isinstance(value, str) else list(value)
                elif isinstance(default, (int, float)):
                    value = type(default)(value)
                    if value < 0:
                        raise ValueError("must not be negative")
                else:
                    value = str(value)
            except (TypeError, ValueError) as e:
                raise SandboxError(f"{backend} sandbox: option {key}={value!r}: {e}") from None
            setattr(opts, key, value)
        for key in ("workspace_path", "hidden_path", "home"):
            path = getattr(opts, key)
            if not path.startswith("/") or path.rstrip("/") in ("", "/usr", "/etc", "/proc", "/dev", "/tmp"):
                raise SandboxError(f"{backend} sandbox: option {key}={path!r} must be an absolute path of its own")
        ws, hidden = opts.workspace_path.rstrip("/"), opts.hidden_path.rstrip("/")
        if hidden == ws or hidden.startswith(ws + "/") or ws.startswith(hidden + "/"):
            raise SandboxError(f"{backend} sandbox: hidden_path {hidden!r} must lie outside workspace_path {ws!r}")
        return opts

    def cpu_seconds(self, timeout: float) -> int:
        return int(self.cpu_s) if self.cpu_s else math.ceil(timeout) + 1

    def prlimit_args(self, timeout: float) -> list[str]:
        """`prlimit` options for one command (0 means unlimited)."""
        mib = 1024 * 1024
        args = [f"--cpu={self.cpu_seconds(timeout)}", "--core=0"]
        if self.mem_mb:
            args.append(f"--as={self.mem_mb * mib}")
        if self.nproc:
            args.append(f"--nproc={self.nproc}")
        if self.file_mb:
            args.append(f"--fsize={self.file_mb * mib}")
        if self.nofile:
            args.append(f"--nofile={self.nofile}")
        return args
