"""Sandboxes whose workspace is a folder on this host (local, bubblewrap).

File operations act on the folder through descriptors (clawsdk.sandbox.safefs), so a command
that swaps folders for symlinks while a tool runs cannot lead them out; commands run through
`wrap_command`, which a subclass overrides to isolate them. Every command runs in its own
process group, and the group is killed when the command ends or times out, so nothing it
started outlives it.
"""

from __future__ import annotations

import builtins
import errno
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path, PurePosixPath

import anyio

from clawsdk.errors import SandboxError
from clawsdk.sandbox import hostroot, safefs
from clawsdk.sandbox.base import (
    MAX_READ_BYTES,
    SCORING_ENV,
    Entry,
    ExecResult,
    ProcessLimits,
    Sandbox,
    SandboxConfig,
)
from clawsdk.sandbox.process import child_process, prlimited
from clawsdk.sandbox.safefs import Tree
from clawsdk.tasks.model import File, Task

MIN_SHM_FREE = 512 * 1024 * 1024
#: how long a command that could not start for want of descriptors or processes in this process
#: (EMFILE, ENFILE, EAGAIN: the runner's, shared by every rollout) is tried again, at most its own timeout
SPAWN_RETRY_S = 10.0
SPAWN_TRANSIENT = (errno.EMFILE, errno.ENFILE, errno.EAGAIN)
#: where a command started here enters its folder from: the folder's descriptor, opened through the
#: workspace's descriptors, as `/proc/self/fd/N` (the child's chdir follows it to that very folder, however
#: long its path or whatever was renamed since); the folder's path where there is no /proc
PROC_FDS = "/proc/self/fd"
#: what a chdir into a folder the agent changed fails with (Python before 3.12 names the cwd in any error the
#: child met before exec, such as a dup2 of its pipes: those stay the runner's)
ENTER_FAILURES = (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.ELOOP,
                  errno.ESTALE)


def workspace_root(configured: str | None = None) -> Path:
    """Where workspaces live: configured, CLAWSDK_SANDBOX_ROOT, else /dev/shm if it has room, else tmp.

    Thousands of small workspaces on a disk-backed temp folder slow down as a run goes on;
    a memory-backed folder stays linear.
    """
    base = configured or os.environ.get("CLAWSDK_SANDBOX_ROOT")
    if not base:
        base = tempfile.gettempdir()
        shm = Path("/dev/shm")
        try:
            if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > MIN_SHM_FREE:
                base = str(shm)
        except OSError:
            pass
    root = Path(base) / f"clawsdk-{os.getuid()}"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return root


def check_root(configured: str | None = None) -> None:
    """Refuse a configured root (--sandbox-root, CLAWSDK_SANDBOX_ROOT) that cannot hold workspaces, before a
    run starts: otherwise every rollout ends sandbox_error (unscored, retried), the run exits 0, and the
    reason shows only in `clawsdk show`. SandboxError naming the setting."""
    base = configured or os.environ.get("CLAWSDK_SANDBOX_ROOT")
    if not base:
        return  # the default (/dev/shm or tmp): the sandboxes report what goes wrong there
    name = f"--sandbox-root {base}" if configured else f"CLAWSDK_SANDBOX_ROOT={base}"
    fix = "point it at a folder you can write to, or leave it unset"
    if Path(base).exists() and not Path(base).is_dir():
        raise SandboxError(f"{name}: is a file, not a folder: workspaces cannot be made in it; {fix}")
    try:
        root = workspace_root(configured)
    except OSError as e:
        raise SandboxError(f"{name}: workspaces cannot be made in it ({e.strerror or e}); {fix}") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise SandboxError(f"{name}: {root} is not writable; {fix}")


_swept: set[Path] = set()


def sweep_orphans(base: Path, backend: str = "local") -> int:
    """Remove `backend`'s workspaces whose runner died without closing them (SIGKILL), and kill what
    still runs there. Runs once per process and root, before its first sandbox."""
    return hostroot.sweep_orphans(base, backend, kill_processes=True)


def _move(fd: int, name: str, to: int) -> bool:
    """Rename `name` in `fd` into the folder `to` under a fresh name, or, with no such folder (`to` -1), to a
    fresh name beside it that no program looks for."""
    try:
        if to >= 0:
            os.rename(name, secrets.token_hex(8), src_dir_fd=fd, dst_dir_fd=to)
        else:
            os.rename(name, f"clawsdk-moved-{secrets.token_hex(8)}", src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        return False
    return True


def _let_owner_in(fd: int) -> None:
    """Give a folder's owner its r-x, as `Tree.scrub` does the workspace's folders."""
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o500 != 0o500:
            os.fchmod(fd, mode | 0o500)
    except OSError:
        pass


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def feed(pipe, data: bytes) -> None:
    """Write a command's stdin and close it; a command that exits (or is killed) without reading it ends
    the write."""
    try:
        await pipe.send(data)
        await pipe.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


class HostDirSandbox(Sandbox):
    """A workspace folder on the host; subclasses decide how commands are isolated."""

    name = "hostdir"
    #: whether each command mounts the workspace afresh (bwrap): then the folders down to a workspace mounted
    #: inside HOME are made again where the agent moved them or put something else in their place
    remounts: bool = False

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.root: Path | None = None
        self.workspace: Path | None = None
        self.hidden_dir: Path | None = None
        self.home: Path | None = None
        self.workspace_path = ""
        self._groups: set[int] = set()
        self._closed = False
        #: the host uid that owns what the sandbox may write; None: leave ownership alone
        self.file_owner: int | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self, task: Task) -> None:
        base = workspace_root(self.config.root)
        if base not in _swept:
            _swept.add(base)
            await anyio.to_thread.run_sync(sweep_orphans, base, self.name)
        self.root = base / hostroot.root_name(self.name)  # the name is the owner tag: no window untagged
        self.workspace = self.root / "workspace"
        self.home = self.root / "home"
        try:
            self.workspace.mkdir(parents=True)
            self.home.mkdir()
            for f in task.workspace:
                self._write_sync(f.path, f.data, f.executable)
        except OSError as e:
            raise SandboxError(f"could not create the workspace under {base}: {e}") from e
        self.workspace_path = self.visible_workspace()

    def visible_workspace(self) -> str:
        assert self.workspace is not None
        return str(self.workspace)

    def visible_hidden(self) -> str:
        assert self.hidden_dir is not None
        return str(self.hidden_dir)

    def stop_commands(self) -> None:
        """Kill every command (and long-lived process) still running, with what it started."""
        for pgid in list(self._groups):
            kill_group(pgid)
        self._groups.clear()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop_commands()
        if self.root is not None and self.root.exists():
            await anyio.to_thread.run_sync(hostroot.remove_tree, self.root)

    # ---- files -----------------------------------------------------------------------------

    def files(self) -> Tree:
        """The workspace, reached through descriptors; what it creates belongs to `file_owner`."""
        if self.workspace is None:
            raise SandboxError("sandbox not started")
        return Tree(self.workspace, aliases=(self.visible_workspace(),), owner=self.file_owner)

    def _write_sync(self, path: str, data: bytes, executable: bool = False) -> None:
        self.files().write(path, data, executable=executable)

    # Each file call runs in a worker thread: a recursive list of the most a workspace may hold (130,000
    # entries) took 0.75 s on the event loop, and every other rollout of the process stood still meanwhile.

    async def read(self, path: str) -> bytes:
        return await anyio.to_thread.run_sync(self.files().read, path)

    async def read_capped(self, path: str, max_bytes: int | None = None) -> bytes:
        return await anyio.to_thread.run_sync(self.files().read, path,
                                              MAX_READ_BYTES if max_bytes is None else max_bytes)

    async def write(self, path: str, data: bytes, *, executable: bool = False) -> None:
        await anyio.to_thread.run_sync(self._write_sync, path, data, executable)

    async def list(self, path: str = ".", *, recursive: bool = False) -> list[Entry]:
        def walk() -> list[Entry]:
            return [Entry(n.path, n.is_dir, n.size) for n in self.files().list(path, recursive=recursive)]

        return await anyio.to_thread.run_sync(walk)

    async def move_aside(self, path: str) -> str | None:
        return await anyio.to_thread.run_sync(self.files().move_aside, path)

    async def end_turn(self) -> builtins.list[str]:
        """Sandbox.end_turn, done from the host through descriptors (`Tree.scrub`): the in-sandbox scan ran
        as the agent's uid, so a folder the agent made unlistable hid what was in it, and a deep folder
        chain or thousands of slow links ran it out of time, leaving a link to the hidden files in place."""
        self.turn_over = True
        assert self.root is not None
        # a fresh name: the local sandbox's root is the agent's to write
        aside = str(self.root / f"scrubbed-{secrets.token_hex(8)}")
        removed = await anyio.to_thread.run_sync(self.files().scrub, aside)
        return removed + await anyio.to_thread.run_sync(self._clear_home)

    def visible_home(self) -> str:
        assert self.home is not None
        return str(self.home)

    def _clear_home(self) -> builtins.list[str]:
        """Move the agent's dot files out of HOME, where the verifier's commands read their startup files:
        a planted ~/.sqliterc (a TEMP VIEW named like the table a check counts) or ~/.jq (`def length: 3;`)
        passed checks for an agent that wrote nothing. Other files stay, and so do the folders that lead to
        a workspace mounted inside HOME (OpenClaw's ~/.openclaw/workspace), of which only the workspace
        itself is kept. Something else in their place (`mv ~/.openclaw ~/.oc2` and a file or a dangling link
        named ~/.openclaw) moves too, and a backend that mounts per command gets real folders back: else
        bwrap could not mount the workspace, every verifier command failed, and a check expecting exit 1
        passed. Returns what moved, as `~/NAME`."""
        if self.home is None or self.root is None:
            return []
        chain = self.home_chain()
        moved: list[str] = []
        try:
            fd = os.open(self.home, safefs.O_DIR)
        except OSError:
            return []
        level, rel, to = 0, "", None
        try:
            while True:
                keep = chain[level] if level < len(chain) else None
                if keep is not None:  # `chmod 000 ~` stopped bwrap's chdir to the workspace as well
                    _let_owner_in(fd)
                with os.scandir(fd) as it:
                    entries = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
                for name, is_dir in entries:
                    if name == keep:
                        if is_dir:
                            continue  # on the way to the workspace
                    elif level == 0 and not name.startswith("."):
                        continue
                    if to is None:
                        to = self._aside_for_home()
                    if _move(fd, name, to):
                        moved.append(f"~/{rel}{name}")
                if keep is None:
                    return moved
                if self.remounts:
                    self._remake(fd, keep)
                if level == len(chain) - 1:
                    return moved
                try:
                    sub = os.open(keep, safefs.O_DIR, dir_fd=fd)
                except OSError:
                    return moved
                os.close(fd)
                fd, level, rel = sub, level + 1, f"{rel}{keep}/"
        finally:
            os.close(fd)
            if to is not None and to >= 0:
                os.close(to)

    def home_chain(self) -> tuple[str, ...]:
        """The folder names from HOME down to a workspace mounted inside it (OpenClaw's .openclaw, workspace);
        () when the workspace is not inside HOME."""
        home, ws = PurePosixPath(self.visible_home()), PurePosixPath(self.visible_workspace())
        return ws.relative_to(home).parts if ws != home and ws.is_relative_to(home) else ()

    def _aside_for_home(self) -> int:
        """A new folder of a fresh name in the root for what leaves HOME (the local sandbox's root is the
        agent's to write: a file it left at a fixed name made end_turn fail, verifier_error); -1 if none can
        be made, and what leaves HOME is renamed where it is."""
        assert self.root is not None
        aside = self.root / f"home.agent-{secrets.token_hex(8)}"
        try:
            aside.mkdir(mode=0o700)
            return os.open(aside, safefs.O_DIR)
        except OSError:
            return -1

    def _remake(self, fd: int, name: str) -> None:
        """A real folder `name` in `fd`, the sandbox's own, where none is (the agent's was just moved)."""
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
            sub = os.open(name, safefs.O_DIR, dir_fd=fd)
        except OSError:  # there already, or no room: the mount fails as it would have
            return
        try:
            os.fchmod(sub, 0o755)
            if self.file_owner is not None:
                os.fchown(sub, self.file_owner, self.file_owner)
        finally:
            os.close(sub)

    def cwd_of(self, cwd: str | None) -> str:
        """A command's folder, resolved inside the workspace ('' for its root)."""
        return self.files().resolve_dir(cwd) if cwd else ""

    def hidden_tree(self) -> Tree:
        assert self.root is not None
        self.hidden_dir = self.root / "hidden"
        self.hidden_dir.mkdir(mode=0o755, exist_ok=True)
        # readable by the sandbox's uid, writable only by the host: a verifier cannot rewrite its own checks
        return Tree(self.hidden_dir, mode=0o644, what="hidden folder")

    async def inject_hidden(self, files: builtins.list[File]) -> str:
        tree = self.hidden_tree()
        for f in files:
            tree.write(f.path, f.data, executable=f.executable)
        self.hidden_path = self.visible_hidden()
        return self.hidden_path

    # ---- commands --------------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "CLAWSDK_WORKSPACE": self.workspace_path,
        }
        if self.hidden_path:
            env["CLAWSDK_HIDDEN"] = self.hidden_path
        if self.turn_over:
            env.update(SCORING_ENV)
        return env

    def wrap_command(self, argv: builtins.list[str], cwd: str, env: dict[str, str]) -> tuple[builtins.list[str], str, dict]:
        """Return (argv, host cwd, env) to spawn; the base runs the command as it is."""
        return argv, cwd, env

    def wrap_spawn(self, argv: builtins.list[str], env: dict[str, str],
                   limits: ProcessLimits | None) -> tuple[builtins.list[str], str, dict]:
        """(argv, host cwd, env) of a long-lived process (`spawn`); the base runs it in the workspace under
        `limits` (prlimit), with the tool runtime where it is on the host."""
        assert self.workspace is not None
        return prlimited(argv, limits), str(self.workspace), env

    def spawn(self, argv, *, env=None, limits=None):
        if self.workspace is None or self._closed:
            raise SandboxError("spawn in a sandbox that is not running")
        full_env = self.base_env() | (env or {})
        wrapped, cwd, full_env = self.wrap_spawn(list(argv), full_env, limits)
        return child_process(wrapped, cwd=cwd, env=full_env, kill_group=kill_group, groups=self._groups)

    @staticmethod
    def _cannot_enter(cwd: str | None, e: OSError, started: float) -> ExecResult:
        """The command's own folder could not be entered (gone, not a folder, no search right, a path longer
        than the system takes): the agent's doing, answered as a shell would, exit 126; never a broken
        sandbox."""
        what = f"the working folder {cwd!r}" if cwd else "the workspace"
        reason = e.strerror or os.strerror(e.errno or 0)
        if e.errno == errno.ENAMETOOLONG:
            reason += " (its path is longer than the system allows; use a shorter one)"
        return ExecResult(126, "", f"exec: cannot enter {what}: {reason}; the command did not run",
                          duration_s=time.perf_counter() - started)

    async def exec(self, command, *, timeout=60.0, cwd=None, env=None, stdin=None) -> ExecResult:
        if self.workspace is None or self._closed:
            self.failure = self.failure or "exec in a sandbox that is not running"
            raise SandboxError(self.failure)
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        rel = self.cwd_of(cwd)
        host_cwd = str(self.workspace / rel) if rel else str(self.workspace)
        full_env = self.base_env() | (env or {})
        argv, spawn_cwd, full_env = self.wrap_command(argv, host_cwd, full_env)
        # the command enters the agent's folder itself (no wrapper does it inside): a failure there is the
        # agent's (a folder removed, made unsearchable, a path past PATH_MAX), never its sandbox's
        enters_workdir = spawn_cwd == host_cwd
        by_descriptor = enters_workdir and os.path.isdir(PROC_FDS)  # noqa: ASYNC240 - a stat on procfs
        limit = self.config.output_limit
        started = time.perf_counter()
        pause = 0.05
        cwd_fd: int | None = None
        try:
            while True:
                if by_descriptor and cwd_fd is None:
                    try:
                        cwd_fd = self.files().open_dir(rel)
                    except OSError as e:
                        if e.errno not in SPAWN_TRANSIENT:
                            raise  # changed since it was resolved: the contract's errors, as from cwd_of
                        # short of descriptors: this try enters it by name, the next by descriptor again
                entered = spawn_cwd if cwd_fd is None else f"{PROC_FDS}/{cwd_fd}"
                try:
                    proc = await anyio.open_process(
                        argv,
                        cwd=entered,
                        env=full_env,
                        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        start_new_session=True,
                    )
                    break
                except OSError as e:
                    if e.errno == errno.E2BIG:  # the command's own fault, answered as a shell would
                        size = sum(len(a.encode("utf-8", "surrogateescape")) + 1 for a in argv)
                        return ExecResult(126, "", f"command too long: {size:,} bytes with its arguments, "
                                                   "over the system's limit (Argument list too long); write "
                                                   "it to a file and run that instead",
                                          duration_s=time.perf_counter() - started)
                    if e.errno not in SPAWN_TRANSIENT:
                        # subprocess names the cwd in the error the child raised before exec (its chdir), the
                        # program in one from exec itself (bash missing: the runner's fault)
                        if (enters_workdir and e.errno in ENTER_FAILURES and e.filename == entered
                                and e.filename != argv[0]):
                            return self._cannot_enter(cwd, e, started)
                        self.failure = f"could not start {argv[0]!r}: {e}"
                        raise SandboxError(self.failure) from e
                    # this process is short of descriptors or processes, which every rollout shares: taken
                    # for a broken sandbox, another rollout's burst (end_turn walking its deep links) ended
                    # this one unscored
                    if time.perf_counter() - started + pause > min(SPAWN_RETRY_S, timeout or SPAWN_RETRY_S):
                        raise SandboxError(f"could not start {argv[0]!r}: {e}; tried for "
                                           f"{time.perf_counter() - started:.1f} s") from e
                    await anyio.sleep(pause)
                    pause = min(pause * 2, 1.0)
        finally:
            if cwd_fd is not None:
                os.close(cwd_fd)
        self._groups.add(proc.pid)
        out, err = bytearray(), bytearray()
        cut = [False]

        async def drain(stream, buf: bytearray) -> None:
            async for chunk in stream:
                room = limit - len(buf)
                if room > 0:
                    buf += chunk[:room]
                if len(chunk) > room:
                    cut[0] = True

        timed_out = False
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, proc.stdout, out)
                tg.start_soon(drain, proc.stderr, err)
                if stdin is not None:  # fed alongside: a command that never reads it still times out
                    tg.start_soon(feed, proc.stdin, stdin)
                with anyio.move_on_after(timeout) as scope:
                    await proc.wait()
                timed_out = scope.cancelled_caught
                # the command is over: anything it left running in its group goes too
                kill_group(proc.pid)
                with anyio.CancelScope(shield=True):
                    await proc.wait()
        finally:
            kill_group(proc.pid)
            self._groups.discard(proc.pid)
        code = proc.returncode if proc.returncode is not None else -9
        return ExecResult.from_output(code, out, err, timed_out=timed_out, duration_s=time.perf_counter() - started,
                                      cut=cut[0], limit=limit, timeout=timeout)

