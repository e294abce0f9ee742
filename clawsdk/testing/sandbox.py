"""The sandbox conformance kit: the checks every built-in sandbox passes, for any backend.

Use it from pytest::

    import pytest
    from clawsdk.testing import SANDBOX_CHECKS, run_sandbox_check

    @pytest.mark.parametrize("check", SANDBOX_CHECKS, ids=str)
    def test_my_sandbox(check):
        run_sandbox_check(check, my_factory)          # factory(config) -> Sandbox

or without pytest: ``clawsdk sandbox self-check NAME``, or `self_check(factory)`.

Each check gets fresh sandboxes from the factory and closes them. A check that needs a
capability the backend does not declare (network isolation, file system isolation) is
skipped with the reason, never passed silently.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import hashlib
import os
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from clawsdk.errors import ClawError, FileTooLarge, PathEscapeError
from clawsdk.sandbox.base import Sandbox, SandboxConfig, SandboxPlugin
from clawsdk.tasks.model import File, Task

Factory = Callable[[SandboxConfig | None], Sandbox]


class CheckSkipped(Exception):
    """The backend does not declare what this check needs."""


@dataclass(frozen=True)
class SandboxCheck:
    name: str
    fn: Callable[[Factory, SandboxConfig], Awaitable[None]]
    doc: str

    def __str__(self) -> str:
        return self.name


SANDBOX_CHECKS: list[SandboxCheck] = []


def _check(fn):
    SANDBOX_CHECKS.append(SandboxCheck(fn.__name__.removeprefix("check_"), fn, (fn.__doc__ or "").strip()))
    return fn


def _task(**files: str) -> Task:
    return Task(id="conformance", instruction="conformance check",
                workspace=[File(path=k.replace("__", "/"), text=v) for k, v in files.items()])


class _Opened:
    """Start sandboxes and close them whatever happens."""

    def __init__(self, factory: Factory, config: SandboxConfig):
        self.factory, self.config = factory, config
        self.open: list = []

    async def start(self, task: Task | None = None, config: SandboxConfig | None = None) -> Sandbox:
        sb = self.factory(config or self.config)
        self.open.append(sb)
        await sb.start(task or _task())
        return sb

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        with anyio.CancelScope(shield=True):
            for sb in self.open:
                await sb.close()


def _host_path(sb: Sandbox) -> Path | None:
    """The host folder of a sandbox's workspace, for backends that have one."""
    ws = getattr(sb, "workspace", None)
    return Path(ws) if isinstance(ws, (str, Path)) else None


async def _until(predicate: Callable[[], Awaitable[bool] | bool], what: str, timeout: float = 10.0) -> None:
    """Poll `predicate` until true, or fail saying `what` never happened."""
    try:
        with anyio.fail_after(timeout):
            while True:
                result = predicate()
                if hasattr(result, "__await__"):
                    result = await result
                if result:
                    return
                await anyio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{what} within {timeout:g} s") from None


# ---- the checks ------------------------------------------------------------------------------


@_check
async def check_text_and_binary_files(factory: Factory, config: SandboxConfig) -> None:
    """Text and every byte value round-trip through write/read and through commands."""
    async with _Opened(factory, config) as o:
        sb = await o.start(_task(**{"in__notes.md": "héllo wörld\n"}))
        assert (await sb.read("in/notes.md")).decode() == "héllo wörld\n", "initial text file changed"
        blob = bytes(range(256)) * 4
        await sb.write("bin/blob.dat", blob)
        assert await sb.read("bin/blob.dat") == blob, "binary file changed on the way through write/read"
        r = await sb.exec("sha256sum bin/blob.dat")
        assert r.exit_code == 0, r.stderr
        assert r.stdout.split()[0] == hashlib.sha256(blob).hexdigest(), "a command sees other bytes than written"
        r = await sb.exec("printf '\\000\\001\\377' > made.bin && printf 'ünï\\n' > made.txt")
        assert r.exit_code == 0, r.stderr
        assert await sb.read("made.bin") == b"\x00\x01\xff", "bytes a command wrote read back wrong"
        assert (await sb.read("made.txt")).decode() == "ünï\n"
        await sb.write("run.sh", b"#!/bin/sh\necho ran\n", executable=True)
        r = await sb.exec("./run.sh")
        assert r.stdout.strip() == "ran", f"an executable file did not run: {r.stderr}"
        names = {e.path for e in await sb.list(".", recursive=True)}
        assert {"in/notes.md", "bin/blob.dat", "made.bin", "run.sh"} <= names, names


@_check
async def check_large_files(factory: Factory, config: SandboxConfig) -> None:
    """A 24 MiB file goes in and comes out intact; so does one a command writes."""
    async with _Opened(factory, config) as o:
        sb = await o.start()
        big = os.urandom(24 * 1024 * 1024)
        await sb.write("big.bin", big)
        r = await sb.exec("wc -c < big.bin && sha256sum big.bin", timeout=60)
        assert r.exit_code == 0, r.stderr
        size, digest = r.stdout.split()[0], r.stdout.split()[1]
        assert int(size) == len(big) and digest == hashlib.sha256(big).hexdigest(), "large file changed"
        assert await sb.read("big.bin") == big
        r = await sb.exec("head -c 16777216 /dev/zero > zeros.bin", timeout=60)
        assert r.exit_code == 0, r.stderr
        assert await sb.read("zeros.bin") == bytes(16 * 1024 * 1024)
        # what the tools and verifiers read: up to the cap, and past it an error naming the file
        assert await sb.read_capped("zeros.bin", 16 * 1024 * 1024) == bytes(16 * 1024 * 1024)
        try:
            await sb.read_capped("big.bin", 1024 * 1024)
        except FileTooLarge as e:
            assert "big.bin" in str(e) and e.size == len(big), f"read_capped's error: {e}"
        else:
            raise AssertionError("read_capped read a 24 MiB file past a 1 MiB cap")


@_check
async def check_exit_codes(factory: Factory, config: SandboxConfig) -> None:
    """Exit codes come back as the command returned them, for strings and argv lists."""
    async with _Opened(factory, config) as o:
        sb = await o.start()
        assert (await sb.exec("true")).exit_code == 0
        assert (await sb.exec("exit 3")).exit_code == 3
        assert (await sb.exec(["false"])).exit_code == 1
        r = await sb.exec(["sh", "-c", "exit 42"])
        assert r.exit_code == 42 and not r.ok and not r.timed_out
        r = await sb.exec("no-such-command-xyz")
        assert r.exit_code == 127, f"a missing command gave {r.exit_code}"


@_check
async def check_output_capture_and_caps(factory: Factory, config: SandboxConfig) -> None:
    """stdout and stderr arrive apart; output past the limit is cut and said to be."""
    async with _Opened(factory, config) as o:
        sb = await o.start()
        r = await sb.exec("echo out; echo err >&2; printf 'ünï'")
        assert r.stdout == "out\nünï" and r.stderr.strip() == "err", (r.stdout, r.stderr)
        r = await sb.exec(["cat"], stdin=b"from stdin\n")
        assert r.stdout == "from stdin\n", f"stdin did not reach the command: {r.stdout!r} {r.stderr!r}"
        small = dataclasses.replace(config, output_limit=1000)
        capped = await o.start(config=small)
        r = await capped.exec("head -c 100000 /dev/zero | tr '\\0' a; head -c 5000 /dev/zero | tr '\\0' b >&2")
        assert r.truncated, "output past the limit was not marked truncated"
        assert r.stdout.startswith("a" * 1000) and "a" * 1001 not in r.stdout, f"kept {len(r.stdout)} characters"
        assert "b" * 1001 not in r.stderr, f"stderr kept {len(r.stderr)} characters"
        assert "cut" in r.stdout, "the cut is not said in the output"


@_check
async def check_timeout_kills_children(factory: Factory, config: SandboxConfig) -> None:
    """A command past its timeout is killed with everything it started."""
    async with _Opened(factory, config) as o:
        sb = await o.start()
        # the background child holds a lock on a workspace file for as long as it lives
        with anyio.fail_after(30):
            r = await sb.exec("flock -x held.lock sleep 300 & touch started; sleep 300", timeout=1.5)
        assert r.timed_out and r.exit_code == 124, f"timeout not reported: {r}"
        assert r.duration_s < 15, f"took {r.duration_s:.1f} s to stop"
        with anyio.fail_after(30):  # more stdin than a pipe holds, never read
            r = await sb.exec("sleep 300", stdin=b"x" * (4 << 20), timeout=1.5)
        assert r.timed_out, f"a command that never reads its stdin was not stopped on time: {r}"
        host = _host_path(sb)
        if host is None:  # no host folder: ask the sandbox whether the lock is free
            r = await sb.exec("flock -n -x held.lock true", timeout=10)
            assert r.exit_code == 0, "a child of the timed-out command still holds its lock"
            return
        lock = host / "held.lock"

        def free() -> bool:
            fd = os.open(lock, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise
            finally:
                os.close(fd)

        await _until(free, "the child of a timed-out command was not killed")


@_check
async def check_spawn_runs_behind_the_boundary(factory: Factory, config: SandboxConfig) -> None:
    """`spawn` starts a long-lived process in the workspace: its stdin and stdout are pipes, its memory limit
    holds, and leaving the context stops it with what it started (the tools that read the agent's files run
    this way)."""
    from clawsdk.sandbox.base import ProcessLimits

    async with _Opened(factory, config) as o:
        sb = await o.start(_task(**{"in.txt": "spawned\n"}))
        marker = f"clawsdk-spawned-{secrets.token_hex(4)}"
        script = f'(exec -a {marker} sleep 300) & touch started; while read -r line; do cat "$line"; done'
        try:
            spawned = sb.spawn(["bash", "-c", script])
        except NotImplementedError as e:
            raise CheckSkipped(f"the backend does not run processes behind its boundary: {e}") from None
        with anyio.fail_after(60):
            async with spawned as proc:
                for _ in range(2):  # a dialogue, not one exchange
                    await proc.stdin.send(b"in.txt\n")
                    got = b""
                    while not got.endswith(b"\n"):
                        got += await proc.stdout.receive()
                    assert got == b"spawned\n", f"a spawned process's answer through its stdout: {got!r}"
            # (the pattern's last letter in brackets: it must not match the command that looks for it)
            r = await sb.exec(f"test -e started && ! pgrep -f '{marker[:-1]}[{marker[-1]}]'", timeout=30)
            assert r.exit_code == 0, "what a spawned process started still runs after its context was left"
            async with sb.spawn(["python3", "-c", "bytearray(512 * 2**20)"],
                                limits=ProcessLimits(memory_mb=256)) as proc:
                code = await proc.wait()
            assert code != 0 and "MemoryError" in proc.stderr_tail(), (
                f"a 512 MiB allocation under a 256 MiB limit exited {code}: {proc.stderr_tail()[-300:]!r}")


@_check
async def check_env_and_cwd(factory: Factory, config: SandboxConfig) -> None:
    """Commands start in the workspace (or the given folder) with the given environment."""
    async with _Opened(factory, config) as o:
        sb = await o.start(_task(**{"sub__deep__x.txt": "x\n"}))
        r = await sb.exec("pwd; echo $CLAWSDK_WORKSPACE")
        pwd, announced = r.stdout.split()
        assert pwd == sb.workspace_path == announced, (pwd, sb.workspace_path, announced)
        r = await sb.exec("pwd; cat x.txt; echo \"$GREETING\"", cwd="sub/deep", env={"GREETING": "hi there"})
        assert r.stdout.split("\n")[:3] == [f"{sb.workspace_path.rstrip('/')}/sub/deep", "x", "hi there"], r.stdout
        r = await sb.exec("echo made > from-cmd.txt")
        assert (await sb.read("from-cmd.txt")) == b"made\n"
        await _refused(sb.exec("true", cwd="../.."), "../..", PathEscapeError, "exec(cwd='../..')")


def _host_ip() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


class _Listener:
    """A TCP listener on the host that counts connections."""

    def __init__(self, host: str):
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.hits += 1
                conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self.stop = True
        self.thread.join(2)
        self.sock.close()


@_check
async def check_network_blocked(factory: Factory, config: SandboxConfig) -> None:
    """With network isolation declared, nothing on the host (loopback or not) is reachable; loopback inside works."""
    probe = factory(config)
    if not probe.capabilities.network_isolated:
        raise CheckSkipped(f"{type(probe).__name__} does not declare network isolation")
    targets = [("127.0.0.1", _Listener("127.0.0.1"))]
    ip = _host_ip()
    if ip:
        targets.append((ip, _Listener(ip)))
    try:
        async with _Opened(factory, config) as o:
            sb = await o.start()
            for host, listener in targets:
                r = await sb.exec(f"timeout 5 bash -c 'echo hi > /dev/tcp/{host}/{listener.port}' && echo CONNECTED",
                                  timeout=20)
                assert "CONNECTED" not in r.stdout, f"reached the host at {host}:{listener.port}"
            r = await sb.exec("getent hosts example.com || echo no-dns", timeout=20)
            assert "no-dns" in r.stdout, "name resolution reached a server"
            has_python = (await sb.exec("command -v python3")).exit_code == 0
            if has_python:
                r = await sb.exec(["python3", "-c", _LOOPBACK], timeout=20)
                assert r.stdout.strip() == "loopback ok", f"loopback inside the sandbox does not work: {r.stderr}"
        assert all(listener.hits == 0 for _, listener in targets), "a connection reached a host listener"
    finally:
        for _, listener in targets:
            listener.close()


_LOOPBACK = """
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=5); a, _ = s.accept(); a.sendall(b"ok")
print("loopback", c.recv(2).decode())
"""


@_check
async def check_hidden_files_invisible_until_injected(factory: Factory, config: SandboxConfig) -> None:
    """Hidden files are nowhere the sandbox can see until inject_hidden, then outside the workspace."""
    marker = "HIDDEN-" + secrets.token_hex(8)
    async with _Opened(factory, config) as o:
        sb = await o.start(_task(**{"visible.txt": "v"}))
        assert sb.hidden_path is None
        # an isolated sandbox is small enough to search whole; elsewhere, what the sandbox owns
        where_to_look = '/ --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr' \
            if sb.capabilities.fs_isolated else '. "$HOME"'
        r = await sb.exec(f"grep -rsl {marker} {where_to_look} 2>/dev/null; echo done", timeout=60)
        assert marker not in r.stdout, "hidden content is visible before injection"
        where = await sb.inject_hidden([File(path="reward/check.py", text=f"print('{marker}')\n"),
                                        File(path="reward/reward.sh", text="echo 1\n", executable=True)])
        assert where == sb.hidden_path and where, "inject_hidden did not say where the files are"
        ws = sb.workspace_path.rstrip("/")
        assert where.rstrip("/") != ws and not where.startswith(ws + "/"), "hidden files landed in the workspace"
        assert all(not e.path.startswith("reward") for e in await sb.list(".", recursive=True)), \
            "hidden files are listed in the workspace"
        r = await sb.exec(f"cat {where}/reward/check.py && {where}/reward/reward.sh")
        assert marker in r.stdout and r.stdout.strip().endswith("1"), f"injected files unusable: {r.stderr}"


@_check
async def check_end_turn_removes_what_no_verifier_can_read(factory: Factory, config: SandboxConfig) -> None:
    """end_turn() removes the FIFOs and sockets an agent left (in a folder it made read-only too), and the
    symlinks that resolve out of the workspace (never what they point at), and keeps everything else."""
    async with _Opened(factory, config) as o:
        sb = await o.start(_task(**{"keep.txt": "k"}))
        outside = await sb.exec("d=$(mktemp -d) && mkfifo $d/out.fifo && echo $d")
        r = await sb.exec(
            "mkfifo answer.txt && mkdir -p ro/sub && mkfifo ro/sub/p && chmod 555 ro/sub && "
            "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('s.sock')\" && "
            f"ln -s {outside.stdout.strip()} link && ln -s answer.txt dangling-after && echo made")
        assert r.stdout.strip() == "made", f"could not make the test's special files: {r.stderr}"
        # out of the workspace once resolved: a link to where the hidden files will be, and one that looks
        # inside by its text (`up/w/../..` from `up/w`) but is not: `up/w` names the workspace itself
        r = await sb.exec("mkdir up && ln -s /clawsdk/hidden/expected.txt ro/out.txt && ln -s \"$(pwd -P)\" up/w && "
                          "ln -s up/w/../../etc/passwd sneaky && ln -s keep.txt inside && echo made")
        assert r.stdout.strip() == "made", f"could not make the test's links: {r.stderr}"
        removed = await sb.end_turn()
        assert removed == ["answer.txt", "link", "ro/out.txt", "ro/sub/p", "s.sock", "sneaky"], \
            f"end_turn removed {removed}"
        left = await sb.exec("find . -mindepth 1 | sort; stat -c %a ro/sub; "
                             f"test -p {outside.stdout.strip()}/out.fifo && echo outside-kept")
        assert left.stdout.split() == ["./dangling-after", "./inside", "./keep.txt", "./ro", "./ro/sub", "./up",
                                       "./up/w", "555", "outside-kept"], f"after end_turn: {left.stdout}"
        assert await sb.end_turn() == [], "a second end_turn found more"


@_check
async def check_after_end_turn_the_agents_python_startup_files_do_not_run(factory: Factory,
                                                                        config: SandboxConfig) -> None:
    """Python runs usercustomize.py from the user site in $HOME at start. The agent's commands may; once
    end_turn() has run, the verifier's must not (SCORING_ENV), or one planted file scores an idle agent."""
    async with _Opened(factory, config) as o:
        sb = await o.start()
        plant = ("d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\" && "
                 "echo 'print(\"planted\")' > \"$d/usercustomize.py\" && python3 -c 'print(1)'")
        r = await sb.exec(plant)
        assert r.stdout.split() == ["planted", "1"], f"could not plant the file: {r.stdout} {r.stderr}"
        await sb.end_turn()
        r = await sb.exec("python3 -c 'print(1)'")
        assert r.stdout.split() == ["1"], f"after end_turn the agent's usercustomize.py still ran: {r.stdout}"


@_check
async def check_two_sandboxes_isolated(factory: Factory, config: SandboxConfig) -> None:
    """Two sandboxes have separate workspaces; with fs isolation one cannot read the other's files."""
    secret = "SECRET-" + secrets.token_hex(8)
    async with _Opened(factory, config) as o:
        a, b = await o.start(), await o.start()
        await a.write("secret.txt", secret.encode())
        assert (await b.exec("cat secret.txt")).exit_code != 0, "a file of one sandbox appears in the other"
        host_a = _host_path(a)
        if b.capabilities.fs_isolated and host_a is not None:
            r = await b.exec(f"cat {host_a}/secret.txt; ls {host_a.parent.parent}")
            assert secret not in r.stdout, "one sandbox read another's workspace through the host path"
            assert host_a.parent.name not in r.stdout, "one sandbox can list the others"


async def _refused(call: Awaitable, path: str, error: type[Exception], what: str) -> None:
    """`call` raises exactly `error` (or a subclass) and its message names `path`."""
    try:
        await call
    except error as e:
        assert path in str(e), f"{what}: the {type(e).__name__} does not name the path {path!r}: {e}"
        return
    except Exception as e:
        raise AssertionError(f"{what} raised {type(e).__name__} ({e}); the contract is {error.__name__}") from e
    raise AssertionError(f"{what} was accepted; the contract is {error.__name__}")


@_check
async def check_file_api_confined(factory: Factory, config: SandboxConfig) -> None:
    """read/write/list refuse paths that leave the workspace, also through symlinks a command made,
    with PathEscapeError naming the path."""
    async with _Opened(factory, config) as o:
        sb = await o.start()
        for bad in ("../escape.txt", "/etc/passwd", "a/../../x"):
            await _refused(sb.write(bad, b"x"), bad, PathEscapeError, f"write({bad!r})")
        r = await sb.exec("ln -s / root-link && ln -s /etc/passwd pw-link")
        assert r.exit_code == 0, r.stderr
        for bad in ("root-link/etc/passwd", "pw-link"):
            await _refused(sb.read(bad), bad, PathEscapeError, f"read({bad!r}) through a symlink")
        await _refused(sb.write("root-link/tmp/clawsdk-escape", b"x"), "root-link/tmp/clawsdk-escape",
                       PathEscapeError, "write through a symlink")
        await _refused(sb.list("../"), "../", PathEscapeError, "list('../')")


@_check
async def check_file_api_errors(factory: Factory, config: SandboxConfig) -> None:
    """A missing path is FileNotFoundError and a folder given to read() IsADirectoryError, each naming it."""
    async with _Opened(factory, config) as o:
        sb = await o.start(_task(**{"folder/inside.txt": "x"}))
        await _refused(sb.read("missing.txt"), "missing.txt", FileNotFoundError, "read('missing.txt')")
        await _refused(sb.list("no-such-folder"), "no-such-folder", FileNotFoundError, "list('no-such-folder')")
        await _refused(sb.read("folder"), "folder", IsADirectoryError, "read('folder')")


@_check
async def check_no_trace_of_previous_sandbox(factory: Factory, config: SandboxConfig) -> None:
    """A sandbox started after another closed sees nothing it left: workspace, /tmp, home and hidden files,
    background processes, environment (a backend that reuses containers must reset them this clean)."""
    probe = factory(config)
    if not probe.capabilities.fs_isolated:
        raise CheckSkipped(f"{type(probe).__name__} does not declare file system isolation (/tmp, HOME are shared)")
    mark = "TRACE" + secrets.token_hex(6)
    async with _Opened(factory, config) as o:
        first = await o.start(_task(**{"given.txt": "g"}))
        hidden = await first.inject_hidden([File(path=f"{mark}.txt", text=mark)])
        leave = (f"echo {mark} > {mark}.ws && mkdir -p /tmp/{mark}/deep && echo {mark} > /tmp/{mark}/f && "
                 f"chmod 000 /tmp/{mark} && echo 'export {mark}=1' >> ~/.bashrc && echo {mark} > ~/{mark} && "
                 f"(echo {mark} > /var/tmp/{mark}; echo {mark} > /dev/shm/{mark}; true) 2>/dev/null && "
                 f"{{ setsid sh -c 'sleep 300' {mark} </dev/null >/dev/null 2>&1 & }} && "
                 # until it is in a session of its own, the end of this command would kill it with its group
                 f"for i in $(seq 100); do [ \"$(ps -o sid= -p $! | tr -d ' ')\" = $! ] && break; sleep 0.05; done; "
                 f"echo left")
        r = await first.exec(leave, env={mark: "1"})
        assert r.stdout.strip() == "left", f"could not leave the traces: {r.stdout} {r.stderr}"
        made = f"test -d /tmp/{mark} && test -f ~/{mark} && test -f {mark}.ws && grep -q {mark} ~/.bashrc && echo made"
        if first.capabilities.persistent_processes:  # the background process must really be there to be found
            made = f"ps -eo args | grep -v grep | grep -q 'sleep 300 {mark}' && {made}"
        r = await first.exec(made)
        assert r.stdout.strip() == "made", f"the traces were not all left: {r.stdout} {r.stderr}"
        await first.close()
        second = await o.start(_task(**{"given.txt": "g"}))
        names = {e.path for e in await second.list(".", recursive=True)}
        assert names == {"given.txt"}, f"the workspace holds another sandbox's files: {sorted(names)}"
        r = await second.exec(f"ls -A /tmp /var/tmp /dev/shm ~ 2>/dev/null; cat {hidden}/{mark}.txt 2>/dev/null; "
                              f"env; bash -ic 'echo env-{mark}=${{{mark}:-unset}}' 2>/dev/null; ps -eo args")
        unset = f"env-{mark}=unset"
        seen = [line for line in r.stdout.splitlines() if mark in line and "${" + mark not in line and line != unset]
        assert not seen, f"a new sandbox sees what the previous one left: {seen[:5]}"
        assert unset in r.stdout, f"the environment check did not run: {r.stdout[-300:]} {r.stderr[-300:]}"


@_check
async def check_close_removes_everything(factory: Factory, config: SandboxConfig) -> None:
    """close() removes the workspace and what commands left, folders nested deeper than Python recurses
    too (at once, or at the factory's drain() if it keeps closed sandboxes warm for reuse), is safe twice,
    and stops exec."""
    sb = factory(config)
    await sb.start(_task(**{"a.txt": "a"}))
    await sb.exec("mkdir -p made/deep && echo x > made/deep/f && chmod 500 made/deep")
    r = await sb.exec(["python3", "-c", "import os\nfor _ in range(1200): os.mkdir('n'); os.chdir('n')"], timeout=120)
    assert r.exit_code == 0, f"could not nest 1,200 folders: {r.stderr}"
    host = _host_path(sb)
    root = getattr(sb, "root", None)
    await sb.close()
    await sb.close()
    await SandboxPlugin.of(factory).drain()  # what a run's end does
    if host is not None:
        assert not host.exists(), f"workspace {host} left behind"
    if isinstance(root, (str, Path)):
        assert not await anyio.Path(root).exists(), f"sandbox root {root} left behind"
    try:
        await sb.exec("true")
    except (ClawError, RuntimeError):
        pass
    else:
        raise AssertionError("exec still works after close()")


@_check
async def check_close_after_cancellation(factory: Factory, config: SandboxConfig) -> None:
    """A cancelled command or start still leaves close() able to remove everything, promptly."""
    sb = factory(config)
    await sb.start(_task())
    host = _host_path(sb)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            async def long_command() -> None:
                await sb.exec("touch started; sleep 300", timeout=600)

            tg.start_soon(long_command)
            await _until(lambda: (host / "started").exists() if host else True, "the command did not start")
            tg.cancel_scope.cancel()
        await sb.close()
        await SandboxPlugin.of(factory).drain()
    if host is not None:
        assert not host.exists(), f"workspace {host} left after close under cancellation"
    late = factory(config)
    with anyio.move_on_after(0.001):
        await late.start(_task(**{"a.txt": "a"}))
    with anyio.fail_after(30):
        await late.close()
        await SandboxPlugin.of(factory).drain()
    late_host = _host_path(late)
    if late_host is not None:
        assert not late_host.exists(), "a sandbox whose start was cancelled left its workspace"


# ---- running them ----------------------------------------------------------------------------


def run_sandbox_check(check: SandboxCheck, factory: Factory, config: SandboxConfig | None = None,
                      timeout: float = 180.0) -> None:
    """Run one check; under pytest a CheckSkipped becomes a skip with its reason."""
    cfg = config or SandboxConfig()

    async def main() -> None:
        with anyio.fail_after(timeout):
            await check.fn(factory, cfg)

    try:
        anyio.run(main)
    except CheckSkipped as e:
        import pytest

        pytest.skip(str(e))


def self_check(factory: Factory, config: SandboxConfig | None = None) -> dict[str, str]:
    """Every check against `factory`: name -> 'ok', 'skipped: why' or 'failed: what'."""
    cfg = config or SandboxConfig()
    results = {}
    for check in SANDBOX_CHECKS:
        async def main(check: SandboxCheck = check) -> None:
            with anyio.fail_after(180):
                await check.fn(factory, cfg)

        try:
            anyio.run(main)
            results[check.name] = "ok"
        except CheckSkipped as e:
            results[check.name] = f"skipped: {e}"
        except BaseException as e:  # report every failure, go on
            results[check.name] = f"failed: {type(e).__name__}: {e}"
    return results
