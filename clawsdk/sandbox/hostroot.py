"""Sandbox roots on the host: a size-limited tmpfs each (isolating backends, as root), named
after their owner, and a sweep of roots whose process was killed.

A sandbox root holds what the sandbox may write (workspace, home) and what the host shows it
(hidden files, its /etc files). As root it is a tmpfs of its own, so a command that fills
the disk fills only its quota. The root's very name carries its owner (backend, pid and the
pid's start time, so a reused pid is not mistaken for the owner): it is tagged by the mkdir
that creates it, before anything is mounted or written, so a SIGKILL at any moment (between
mkdir and mount, or half-way through a teardown) leaves a root the next start recognises and
finishes removing, mounted or not.

A tmpfs quota is memory: its size, and about 1 KiB of the kernel's for each file or folder it may
hold. The quotas of the roots a process holds are counted against the memory available when each
is created; one that would take the total past 90% of it gets a
smaller quota, with a warning that says what to lower.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

MIB = 1024 * 1024
#: the tag file of roots made before their names carried the owner (still read by the sweep)
OWNER_FILE = ".clawsdk-owner"
#: the share of available memory that all of a process's tmpfs quotas together may promise
MEMORY_SHARE = 0.9
MIN_QUOTA_MB = 64
#: the host memory one tmpfs inode takes (measured: 300,000 empty files, 288 MB of slab)
INODE_BYTES = 1024
#: an untagged root of the old naming this old is a leftover, whoever made it
LEGACY_GRACE_S = 60

_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def can_mount() -> bool:
    return os.geteuid() == 0


def mount_tmpfs(target: Path, size_mb: int, files: int = 0) -> None:
    """Mount a tmpfs of `size_mb` holding at most `files` inodes (0: the kernel's default, half the
    memory's pages: an agent made 3 million empty files in 30 s, about 3 GB of the host's memory)."""
    opts = f"size={size_mb * MIB},mode=0711{f',nr_inodes={files}' if files else ''}".encode()
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


def root_name(backend: str) -> str:
    """`sb-<random>-<backend>-<pid>-<start>`: the name says who owns the root."""
    return f"sb-{uuid.uuid4().hex[:12]}-{backend}-{os.getpid()}-{process_start(os.getpid())}"


def owner_of(folder: Path) -> str | None:
    """The owner tag of a sandbox root ("backend pid start"), from its name or its old tag file."""
    parts = folder.name.split("-")
    if len(parts) == 5 and parts[0] == "sb":
        return " ".join(parts[2:])
    try:
        return (folder / OWNER_FILE).read_text()
    except OSError:
        return None


def available_memory_mb() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


_quota_lock = threading.Lock()
_committed_mb = 0
_warned = False


def reserve_quota(wanted_mb: int) -> int:
    """The tmpfs quota a new root may have: `wanted_mb`, or less when memory would not cover them all."""
    global _committed_mb, _warned
    with _quota_lock:
        avail = available_memory_mb()
        grant = wanted_mb
        if avail is not None:
            # held roots count at their full quota, what they may yet be filled with (MemAvailable has
            # already dropped by what they hold, so this errs on the safe side)
            room = int(avail * MEMORY_SHARE) - _committed_mb
            if room < wanted_mb:
                grant = max(MIN_QUOTA_MB, room)
                if not _warned:
                    _warned = True
                    log.warning(
                        "sandbox disk quotas are memory (tmpfs): %d MiB already promised plus %d MiB would pass "
                        "90%% of the %d MiB available; new sandboxes get %d MiB. Lower --concurrency or the "
                        "disk_mb sandbox option (or set CLAWSDK_SANDBOX_ROOT to a disk folder for local/bwrap "
                        "without root)", _committed_mb, wanted_mb, avail, grant)
        _committed_mb += grant
        return grant


def release_quota(mb: int) -> None:
    global _committed_mb
    with _quota_lock:
        _committed_mb = max(0, _committed_mb - mb)


def remove_tree(path: str | os.PathLike) -> None:
    """Remove a folder an agent filled, ignoring errors, however deep it nested its folders.

    shutil.rmtree recurses in Python: a tree deeper than the recursion limit (a loop of mkdir and cd in
    the sandbox makes one in a second) raised RecursionError out of close(), and the sandbox's root, a
    mounted tmpfs, stayed behind for the rest of the run. GNU rm walks any depth.
    """
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", os.fspath(path)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class SandboxRoot:
    """One sandbox's folder under `base`: created (owner in its name), optionally a tmpfs, removed."""

    def __init__(self, base: Path, backend: str, quota_mb: int = 0, files: int = 0):
        self.base = base
        self.backend = backend
        self.path = base / root_name(backend)
        self.quota_mb = quota_mb
        self.files = files
        self.mounted = False
        self._reserved = 0

    def create(self) -> Path:
        self.path.mkdir(mode=0o711)
        if self.quota_mb and can_mount():
            inodes_mb = -(-self.files * INODE_BYTES // MIB)  # the kernel's memory for them, outside the size
            self._reserved = reserve_quota(self.quota_mb + inodes_mb)
            mount_tmpfs(self.path, max(MIN_QUOTA_MB, self._reserved - inodes_mb), self.files)
            self.mounted = True
        return self.path

    def remove(self) -> None:
        # umount first: a kill after it leaves a plain folder, which the sweep removes by its name
        if self.mounted:
            umount(self.path)
            self.mounted = False
        if self._reserved:
            release_quota(self._reserved)
            self._reserved = 0
        remove_tree(self.path)


def sweep_orphans(base: Path, backend: str, *, kill_processes: bool = False) -> int:
    """Remove `backend`'s sandbox roots under `base` whose process is gone, mounted or not, half-removed
    or never finished; with `kill_processes`, first kill what still runs in them (local sandboxes).

    Other backends' roots are theirs to sweep. Returns how many were removed.
    """
    swept = 0
    mounts = mounts_under(base)
    for root in list(base.glob("sb-*")):
        tag = owner_of(root)
        if tag is None:  # an old-style root killed before its tag was written
            try:
                if time.time() - root.lstat().st_mtime < LEGACY_GRACE_S:
                    continue
            except OSError:
                continue
        elif not tag.startswith(backend + " ") or owner_alive(tag):
            continue
        if kill_processes:
            _kill_inside(root)
        if root in mounts:
            umount(root)
        remove_tree(root)
        if root.exists():  # still a mount point (one the listing missed): detach it, then remove what is left
            umount(root)
            remove_tree(root)
        swept += 1
    return swept


def _kill_inside(folder: Path) -> None:
    real = os.path.realpath(folder)
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if cwd == real or cwd.startswith(real + os.sep):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except OSError:
                pass
