"""Sandbox roots on the host for the isolating backends: a size-limited tmpfs each (as root),
an owner tag, and a sweep of roots whose process was killed.

A sandbox root holds what the sandbox may write (workspace, home) and what the host shows it
(hidden files, its /etc files). As root it is a tmpfs of its own, so a command that fills
the disk fills only its quota. The owner tag names the backend and the process (pid and
start time, so a reused pid is not mistaken for the owner); a later start removes roots
whose owner is gone, mounted or not.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import uuid
from pathlib import Path

MIB = 1024 * 1024
OWNER_FILE = ".clawsdk-owner"

_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def can_mount() -> bool:
    return os.geteuid() == 0


def mount_tmpfs(target: Path, size_mb: int) -> None:
    opts = f"size={size_mb * MIB},mode=0711".encode()
    ms_nosuid, ms_nodev = 2, 4
    if _c().mount(b"tmpfs", str(target).encode(), b"tmpfs", ms_nosuid | ms_nodev, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {target}: {os.strerror(err)}")


def umount(target: Path) -> None:
    _c().umount2(str(target).encode(), 2)  # MNT_DETACH: gone even if something still holds it


def mounts_under(base: Path) -> set[Path]:
    found = set()
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = Path(line.split()[4].replace("\\040", " "))
                if point.parent == base:
                    found.add(point)
    except OSError:
        pass
    return found


def process_start(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_tag(backend: str) -> str:
    return f"{backend} {os.getpid()} {process_start(os.getpid())}"


def owner_alive(tag: str) -> bool:
    parts = tag.split()
    if len(parts) != 3 or not parts[1].isdigit():
        return True  # not a tag we wrote: leave it alone
    return process_start(int(parts[1])) == parts[2]


class SandboxRoot:
    """One sandbox's folder under `base`: created, tagged, optionally a tmpfs, removed."""

    def __init__(self, base: Path, backend: str, quota_mb: int = 0):
        self.base = base
        self.backend = backend
        self.path = base / f"sb-{uuid.uuid4().hex[:12]}"
        self.quota_mb = quota_mb
        self.mounted = False

    def create(self) -> Path:
        self.path.mkdir(mode=0o711)
        if self.quota_mb and can_mount():
            mount_tmpfs(self.path, self.quota_mb)
            self.mounted = True
        (self.path / OWNER_FILE).write_text(owner_tag(self.backend))
        return self.path

    def remove(self) -> None:
        if self.mounted:
            umount(self.path)
            self.mounted = False
        shutil.rmtree(self.path, ignore_errors=True)


def sweep_orphans(base: Path, backend: str) -> int:
    """Remove `backend`'s sandbox roots under `base` whose process is gone. Returns how many."""
    swept = 0
    mounts = mounts_under(base)
    for root in list(base.glob("sb-*")):
        try:
            tag = (root / OWNER_FILE).read_text()
        except OSError:
            continue  # not tagged (a local sandbox) or being removed
        if not tag.startswith(backend + " ") or owner_alive(tag):
            continue
        if root in mounts:
            umount(root)
        shutil.rmtree(root, ignore_errors=True)
        swept += 1
    return swept
