"""The sandbox contract every backend implements."""

from __future__ import annotations

import abc
import builtins
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clawsdk.errors import FileTooLarge
from clawsdk.plugins import Contract

if TYPE_CHECKING:
    from anyio.abc import ByteReceiveStream, ByteSendStream

    from clawsdk.tasks.model import File, Task

#: Output beyond this many bytes per stream is cut, with a note saying so.
DEFAULT_OUTPUT_LIMIT = 256 * 1024


@dataclass(frozen=True)
class Capabilities:
    """What a backend guarantees; checked against what a task asks for."""

    network_isolated: bool = False
    fs_isolated: bool = False
    persistent_processes: bool = True
    gpu: bool = False


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def from_output(cls, code: int, out: bytes | bytearray, err: bytes | bytearray, *, timed_out: bool,
                    duration_s: float, cut: bool, limit: int, timeout: float) -> ExecResult:
        """The result as every backend reports it: decoded, with notes for a cut output and a timeout (124)."""
        stdout = out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
        if cut:
            stdout += f"\n[output cut at {limit} bytes]"
        if timed_out:
            stderr += f"\n[killed after the {timeout:g} s timeout]"
            code = 124
        return cls(code, stdout, stderr, timed_out, duration_s, cut)


@dataclass
class Entry:
    path: str
    is_dir: bool
    size: int


#: the most the tools and the verifiers read of one file (``Sandbox.read_capped``)
MAX_READ_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ProcessLimits:
    """What the kernel enforces on one process started behind the boundary (`Sandbox.spawn`), on top of
    the sandbox's own limits. 0 leaves a limit to the sandbox."""

    memory_mb: int = 0  # its address space (RLIMIT_AS)
    cpu_s: int = 0  # CPU seconds over its whole life (RLIMIT_CPU)


class SandboxProcess(abc.ABC):
    """A process running behind a sandbox's boundary (`Sandbox.spawn`), with pipes to its stdin and stdout.

    Its stderr is kept, the last few KiB of it, for `stderr_tail`."""

    stdin: ByteSendStream
    stdout: ByteReceiveStream
    #: set once it has exited (a negative number: the signal that ended it)
    returncode: int | None = None

    @abc.abstractmethod
    def stderr_tail(self) -> str:
        """The end of what it wrote to stderr so far."""

    @abc.abstractmethod
    async def wait(self) -> int:
        """Wait for it to exit; its exit code."""

    @abc.abstractmethod
    async def kill(self) -> None:
        """Stop it and what it started, at once."""


@dataclass
class SandboxConfig:
    """Options every backend understands; a backend may read more from `extra`."""

    root: str | None = None  # where workspaces live; a memory-backed folder by default
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    extra: dict = field(default_factory=dict)


#: Added to the environment of every command after the agent's turn (the verifier's). Python runs
#: usercustomize.py and the .pth files of the user site in $HOME/.local at start, and verifiers run
#: Python with the agent's HOME: one file there scored an agent that did nothing 1.0 on every ClawGym
#: task. The price: a package the agent installed with `pip install --user` is not seen by the
#: verifier (an isolating sandbox has no network, so there it cannot install one).
SCORING_ENV = {"PYTHONNOUSERSITE": "1"}

#: Sandbox.end_turn's script: every FIFO, socket and device under the workspace, and every symlink that
#: resolves out of it, is removed, even in a folder the agent made read-only (whose mode is put back), and
#: printed NUL-terminated.
_END_TURN = r"""
W=$(pwd -P)
{
find . -mindepth 1 \( -type p -o -type s -o -type b -o -type c \) -print0 2>/dev/null
if command -v python3 >/dev/null 2>&1; then
  python3 -I -c '
import os, sys
w = sys.argv[1]
for d, dirs, files in os.walk("."):
    for n in dirs + files:
        p = os.path.join(d, n)
        if os.path.islink(p) and not (r := os.path.realpath(p)) == w and not r.startswith(w + "/"):
            sys.stdout.buffer.write(os.fsencode(p) + b"\0")
' "$W" 2>/dev/null
else
  find . -mindepth 1 -type l -print0 2>/dev/null | while IFS= read -r -d '' f; do
    r=$(realpath -m -- "$f" 2>/dev/null); case "$r" in "$W"|"$W"/*) ;; *) printf '%s\0' "$f";; esac
  done
fi
} |
while IFS= read -r -d '' f; do
  if ! rm -f -- "$f" 2>/dev/null; then
    d=$(dirname -- "$f"); m=$(stat -c %a -- "$d")
    chmod u+w -- "$d" 2>/dev/null && rm -f -- "$f" 2>/dev/null; chmod "$m" -- "$d" 2>/dev/null
  fi
  [ -e "$f" ] || [ -L "$f" ] || printf '%s\0' "$f"
done
true
"""


class Sandbox(abc.ABC):
    """An isolated workspace for one rollout.

    Paths are relative to the workspace; a backend refuses paths that leave it.
    Hidden files exist only after `inject_hidden`, outside the workspace.
    """

    name: str = "sandbox"
    capabilities: Capabilities = Capabilities()

    #: The absolute path of the workspace as commands inside the sandbox see it.
    workspace_path: str
    #: Where `inject_hidden` puts hidden files, as commands see it (set once injected).
    hidden_path: str | None = None
    #: Set when the sandbox itself broke (not the command in it); the rollout becomes sandbox_error.
    failure: str | None = None
    #: Set by `end_turn`: what runs from then on is the verifier's, with SCORING_ENV in its environment.
    turn_over: bool = False

    def cannot_run(self, task: Task) -> str | None:
        """Why this backend cannot give `task` what it asks (an image of its own, its paths, its network
        policy), or None. The runner asks once per task, before any rollout: a task refused here is skipped
        with that line and none of its rollouts runs. A backend that enforces more overrides it."""
        env = task.environment
        if env is not None and env.dockerfile:
            return (f"the {self.name} sandbox builds no images, and the task's environment has a Dockerfile: "
                    "run it with --sandbox docker")
        if env is not None and (env.workdir or env.tests_dir or env.logs_dir):
            return (f"the {self.name} sandbox cannot mount the task's workspace, tests or logs at its paths "
                    f"({env.workdir or '-'}, {env.tests_dir or '-'}, {env.logs_dir or '-'}): run it with "
                    "--sandbox bwrap or docker")
        if task.network is not None and "allowlist" in task.network.modes():
            return (f"the {self.name} sandbox cannot enforce a network allowlist "
                    f"({', '.join(task.network.agent.hosts + task.network.verifier.hosts)}); it is refused "
                    "rather than run with an open network")
        return None

    @abc.abstractmethod
    async def start(self, task: Task) -> None:
        """Create the workspace with the task's initial files."""

    @abc.abstractmethod
    async def exec(
        self,
        command: str | list[str],
        *,
        timeout: float = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run a command (a string goes to bash -c) in the workspace; kill its whole tree on timeout."""

    # The file API's error contract (clawsdk.testing checks it; each message names the path):
    # PathEscapeError for a path that leaves the workspace (absolute, `..`, or through a symlink),
    # FileNotFoundError for a missing one, IsADirectoryError when read() is given a folder.

    @abc.abstractmethod
    async def read(self, path: str) -> bytes:
        """The file's bytes; PathEscapeError, FileNotFoundError or IsADirectoryError naming `path`."""

    async def read_capped(self, path: str, max_bytes: int | None = None) -> bytes:
        """`read`, or FileTooLarge for a file over `max_bytes` (default MAX_READ_BYTES): what the tools and
        verifiers read runs in the runner's process, where one agent's 1 GiB file held every rollout's
        memory. This default reads the file first; a backend that can look at its size first should."""
        limit = MAX_READ_BYTES if max_bytes is None else max_bytes
        data = await self.read(path)
        if len(data) > limit:
            raise FileTooLarge(path, len(data), limit)
        return data

    def spawn(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
              limits: ProcessLimits | None = None) -> AbstractAsyncContextManager[SandboxProcess]:
        """Start a long-lived process behind the sandbox's boundary: inside its isolation, as its uid, in the
        workspace, with its limits and `limits` on top; `argv[0]` is looked up on the sandbox's PATH. It sees
        what a command sees, and the tool runtime (`clawsdk.sandbox.toolruntime`) read-only. Leaving the
        context kills it and everything it started. The tools that interpret what the agent wrote run this
        way (clawsdk.mcp.toolhost); a backend that cannot raises NotImplementedError, and such tools then
        fail with a sandbox_error naming the backend."""
        raise NotImplementedError(f"the {self.name} sandbox cannot start a process behind its boundary "
                                  "(Sandbox.spawn), which the tools that read the agent's files need")

    @abc.abstractmethod
    async def write(self, path: str, data: bytes, *, executable: bool = False) -> None:
        """Create or replace the file (and its parent folders); PathEscapeError naming `path`."""

    @abc.abstractmethod
    async def list(self, path: str = ".", *, recursive: bool = False) -> list[Entry]:
        """The folder's entries; PathEscapeError or FileNotFoundError naming `path`."""

    @abc.abstractmethod
    async def inject_hidden(self, files: builtins.list[File]) -> str:
        """Make the hidden verifier files visible (outside the workspace); return where."""

    async def end_turn(self) -> builtins.list[str]:
        """The agent's turn is over: take out of the workspace what no verifier can read.

        A FIFO, socket or device where a verifier reads a deliverable blocks it or makes it fail, and
        an agent that left one would turn its own failure into an unscored rollout. A symlink that
        resolves out of the workspace (as the sandbox's kernel resolves it) could, once the hidden files
        exist, hand a verifier's command the expected output as the agent's own: `out.txt ->
        /clawsdk/hidden/expected.txt` passed `cmp out.txt "$CLAWSDK_HIDDEN/expected.txt"`. They are
        removed (a symlink itself, never its target) and their paths returned, so the verifier scores
        the workspace without them. A backend whose agent processes outlive a command stops them first.
        Commands from then on get SCORING_ENV, so startup files the agent planted in its HOME do not run.
        """
        self.turn_over = True
        r = await self.exec(["bash", "-c", _END_TURN], timeout=60)
        return sorted(p.removeprefix("./") for p in r.stdout.split("\0") if p)

    async def start_scoring(self) -> None:
        """Scoring starts: the agent's code (its turn, and what the verifier's `before_hidden` ran of it) has
        stopped, and what runs from here is the verifier's. A backend that set room aside for scoring in a
        disk quota frees it here: freed earlier, the agent's code a check runs could fill it again, and the
        hidden files could not be written (verifier_error: the agent's doing made unscored)."""

    async def move_aside(self, path: str) -> str | None:
        """Rename what `path` names (a symlink itself, not its target) to a fresh name beside it.

        Returns the new path, or None if nothing was there. The host takes back a path the agent
        must not own with it (hidden files go where the agent may have planted its own).
        """
        import secrets

        new = f"{path.rstrip('/')}.agent-{secrets.token_hex(3)}"
        script = 'if [ -e "$1" ] || [ -L "$1" ]; then mv -T -- "$1" "$2" && echo moved; fi'
        r = await self.exec(["sh", "-c", script, "sh", path, new], timeout=30)
        return new if r.stdout.strip() == "moved" else None

    @abc.abstractmethod
    async def close(self) -> None:
        """Remove everything the sandbox created; safe to call twice and under cancellation."""

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc) -> None:
        import anyio

        with anyio.CancelScope(shield=True):
            await self.close()


class SandboxPlugin(Contract):
    """The sandbox kind: a factory ``(config: SandboxConfig | None = None) -> Sandbox``, registered with
    `register_sandboxes`. It may carry any of these methods; left out, each means what its default does."""

    kind = "sandboxes"

    def available(self) -> str | None:
        """None if the backend can run here, else a one-line reason (`clawsdk sandbox check`, `auto`).
        Left out: available."""
        return self.call("available")

    def warning(self) -> str | None:
        """What choosing this backend exposes, said wherever it is chosen (`clawsdk run`). Left out:
        nothing."""
        return self.call("warning")

    def start_concurrency(self) -> int | None:
        """Where `-c auto` starts (a container engine slows as it creates many at once). Left out: None,
        the controller's own start."""
        return self.call("start_concurrency")

    async def drain(self) -> None:
        """Free what the backend keeps warm between sandboxes; a run awaits it when it ends. Left out:
        nothing to free."""
        drain = self.provided("drain")
        if drain is not None:
            await drain()

