"""The `docker` sandbox: one container per rollout, from the image `clawsdk sandbox build-image` makes.

Files go in and out through bind mounts of the sandbox's host folders, not put_archive /
get_archive: the file tools then cost what they cost on a local folder (no API round trip
per read, no tar per write), keep the same path confinement, and files the verifier writes
are on the host at once. The host side reaches them through descriptors (clawsdk.sandbox.safefs). The
container's own file system is read-only; what a command can
write is the workspace and home (as root, a tmpfs of `disk_mb` on the host), a sized /tmp,
and nothing else, so filling the disk fills only the quota.

Defaults: no network, `cpus` CPUs, `mem_mb` memory, `nproc` processes, files up to
`file_mb`, every capability dropped, no-new-privileges, an init process that reaps. Every
container carries labels naming the process that made it; the first sandbox a process starts
removes the labelled containers (and host folders) whose process is gone.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import anyio.abc
import click

from clawsdk.errors import SandboxError
from clawsdk.hookspecs import hookimpl
from clawsdk.sandbox import safefs, toolruntime
from clawsdk.sandbox.base import Capabilities, ExecResult, ProcessLimits, SandboxConfig, SandboxProcess
from clawsdk.sandbox.egress import FORWARDER, SOCKET_INSIDE
from clawsdk.sandbox.hostroot import owner_alive, owner_tag
from clawsdk.sandbox.isolated import IsolatedHostDirSandbox
from clawsdk.sandbox.process import StderrTail, rlimit_args, serving
from clawsdk.tasks.model import Task
from clawsdk_plugins.sandboxes import docker_pool
from clawsdk_plugins.sandboxes.docker_pool import IO_PATH

log = logging.getLogger(__name__)

LABEL = "org.clawsdk.sandbox"
LABEL_OWNER = "org.clawsdk.owner"
LABEL_HOST = "org.clawsdk.host"
LABEL_ROOT = "org.clawsdk.root"
MIB = 1024 * 1024
#: seconds past a command's timeout before the host stops waiting and kills the sandbox's processes
GRACE_S = 5.0

_client_lock = threading.Lock()
_client: Any = None
_swept_engines: set[str] = set()
#: docker calls block; they get their own thread pool so 64 streaming execs don't starve anyio's
_limiter: anyio.CapacityLimiter | None = None


def client() -> Any:
    """One Docker client per process (it pools its connections), or SandboxError saying what to do."""
    global _client
    with _client_lock:
        if _client is None:
            try:
                import docker
            except ImportError as e:
                raise SandboxError("the docker sandbox needs the docker SDK: pip install 'clawsdk[docker]'") from e
            try:
                c = docker.from_env(timeout=120, max_pool_size=256)
                c.ping()
            except Exception as e:
                raise SandboxError(f"no Docker engine answers ({type(e).__name__}: {e}); start one "
                                   f"(as root: dockerd &) or set DOCKER_HOST") from e
            _client = c
        return _client


def available(image: str | None = None) -> str | None:
    """None if the docker sandbox can run here (engine up, image built), else why not."""
    from clawsdk.sandbox.image import DEFAULT_IMAGE, image_exists

    try:
        c = client()
    except SandboxError as e:
        return str(e)
    name = image or DEFAULT_IMAGE
    if not image_exists(c, name):
        return f"image {name} not found: build it with `clawsdk sandbox build-image`"
    return None


def limiter() -> anyio.CapacityLimiter:
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(256)
    return _limiter


async def blocking(fn, *args, cancellable: bool = False):
    return await anyio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=cancellable,
                                          limiter=limiter())


def sweep_containers(c: Any) -> int:
    """Remove this host's labelled containers whose owning process is gone. Returns how many."""
    removed = 0
    host = socket.gethostname()
    # sparse: no inspect per container, which fails for one another process removes meanwhile
    for ct in c.containers.list(all=True, sparse=True, filters={"label": [LABEL, f"{LABEL_HOST}={host}"]}):
        tag = (ct.attrs.get("Labels") or {}).get(LABEL_OWNER, "")
        if owner_alive(tag):
            continue
        try:
            ct.remove(force=True)
            removed += 1
        except Exception as e:  # already going
            log.debug("sweeping %s: %s", ct.id[:12], e)
    return removed


class DockerSandbox(IsolatedHostDirSandbox):
    """A container with the workspace bind-mounted; commands through `docker exec`."""

    name = "docker"

    def __init__(self, config: SandboxConfig | None = None):
        super().__init__(config)
        self.capabilities = Capabilities(network_isolated=not self.opts.network, fs_isolated=True,
                                         persistent_processes=True, gpu=False)
        if self.privileged:
            self.file_owner = self.opts.uid  # no user-namespace remap: the container's uid is the host's
            self.user = f"{self.opts.uid}:{self.opts.gid}"
            # the process that keeps the container up runs as another uid (root without capabilities), so
            # the agent's `kill -9 -1` stops only its own processes, never the container under it
            self.keeper = "0:0"
        else:  # you cannot give files away: the container runs as you
            self.user = f"{os.getuid()}:{os.getgid()}"
            self.keeper = self.user
        self.container: Any = None
        self.client: Any = None
        #: the mount points' inodes, set once started: only a sandbox that came up whole may go to the pool
        self.pool_marks: dict | None = None
        self.pool_pid = 0  # the host pid of the container's init
        #: (st_dev, st_ino) of the host folder the workspace is mounted on inside HOME, taken before the agent
        #: runs: the container mounts it once, and an agent that moves it can put a folder of its own there
        self.mount_mark: tuple[int, int] | None = None

    def cannot_run(self, task: Task) -> str | None:
        """As any isolating sandbox, and a task with a Dockerfile gets its image built (once per content:
        clawsdk_plugins.sandboxes.docker_image), or the reason it cannot be."""
        env = task.environment
        if env is not None and env.dockerfile:
            from clawsdk_plugins.sandboxes.docker_image import task_image

            try:
                self.client = self.client or client()
                task_image(self.client, task, self.opts.image)
            except SandboxError as e:
                return str(e)
            task = task.model_copy(update={"environment": env.model_copy(update={"dockerfile": None})})
        if self.opts.network and task.network is not None:
            return ("the docker sandbox was given network=true, an open network; the task sets a network "
                    "policy, which that would not keep: leave the network option out")
        return super().cannot_run(task)

    async def start(self, task: Task) -> None:
        self.task_paths(task)
        if task.environment is not None and task.environment.dockerfile:
            from clawsdk_plugins.sandboxes.docker_image import task_image

            await self.preflight()
            self.opts.image = await blocking(task_image, self.client, task, self.opts.image)
        await self.preflight()
        if not (docker_pool.enabled(self) and await blocking(docker_pool.adopt, self, task)):
            await super().start(task)
            if docker_pool.enabled(self):
                await blocking(docker_pool.note_fresh, self)
        self.mount_mark = await blocking(self._mount_mark)

    async def preflight(self) -> None:
        self.client = await blocking(client)

    async def sweep(self, base: Path) -> None:
        key = str(self.client.api.base_url)
        if key in _swept_engines:
            return
        _swept_engines.add(key)
        n = await blocking(sweep_containers, self.client)
        if n:
            log.warning("removed %d docker sandbox container(s) left by a killed process", n)

    def labels(self) -> dict[str, str]:
        return {LABEL: "docker", LABEL_OWNER: owner_tag("docker"), LABEL_HOST: socket.gethostname(),
                LABEL_ROOT: str(self.root)}

    async def setup(self, task: Task) -> None:
        import docker

        assert self.root is not None and self.workspace is not None and self.home is not None
        o = self.opts
        volumes = {
            str(self.workspace): {"bind": o.workspace_path, "mode": "rw"},
            str(self.home): {"bind": o.home, "mode": "rw"},
            str(self.root / "hidden"): {"bind": o.hidden_path, "mode": "ro"},
            str(self.io_dir): {"bind": IO_PATH, "mode": "ro"},
        }
        if self.logs_dir is not None and self.logs_path:
            volumes[str(self.logs_dir)] = {"bind": self.logs_path, "mode": "rw"}
        if self.egress is not None:
            volumes[str(self.egress.path.parent)] = {"bind": str(PurePosixPath(SOCKET_INSIDE).parent), "mode": "rw"}
        # the tool runtime, read-only, for the tools that run inside (Sandbox.spawn): the same for every
        # container of this process, so pooled containers serve any task
        for host_path, inside in toolruntime.current().mounts():
            volumes.setdefault(host_path, {"bind": inside, "mode": "ro"})
        for path in o.ro_binds:  # what the run asked for read-only, at the same path (a CLI agent's install)
            volumes.setdefault(path, {"bind": path, "mode": "ro"})
        files = f",nr_inodes={o.files}" if o.files else ""
        tmpfs = {"/tmp": f"size={o.tmp_mb or 512}m,mode=1777{files}", "/var/tmp": f"size=64m,mode=1777{files}",
                 "/run": "size=16m,mode=755"}
        ulimits = [docker.types.Ulimit(name="core", soft=0, hard=0)]
        if o.file_mb:
            ulimits.append(docker.types.Ulimit(name="fsize", soft=o.file_mb * MIB, hard=o.file_mb * MIB))
        kwargs: dict[str, Any] = dict(
            image=o.image, command=["sleep", "infinity"], detach=True, init=True, user=self.keeper,
            name=f"clawsdk-{self.root.name}-{uuid.uuid4().hex[:4]}", hostname="sandbox", labels=self.labels(),
            network_mode="bridge" if o.network else "none", read_only=True, tmpfs=tmpfs, volumes=volumes,
            cap_drop=["ALL"], security_opt=["no-new-privileges"], ulimits=ulimits,
            working_dir=o.workspace_path, environment={"LANG": "C.UTF-8"},
        )
        if o.mem_mb:
            kwargs.update(mem_limit=f"{o.mem_mb}m", memswap_limit=f"{o.mem_mb}m")
        if o.cpus:
            kwargs["nano_cpus"] = int(o.cpus * 1e9)
        if o.nproc:
            kwargs["pids_limit"] = o.nproc

        def run() -> None:
            try:
                # set here, in the thread: a cancelled caller must still know the container to remove it
                self.container = self.client.containers.run(**kwargs)
            except docker.errors.ImageNotFound:
                raise SandboxError(f"image {o.image} not found: build it with `clawsdk sandbox build-image`") from None
            except docker.errors.APIError as e:
                # a container may exist even though starting it failed: find it by its unique root label
                found = self.client.containers.list(all=True, sparse=True,
                                                    filters={"label": f"{LABEL_ROOT}={self.root}"})
                self.container = found[0] if found else None
                raise SandboxError(f"docker could not start the sandbox container: {e.explanation or e}") from e

        await blocking(self._make_home_chain)
        await blocking(run)  # not abandoned on cancel: start() waits for it, then close() removes it
        if self.egress is not None:
            await blocking(self._start_forwarder)

    def _start_forwarder(self) -> None:
        """The relay to the egress proxy, in the container's own network namespace, as the keeper's uid: the
        agent's `kill -9 -1` does not stop it (and if it did, the network would only be shut)."""
        api = self.client.api
        eid = api.exec_create(self.container.id, ["python3", "-I", "-c", FORWARDER, SOCKET_INSIDE, "--"],
                              user=self.keeper)["Id"]
        api.exec_start(eid, detach=True)

    def _make_home_chain(self) -> None:
        """The folders down to a workspace mounted inside HOME (~/.openclaw), the agent's as under bwrap: else
        the engine makes them for the bind mount, as root, and the agent cannot write in ~/.openclaw."""
        assert self.home is not None
        fd = os.open(self.home, safefs.O_DIR)
        try:
            for name in self.home_chain():
                self._remake(fd, name)
                sub = os.open(name, safefs.O_DIR, dir_fd=fd)
                os.close(fd)
                fd = sub
        finally:
            os.close(fd)

    async def teardown(self) -> None:
        if self.container is None:
            return
        if await blocking(docker_pool.give_back, self):  # reset clean: the pool keeps container and folders
            return
        container, self.container = self.container, None

        def remove() -> None:
            import docker

            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass

        try:
            await blocking(remove)
        except Exception:  # the sweep gets it next time
            log.exception("could not remove container %s", container.name)

    async def end_turn(self) -> builtins.list[str]:
        # a process the agent left running (setsid escapes an exec's group) must not change the
        # workspace, or the reward scripts written into it, while it is scored
        if self.container is not None:
            await self._kill_all()
        removed = await super().end_turn()
        return removed + await anyio.to_thread.run_sync(self._unmoved_workspace)

    def _mount_mark(self) -> tuple[int, int] | None:
        """The mount point's identity on the host, reached without following a link; None if there is none."""
        chain = self.home_chain()
        if not chain or self.home is None:
            return None
        fd = os.open(self.home, safefs.O_DIR)
        try:
            for name in chain:
                sub = os.open(name, safefs.O_DIR, dir_fd=fd)
                os.close(fd)
                fd = sub
            st = os.fstat(fd)
            return st.st_dev, st.st_ino
        finally:
            os.close(fd)

    def _unmoved_workspace(self) -> builtins.list[str]:
        """The workspace's mount moves with the folder the agent moved (`mv ~/.openclaw ~/.oc2`), and a folder
        of its own in its place (`mkdir -p ~/.openclaw/workspace`, holding a link to the hidden answer) was
        where the verifier's commands ran. Such a folder is moved aside: the commands then find no workspace
        (exit 126) and the agent scores what it left there, nothing."""
        if self.mount_mark is None:
            return []
        try:
            if self._mount_mark() == self.mount_mark:
                return []
        except OSError:
            pass
        first = self.home_chain()[0]
        assert self.home is not None
        moved = f"clawsdk-moved-{uuid.uuid4().hex[:16]}"
        try:  # within HOME: a rename in one folder needs no rights on the folder moved
            os.rename(self.home / first, self.home / moved)
        except FileNotFoundError:  # nothing in its place
            return []
        except OSError as e:  # the verifier must not run in the agent's folder: no scoring rather than that
            raise SandboxError(f"the workspace's mount point was moved and what is in its place cannot be: {e}") \
                from e
        return [f"~/{first} (the workspace's mount point was moved; now ~/{moved})"]

    # ---- commands --------------------------------------------------------------------------

    async def exec(self, command, *, timeout=60.0, cwd=None, env=None, stdin=None) -> ExecResult:
        if self.container is None or self._closed:
            raise SandboxError("sandbox is not running")
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        workdir = self.inside(self.cwd_of(cwd))
        full_env = self.base_env() | (env or {})
        # `timeout` puts the command in a process group of its own and kills it on time; when the command
        # ends, what it left in that group goes too (as under local and bwrap); prlimit caps each process
        limits = [a for a in self.opts.prlimit_args(timeout) if not a.startswith("--nproc")]
        stdin_file: Path | None = None
        source = "/dev/null"
        if stdin is not None:
            assert self.io_dir is not None
            stdin_file = self.io_dir / f"stdin-{uuid.uuid4().hex[:8]}"
            stdin_file.write_bytes(stdin)
            stdin_file.chmod(0o644)
            source = f"{IO_PATH}/{stdin_file.name}"
        script = (f'exec 3<{source}; timeout -s KILL "$0" "$@" <&3 3<&- & p=$!; wait $p; rc=$?; '
                  f'kill -9 -$p 2>/dev/null; exit $rc')
        wrapped = ["sh", "-c", script, f"{timeout:g}", "prlimit", *limits, "--", *argv]
        limit = self.config.output_limit
        started = time.perf_counter()
        api = self.client.api
        try:
            exec_id = (await blocking(lambda: api.exec_create(
                self.container.id, wrapped, stdout=True, stderr=True, workdir=workdir, environment=full_env,
                user=self.user)))["Id"]
            out, err = bytearray(), bytearray()
            cut = [False]

            def take(buf: bytearray, chunk: bytes | None) -> None:
                if not chunk:
                    return
                room = limit - len(buf)
                if room > 0:
                    buf += chunk[:room]
                if len(chunk) > room:
                    cut[0] = True

            def stream() -> None:
                for o_chunk, e_chunk in api.exec_start(exec_id, stream=True, demux=True):
                    take(out, o_chunk)
                    take(err, e_chunk)

            timed_out = False
            with anyio.move_on_after(timeout + GRACE_S) as scope:
                await blocking(stream, cancellable=True)
            if scope.cancelled_caught:
                # something the command left keeps its output open: stop everything the sandbox user runs
                await self._kill_all()
                timed_out = True
            info = await blocking(api.exec_inspect, exec_id)
        except SandboxError:
            raise
        except Exception as e:  # the engine or the container went away
            if self._closed:
                raise SandboxError("sandbox closed while a command ran") from e
            raise SandboxError(f"docker exec failed: {type(e).__name__}: {e}") from e
        finally:
            if stdin_file is not None:
                stdin_file.unlink(missing_ok=True)
        elapsed = time.perf_counter() - started
        code = info.get("ExitCode")
        code = -9 if code is None else code
        if code == 137 and elapsed >= timeout * 0.99:
            timed_out = True
        return ExecResult.from_output(code, out, err, timed_out=timed_out, duration_s=elapsed, cut=cut[0],
                                      limit=limit, timeout=timeout)

    def spawn(self, argv, *, env=None, limits=None):
        if self.container is None or self._closed:
            raise SandboxError("sandbox is not running")
        return self._spawn(list(argv), env or {}, limits)

    @contextlib.asynccontextmanager
    async def _spawn(self, argv: builtins.list[str], env: dict[str, str], limits: ProcessLimits | None):
        """`docker exec` with stdin attached: the exec's socket carries stdin one way and the engine's framed
        stdout and stderr the other (`DockerProcess`)."""
        rl = [a for a in self.opts.prlimit_args(limits.cpu_s if limits and limits.cpu_s else 86400)
              if not a.startswith("--nproc") and not (limits and limits.memory_mb and a.startswith("--as="))]
        rl += [a for a in rlimit_args(limits) if a.startswith("--as=")]
        full_env = self.base_env() | env
        api = self.client.api

        def start() -> tuple[str, int]:
            exec_id = api.exec_create(self.container.id, ["prlimit", *rl, "--", *argv], stdin=True, stdout=True,
                                      stderr=True, workdir=self.opts.workspace_path, environment=full_env,
                                      user=self.user)["Id"]
            sock = api.exec_start(exec_id, socket=True)
            raw = getattr(sock, "_sock", sock)
            fd = os.dup(raw.fileno())  # ours alone: the SDK's objects may close theirs when collected
            sock.close()
            return exec_id, fd

        try:
            exec_id, fd = await blocking(start)
        except Exception as e:  # the engine or the container went away
            raise SandboxError(f"docker exec failed: {type(e).__name__}: {e}") from e
        stream = await anyio.abc.SocketStream.from_socket(socket.socket(fileno=fd))
        proc = DockerProcess(stream, exec_id, api)
        await proc.note_pid()
        try:
            async with serving(proc, proc.pump):
                yield proc
        finally:
            with anyio.CancelScope(shield=True):
                await proc.kill()
                await stream.aclose()

    async def _kill_all(self) -> None:
        api = self.client.api

        def kill() -> None:
            eid = api.exec_create(self.container.id, ["kill", "-9", "-1"], user=self.user)["Id"]
            api.exec_start(eid)

        try:
            await blocking(kill)
        except Exception:
            log.warning("could not stop the processes of %s", self.root)


class DockerProcess(SandboxProcess):
    """A process started by `docker exec` with stdin attached, spoken to through the exec's socket."""

    def __init__(self, stream: Any, exec_id: str, api: Any):
        self.stream = stream
        self.exec_id = exec_id
        self.api = api
        self.stdin = _SocketStdin(stream)
        send, receive = anyio.create_memory_object_stream[bytes](16)
        self._out_send = send
        self.stdout = _Received(receive)
        self._stderr = StderrTail()
        self._ended = anyio.Event()
        self._code: int | None = None
        self._pid: int | None = None

    @property
    def returncode(self) -> int | None:  # type: ignore[override]  # read-only here: the exec's end sets it
        return self._code

    def stderr_tail(self) -> str:
        return self._stderr.text()

    async def pump(self) -> None:
        """Split the engine's frames (8-byte header: stream, 0, 0, 0, size) into stdout and stderr."""
        buffer = bytearray()
        try:
            async with self._out_send:
                while True:
                    try:
                        buffer += await self.stream.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        return
                    while len(buffer) >= 8:
                        size = int.from_bytes(buffer[4:8], "big")
                        if len(buffer) < 8 + size:
                            break
                        kind, payload = buffer[0], bytes(buffer[8:8 + size])
                        del buffer[:8 + size]
                        if kind == 2:
                            self._stderr.add(payload)
                        elif payload:
                            await self._out_send.send(payload)
        finally:
            await self._settle()

    async def _settle(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                info = await blocking(self.api.exec_inspect, self.exec_id)
                if not info.get("Running"):
                    self._code = info.get("ExitCode")
            except Exception:  # the container is gone
                pass
            self._ended.set()

    async def wait(self) -> int:
        await self._ended.wait()
        return -9 if self._code is None else self._code

    async def note_pid(self) -> None:
        """Its host pid, taken while it runs: its process group keeps that number for as long as anything it
        started lives (a docker exec leads a session and a group of its own)."""
        for _ in range(50):  # the engine says 0 until the process has started
            try:
                info = await blocking(self.api.exec_inspect, self.exec_id)
            except Exception:  # the container is gone
                return
            if info.get("Pid") or not info.get("Running", True):
                self._pid = info.get("Pid") or None
                return
            await anyio.sleep(0.02)

    async def kill(self) -> None:
        """SIGKILL its process group from the host (docker runs it under this host's kernel), also once the
        process itself has ended and what it started holds on."""
        if self._pid:
            for kill in (lambda: os.killpg(self._pid, signal.SIGKILL), lambda: os.kill(self._pid, signal.SIGKILL)):
                with contextlib.suppress(OSError):
                    kill()
            self._code = -int(signal.SIGKILL) if self._code is None else self._code


class _SocketStdin(anyio.abc.ByteSendStream):
    def __init__(self, stream: Any):
        self.stream = stream

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.stream.send_eof()


class _Received(anyio.abc.ByteReceiveStream):
    def __init__(self, receive: Any):
        self._receive = receive

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self._receive.aclose()

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def make_docker(config: SandboxConfig | None = None) -> DockerSandbox:
    return DockerSandbox(config or SandboxConfig())


make_docker.available = available  # type: ignore[attr-defined]  # the factory's availability contract
# `-c auto` starts here and climbs by the start latency it measures: the engine creates containers one after
# another, and 8 at once took 2.5 s each where 2 took 0.6 s (benchmarks/concurrency.py)
make_docker.start_concurrency = lambda: max(2, os.cpu_count() or 2)  # type: ignore[attr-defined]


async def _drain() -> None:
    await docker_pool.drain_async()


make_docker.drain = _drain  # type: ignore[attr-defined]  # called at the end of a run: warm containers go


@hookimpl
def register_sandboxes(register):
    register("docker", make_docker)


# ---- CLI: clawsdk sandbox ... -----------------------------------------------------------------


@click.group("sandbox")
def sandbox_group() -> None:
    """Sandbox backends: check them, build the docker image, sweep leftovers."""


@sandbox_group.command("build-image")
@click.option("--tag", default="clawsdk-sandbox:latest", show_default=True)
@click.option("--suite", default=None, help="Debian suite (default: this host's, else bookworm).")
@click.option("--mirror", default="http://deb.debian.org/debian", show_default=True)
@click.option("--package", "packages", multiple=True, help="Replace the default package list (repeatable).")
@click.option("--add", "extra", multiple=True, help="Add a package to the default list (repeatable).")
@click.option("--rootfs", type=click.Path(exists=True, file_okay=False), default=None,
              help="Import this root file system instead of running debootstrap.")
@click.option("--force", is_flag=True, help="Rebuild even if an image of the same recipe exists.")
def build_image_command(tag, suite, mirror, packages, extra, rootfs, force) -> None:
    """Build the docker sandbox image: debootstrap a Debian root, then docker import. No registry."""
    from clawsdk.sandbox.image import DEFAULT_PACKAGES, build_image

    pkgs = list(packages or DEFAULT_PACKAGES) + list(extra)
    try:
        build_image(tag=tag, suite=suite, packages=pkgs, mirror=mirror, rootfs=rootfs, force=force,
                    say=lambda m: click.echo(m, err=True))
    except SandboxError as e:
        raise click.ClickException(str(e)) from e


@sandbox_group.command("check")
def check_command() -> None:
    """Say which sandbox backends work on this machine, and why not where one does not."""
    from clawsdk.plugins import get_registry
    from clawsdk.sandbox.capabilities import backend_status

    for name in get_registry().names("sandboxes"):
        why, caps = backend_status(name)
        mark = "ok " if why is None else "no "
        detail = ", ".join(k for k, v in vars(caps).items() if v) if caps else ""
        click.echo(f"{mark} {name:8} {why or detail}")


@sandbox_group.command("self-check")
@click.argument("name")
def self_check_command(name: str) -> None:
    """Run the conformance kit (clawsdk.testing) against the sandbox backend NAME."""
    from clawsdk.plugins import get_registry
    from clawsdk.testing import self_check

    results = self_check(get_registry().get("sandboxes", name))
    for check, verdict in results.items():
        click.echo(f"{check:40} {verdict}")
    if any(v.startswith("failed") for v in results.values()):
        raise SystemExit(1)


@sandbox_group.command("sweep")
def sweep_command() -> None:
    """Remove docker containers and sandbox folders (local, bwrap, docker) left by killed clawsdk processes."""
    from clawsdk.sandbox import hostdir
    from clawsdk.sandbox.hostroot import sweep_orphans
    from clawsdk_plugins.sandboxes.bwrap import fallback_base

    base = hostdir.workspace_root()
    n_folders = hostdir.sweep_orphans(base, "local") + sum(sweep_orphans(base, b) for b in ("bwrap", "docker"))
    if fallback_base().is_dir():
        n_folders += sweep_orphans(fallback_base(), "bwrap")
    n_containers = 0
    try:
        n_containers = sweep_containers(client())
    except SandboxError as e:
        click.echo(f"docker: {e}", err=True)
    click.echo(f"removed {n_containers} container(s) and {n_folders} folder(s)")


@hookimpl
def register_commands(register):
    register(sandbox_group)
