"""Warm docker sandbox containers, reused across rollouts after a reset that proves them clean.

Starting a container and removing it costs far more than a rollout's own commands (on a
loaded 2-core machine about 0.7 s + 0.3 s against ~0.1 s per `docker exec`), so a closed
sandbox hands its container, with the host folders bind-mounted into it, to a pool instead
of removing it. The next sandbox with the same options takes it after a reset:

- inside, as the sandbox user: `kill -9 -1` until no process of that uid is left, then
  /tmp, /var/tmp, /dev/shm and /dev/mqueue emptied (folders the agent made unreadable
  first made readable again) and its System V IPC objects removed; the same command then
  looks again and answers CLEAN only if nothing is left;
- on the host: the workspace, home, hidden and io folders emptied in place (their inodes are
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
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clawsdk.sandbox.hostroot import SandboxRoot
    from clawsdk.tasks.model import Task

    from clawsdk_plugins.sandbox_docker import DockerSandbox

log = logging.getLogger(__name__)

#: the container-side folders besides the bind mounts that the sandbox user can write
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
HOST_FOLDERS = ("workspace", "home", "hidden", "io")
RESET_TIMEOUT_S = 30

# One shell, one `docker exec`: the kill loop skips only this shell and its own children.
RESET_SCRIPT = r"""
me=$$; u=$(id -u); i=0
dirs=""; for d in "$@"; do [ -d "$d" ] && dirs="$dirs $d"; done; set -- $dirs; [ $# -gt 0 ] || { echo "no scratch folders"; exit 5; }
while :; do
  kill -9 -1 2>/dev/null
  left=$(awk -v me="$me" -v u="$u" 'FNR==1{p="";pp=""} /^Pid:/{p=$2} /^PPid:/{pp=$2}
         /^Uid:/{if ($2==u && p!=me && pp!=me) n++} END{print n+0}' /proc/[0-9]*/status 2>/dev/null)
  [ "$left" = 0 ] && break
  i=$((i+1)); [ $i -gt 100 ] && { echo "processes of uid $u survive kill -9"; exit 3; }
  sleep 0.05
done
for d in "$@"; do
  find "$d" -mindepth 1 -type d ! -perm -u=rwx -exec chmod u+rwx {} \; 2>/dev/null
  find "$d" -mindepth 1 -delete 2>/dev/null
done
command -v ipcrm >/dev/null && ipcrm --all 2>/dev/null
left=$(find "$@" -mindepth 1 2>&1 | head -3)
[ -n "$left" ] && { echo "left after reset: $left"; exit 4; }
echo CLEAN
"""


@dataclass
class Warm:
    """An idle container, the sandbox root whose folders it mounts, and its mount points' inodes."""

    container: Any
    root: SandboxRoot
    marks: dict[str, tuple[int, int]]


def mount_points(sb: DockerSandbox) -> list[str]:
    """Paths in the host folders (`home/.openclaw/workspace`) where docker made a mount point for another
    bind mount. Removing one from the host detaches that mount in the container, so a reset keeps them."""
    from clawsdk_plugins.sandbox_docker import IO_PATH

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
    root = sb.sandbox_root.path
    sb.pool_marks = {}
    for rel in mount_points(sb):
        st = os.lstat(root / rel)
        sb.pool_marks[rel] = (st.st_dev, st.st_ino)


_lock = threading.Lock()
_idle: dict[tuple, list[Warm]] = {}
_atexit_registered = False


def key_of(sb: DockerSandbox) -> tuple:
    """What a container was made with: only a sandbox asking for the same may take it."""
    opts = {k: v for k, v in vars(sb.opts).items() if k != "pool_size"}
    return (str(sb.client.api.base_url), str(sb.sandbox_base()), sb.user, sb.keeper,
            tuple(sorted((k, repr(v)) for k, v in opts.items())))


def enabled(sb: DockerSandbox) -> bool:
    # without root the keeper runs as the sandbox uid, so the reset's `kill -9 -1` would stop the container
    return sb.opts.pool_size > 0 and sb.keeper != sb.user


def adopt(sb: DockerSandbox, task: Task) -> bool:
    """Give `sb` a warm container and its (clean) folders, with the task's files written; False if none."""
    key = key_of(sb)
    with _lock:
        stack = _idle.get(key)
        warm = stack.pop() if stack else None
    if warm is None:
        return False
    root = warm.root.path
    sb.sandbox_root, sb.root, sb.container, sb.pool_marks = warm.root, root, warm.container, warm.marks
    sb.workspace, sb.home, sb.io_dir, sb.hidden_dir = root / "workspace", root / "home", root / "io", None
    try:
        for f in task.workspace:
            sb._write_sync(f.path, f.data, f.executable)
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
    warm = Warm(sb.container, sb.sandbox_root, sb.pool_marks)
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
    """Make the container and its folders as a fresh sandbox's; None when proven clean, else why not."""
    api = sb.client.api
    try:
        eid = api.exec_create(sb.container.id, ["sh", "-c", RESET_SCRIPT, "reset", *SCRATCH], user=sb.user,
                              stdout=True, stderr=True)["Id"]
        out = api.exec_start(eid).decode("utf-8", "replace").strip()
        code = api.exec_inspect(eid).get("ExitCode")
    except Exception as e:  # noqa: BLE001 - the container is gone or broken: never reuse it
        return f"reset command failed: {type(e).__name__}: {e}"
    if code != 0 or out != "CLEAN":
        return f"reset said {out[-300:]!r} (exit {code})"
    try:
        return _reset_host(sb)
    except OSError as e:
        return f"emptying the host folders failed: {e}"


def _reset_host(sb: DockerSandbox) -> str | None:
    root = sb.sandbox_root.path
    names = set(os.listdir(root))
    if names != set(HOST_FOLDERS):
        return f"the sandbox root holds {sorted(names)}"
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


def empty_folder(folder: Path, rel: str = "", keep: set[str] = frozenset()) -> None:
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
        except Exception as e:  # noqa: BLE001 - already gone; the orphan sweep gets a real leftover
            log.debug("removing pooled container %s: %s", getattr(w.container, "name", "?"), e)
        w.root.remove()

    # plain threads: at interpreter exit an executor refuses new work
    lanes = [warm[i::16] for i in range(min(16, len(warm)))]
    threads = [threading.Thread(target=lambda lane=lane: [remove(w) for w in lane]) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(warm)


async def drain_async() -> int:
    import anyio

    with anyio.CancelScope(shield=True):
        return await anyio.to_thread.run_sync(drain)


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(drain)
