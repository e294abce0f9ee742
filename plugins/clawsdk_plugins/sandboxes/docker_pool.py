"""Warm docker sandbox containers, reused across rollouts after a reset that proves them clean.

Starting a container and removing it costs far more than a rollout's own commands (on a
loaded 2-core machine about 0.7 s + 0.3 s against ~0.1 s per `docker exec`), so a closed
sandbox hands its container, with the host folders bind-mounted into it, to a pool instead
of removing it. The next sandbox with the same options takes it after a reset:

- from the host, with no `docker exec` (each costs a runc start, ~0.1 s of CPU): every process
  of the sandbox's uid in the container's cgroup SIGKILLed (through pidfds) until none is left;
  the container's /tmp, /var/tmp, /dev/shm and /dev/mqueue emptied through its init's
  /proc/PID/root; its System V IPC objects removed from inside its IPC namespace (a thread
  that setns()es there); each looked at again, and anything left means not reusable;
- the host folders: the workspace, home, hidden and io folders emptied in place (their inodes are
  what the container mounts), then given back their owner and mode; the sandbox root must
  hold exactly those four folders, each empty.

The root file system is read-only and every capability is dropped, so the agent can write
nowhere else and cannot leave a process of another uid. A container whose reset fails in any
way, whose sandbox broke, or that arrives when its key already holds `pool_size` idle ones
is removed instead. Pooled containers keep their labels (owner pid and start time), so a
SIGKILLed runner's warm containers go in the next start's orphan sweep like any other; the
pool is emptied at the end of every run (`clawsdk.run`) and at process exit.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import stat
import threading
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawsdk.sandbox.hostroot import remove_tree
from clawsdk.sandbox.isolated import ROOM

if TYPE_CHECKING:
    from clawsdk.sandbox.hostroot import SandboxRoot
    from clawsdk.tasks.model import Task
    from clawsdk_plugins.sandboxes.docker import DockerSandbox

log = logging.getLogger(__name__)

#: where the sandbox's io folder (the tool host's files) is mounted in the container
IO_PATH = "/clawsdk/io"
#: the container-side folders besides the bind mounts that the sandbox user can write
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
HOST_FOLDERS = ("workspace", "home", "hidden", "io")
KILL_DEADLINE_S = 10
CLONE_NEWIPC = 0x08000000
IPC_RMID = 0


@dataclass
class Warm:
    """An idle container, the sandbox root whose folders it mounts, and its mount points' inodes."""

    container: Any
    root: SandboxRoot
    marks: dict[str, tuple[int, int]]
    pid: int


def mount_points(sb: DockerSandbox) -> list[str]:
    """Paths in the host folders (`home/.openclaw/workspace`) where docker made a mount point for another
    bind mount. Removing one from the host detaches that mount in the container, so a reset keeps them."""
    o = sb.opts
    inner = {"workspace": o.workspace_path, "home": o.home}
    found = []
    for target in (o.workspace_path, o.hidden_path, IO_PATH):
        for folder, at in inner.items():
            at = at.rstrip("/")
            if target.startswith(at + "/"):
                parts = target[len(at) + 1:].strip("/").split("/")
                found += ["/".join([folder, *parts[:i + 1]]) for i in range(len(parts))]
    return found


def note_fresh(sb: DockerSandbox) -> None:
    """Remember a new container's mount points (before the agent runs), so a reset can prove them intact."""
    assert sb.sandbox_root is not None  # started
    root = sb.sandbox_root.path
    try:
        marks = {}
        for rel in mount_points(sb):
            st = os.lstat(root / rel)
            marks[rel] = (st.st_dev, st.st_ino)
        # the host pid of the container's init: the reset reaches its processes, /tmp and IPC through it
        sb.pool_pid = sb.client.api.inspect_container(sb.container.id)["State"]["Pid"]
    except Exception as e:  # the sandbox still works; it just never goes to the pool
        log.info("docker sandbox %s will not be pooled: %s", sb.container.name, e)
        return
    sb.pool_marks = marks


_lock = threading.Lock()
_idle: dict[tuple, list[Warm]] = {}
_atexit_registered = False


def key_of(sb: DockerSandbox) -> tuple:
    """What a container was made with: only a sandbox asking for the same may take it."""
    from clawsdk.sandbox import toolruntime

    opts = {k: v for k, v in vars(sb.opts).items() if k != "pool_size"}
    return (str(sb.client.api.base_url), str(sb.sandbox_base()), sb.user, sb.keeper,
            tuple(sorted((k, repr(v)) for k, v in opts.items())), tuple(toolruntime.current().mounts()))


def enabled(sb: DockerSandbox) -> bool:
    # the reset works from the host as root (pidfds, /proc/PID/root, setns); without root the keeper
    # also runs as the sandbox uid, so killing that uid's processes would stop the container
    # nor with an egress proxy: its socket and relay belong to one sandbox
    return sb.opts.pool_size > 0 and sb.privileged and getattr(sb, "network", None) is None


def adopt(sb: DockerSandbox, task: Task) -> bool:
    """Give `sb` a warm container and its (clean) folders, with the task's files written; False if none."""
    key = key_of(sb)
    with _lock:
        stack = _idle.get(key)
        warm = stack.pop() if stack else None
    if warm is None:
        return False
    root = warm.root.path
    sb.sandbox_root, sb.root, sb.container = warm.root, root, warm.container
    sb.pool_marks, sb.pool_pid = warm.marks, warm.pid
    sb.workspace, sb.home, sb.io_dir, sb.hidden_dir = root / "workspace", root / "home", root / "io", None
    try:
        for f in task.workspace:
            sb._write_sync(f.path, f.data, f.executable)
        sb.keep_scoring_room(task)
    except OSError as e:
        from clawsdk.errors import SandboxError

        sb.failure = f"could not write the task's files into a pooled sandbox: {e}"
        raise SandboxError(sb.failure) from e
    sb.workspace_path = sb.visible_workspace()
    return True


def give_back(sb: DockerSandbox) -> bool:
    """Reset the closed sandbox's container into the pool; False (nothing taken) if it may not be reused."""
    if not enabled(sb) or sb.failure or sb.sandbox_root is None or sb.pool_marks is None:
        return False
    key = key_of(sb)
    with _lock:
        if len(_idle.get(key, ())) >= sb.opts.pool_size:
            return False
    why = reset(sb)
    if why is not None:
        log.info("docker sandbox %s not reused: %s", sb.container.name, why)
        return False
    warm = Warm(sb.container, sb.sandbox_root, sb.pool_marks, sb.pool_pid)
    with _lock:
        stack = _idle.setdefault(key, [])
        if len(stack) >= sb.opts.pool_size:
            return False
        stack.append(warm)
        _register_atexit()
    # the pool owns them now: close() must remove neither the container nor the folders
    sb.container, sb.sandbox_root, sb.root = None, None, None
    return True


def reset(sb: DockerSandbox) -> str | None:
    """Make the container and its folders as a fresh sandbox's; None when proven clean, else why not.

    All from the host, with no `docker exec` (each costs a runc start, ~0.1 s of CPU): processes through
    the container's cgroup, its /tmp and IPC objects through its init's /proc entry."""
    try:
        pin = os.pidfd_open(sb.pool_pid)  # held: the pid cannot be reused by another process while we work
    except OSError as e:
        return f"the container's init is gone: {e}"
    try:
        state = sb.client.api.inspect_container(sb.container.id)["State"]
        if not state.get("Running") or state.get("Pid") != sb.pool_pid:
            return f"the container is not running as it was (state {state.get('Status')})"
        if os.readlink(f"/proc/{sb.pool_pid}/ns/pid") == os.readlink("/proc/self/ns/pid"):
            return "the container shares this process's pid namespace"
        why = _kill_sandbox_user(sb) or _empty_scratch(sb.pool_pid) or _remove_ipc(sb.pool_pid)
        return why or _reset_host(sb)
    except Exception as e:  # the container or engine is gone, or a folder would not empty
        return f"{type(e).__name__}: {e}"
    finally:
        os.close(pin)


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f if ":" in line)


def _container_pids(init: int) -> list[int]:
    """The host pids in the container's pid namespace (found by namespace, not cgroup path: under a
    nested or cgroup-namespaced engine the path /proc shows is not the one /sys/fs/cgroup holds)."""
    ns = os.readlink(f"/proc/{init}/ns/pid")
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and entry.name != str(init):
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") == ns:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _kill_sandbox_user(sb: DockerSandbox) -> str | None:
    """SIGKILL every process of the sandbox's uid in the container until none is left."""
    init = sb.pool_pid
    if _status(init).get("State", "").split()[:1] == ["Z"]:
        return "the container's init is gone"
    ns = os.readlink(f"/proc/{init}/ns/pid")
    uid, deadline = str(sb.opts.uid), time.monotonic() + KILL_DEADLINE_S
    while True:
        left = 0
        for p in _container_pids(init):
            try:
                fd = os.pidfd_open(p)  # pins the pid: the uid read next is this process's
            except ProcessLookupError:
                continue
            try:
                try:  # looked at again now that the pid is pinned: it may have been reused meanwhile
                    if os.readlink(f"/proc/{p}/ns/pid") != ns:
                        continue
                    owner = _status(p).get("Uid", "").split()[:1]
                except FileNotFoundError:
                    continue
                if owner == ["0"]:
                    continue  # init and the keeper (root without capabilities): the agent cannot start one
                if owner != [uid]:
                    return f"a process of uid {owner} runs in the container"
                left += 1
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            finally:
                os.close(fd)
        if not left:
            return None
        if time.monotonic() > deadline:
            return f"{left} process(es) of uid {uid} survive SIGKILL"
        time.sleep(0.01)


def _empty_scratch(init: int) -> str | None:
    for d in SCRATCH:
        inside = Path(f"/proc/{init}/root{d}")
        if not inside.is_dir():
            continue
        empty_folder(inside)
        if os.listdir(inside):
            return f"{d} not empty after the reset"
    return None


def _remove_ipc(init: int) -> str | None:
    """Remove the System V shared memory, semaphores and message queues left in the container's IPC namespace."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    found: list[str] = []
    failed: list[BaseException] = []

    def inside() -> None:  # setns moves only this thread, which ends with it
        try:
            fd = os.open(f"/proc/{init}/ns/ipc", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWIPC) != 0:
                    raise OSError(ctypes.get_errno(), "setns into the container's IPC namespace")
            finally:
                os.close(fd)
            rm = {"shm": lambda i: libc.shmctl(i, IPC_RMID, None), "sem": lambda i: libc.semctl(i, 0, IPC_RMID),
                  "msg": lambda i: libc.msgctl(i, IPC_RMID, None)}
            for kind, remove in rm.items():
                for i in _ipc_ids(kind):
                    remove(i)
            found.extend(f"{kind} {i}" for kind in rm for i in _ipc_ids(kind))
        except BaseException as e:  # handed to the caller's thread
            failed.append(e)

    t = threading.Thread(target=inside)
    t.start()
    t.join()
    if failed:
        return f"IPC reset failed: {failed[0]}"
    return f"IPC objects left: {found[:3]}" if found else None


def _ipc_ids(kind: str) -> list[int]:
    with open(f"/proc/sysvipc/{kind}") as f:
        return [int(line.split()[1]) for line in f.read().splitlines()[1:] if line.strip()]


def _reset_host(sb: DockerSandbox) -> str | None:
    assert sb.sandbox_root is not None  # started
    root = sb.sandbox_root.path
    remove_tree(root / ROOM)  # a sandbox closed before its turn ended still holds it
    names = set(os.listdir(root))
    if names != set(HOST_FOLDERS):
        return f"the sandbox root holds {sorted(names)}"
    assert sb.pool_marks is not None  # note_fresh or adopt set them
    keep = set(sb.pool_marks)
    for rel, mark in sb.pool_marks.items():
        st = os.lstat(root / rel)  # FileNotFoundError is an OSError: not reusable
        if (st.st_dev, st.st_ino) != mark or not stat.S_ISDIR(st.st_mode):
            return f"the mount point {rel} was moved or replaced"
    for name in HOST_FOLDERS:
        empty_folder(root / name, name, keep)
    for name in ("workspace", "home"):
        sb._own(root / name)
        os.chmod(root / name, 0o755, follow_symlinks=False)
    for name in ("hidden", "io"):
        os.chown(root / name, os.geteuid(), os.getegid(), follow_symlinks=False)
        os.chmod(root / name, 0o755, follow_symlinks=False)
    left = [n for n in [*HOST_FOLDERS, *keep] if set(os.listdir(root / n)) - {p.rsplit("/", 1)[1] for p in keep
                                                                          if p.rsplit("/", 1)[0] == n}]
    return f"{left} not empty after the reset" if left else None


def empty_folder(folder: Path, rel: str = "", keep: AbstractSet[str] = frozenset()) -> None:
    """Remove everything inside `folder` but the mount points in `keep` (paths like `rel/...`) and the
    folders that lead to them; never follows a link. The folder itself stays: a container mounts its inode."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for entry in list(os.scandir(fd)):
            path = f"{rel}/{entry.name}" if rel else entry.name
            st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            if path in keep:
                empty_folder(folder / entry.name, path, keep)  # checked a real folder by its inode above
            elif stat.S_ISDIR(st.st_mode):
                shutil.rmtree(entry.name, dir_fd=fd)
            else:
                os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)


def idle_count() -> int:
    with _lock:
        return sum(len(s) for s in _idle.values())


def drain() -> int:
    """Remove every idle container and its folders (in parallel: 64 removals one by one take half a minute)."""
    with _lock:
        warm = [w for stack in _idle.values() for w in stack]
        _idle.clear()
    if not warm:
        return 0

    def remove(w: Warm) -> None:
        try:
            w.container.remove(force=True)
        except Exception as e:  # already gone; the orphan sweep gets a real leftover
            log.debug("removing pooled container %s: %s", getattr(w.container, "name", "?"), e)
        w.root.remove()

    # plain threads: at interpreter exit an executor refuses new work
    lanes = [warm[i::16] for i in range(min(16, len(warm)))]

    def remove_all(lane: list[Warm]) -> None:
        for w in lane:
            remove(w)

    threads = [threading.Thread(target=remove_all, args=(lane,)) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(warm)


async def drain_async() -> int:
    import anyio

    with anyio.CancelScope(shield=True):
        removed = await anyio.to_thread.run_sync(drain)
    return removed


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(drain)
