"""The shared base of the CLI agents (`openclaw`, `claude-code`, `codex`): a real agent CLI, installed from npm,
works the task inside the rollout's sandbox with its own tools, its model calls recorded through the proxy.

Per rollout:

1. the recording proxy (clawsdk.proxy) starts with a token of this rollout, in front of the upstream, in the
   protocol the CLI speaks. Under an isolating sandbox (bwrap, docker: no network) it listens on a unix socket
   in the sandbox's home folder, and a small bridge (bridge.mjs, on the installed Node) started in the same
   command forwards 127.0.0.1:BRIDGE_PORT inside the sandbox's own network namespace to it: the sandbox
   reaches the proxy and nothing else;
2. the CLI's config files go in the sandbox's home (`config_files`), and one command runs it one-shot in the
   workspace (`command`), the instruction on stdin, its telemetry and update checks off (`environment`);
3. its tool calls are recorded as tool_call/tool_result events as they happen (events.py);
4. files the CLI writes for itself (`own_files`) that were not in the task's workspace are removed before the
   workspace is scored.

The task's time limit counts the CLI's work: its start (before its first model request) is allowed on top,
up to `boot_timeout_s`. Everything before the first model call is unscored (`sandbox_error`): the model has
had no turn. The install prefix is bound read-only into the sandbox at the same path (`sandbox_options`).

A new CLI agent is a subclass with a `Package` (what npm brings), its config files, its command and its own
files; docs/external-agents.md ("Adding a CLI agent") shows one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from clawsdk_plugins.agents.cli_agent.events import ERROR_PREFIXES, ToolEventRecorder
from clawsdk_plugins.agents.cli_agent.install import Install, Package, find_install
from clawsdk_plugins.agents.harness import raise_for_ending

from clawsdk.errors import AgentTimeout, SandboxError
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.store.events import Note, SandboxExec

if TYPE_CHECKING:
    from clawsdk.tasks.model import Task

TAIL = 4000
BRIDGE_PORT = 18789  # inside the sandbox's own network namespace, so never taken by another rollout
BRIDGE = Path(__file__).with_name("bridge.mjs")
#: the sandboxes a CLI agent runs in: local (no isolation), and the two that bind its install in
SANDBOXES = ("local", "bwrap", "docker")


class CliAgent(Agent):
    """A black-box agent CLI installed from npm, run one-shot in the sandbox against a recording proxy."""

    package: Package
    model: str  # __init__ refuses none
    #: the CLI's name in messages ("Claude Code")
    who = "the agent"
    #: workspace entries the CLI writes for itself, removed before scoring unless the task's workspace had them
    own_files: tuple[str, ...] = ()
    #: the proxy path prefix the CLI's base URL ends in ("/v1" for OpenAI clients; "" for Anthropic's, which add it)
    base_path = "/v1"

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 home: str | None = None, boot_timeout_s: float = 240.0, mem_mb: int = 32768, nproc: int = 4096,
                 token_ids: bool = False, stream: bool | None = None, check_url: bool = True):
        upstream = base_url or os.environ.get("CLAWSDK_OPENAI_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        if not upstream:
            raise ValueError(f"the {self.name} agent needs the upstream model server: --base-url URL (or "
                             "OPENAI_BASE_URL)")
        if not model:
            raise ValueError(f"the {self.name} agent needs --model NAME (the model the upstream serves)")
        found = find_install(self.package, home)
        if found is None:
            raise ValueError(self.package.missing(home))
        self.install: Install = found
        self.upstream = upstream.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.upstream_key = os.environ.get(api_key_env)
        self.mem_mb = mem_mb
        self.nproc = nproc
        self.token_ids = token_ids in (True, "true", "1", 1)
        self.check_url = check_url not in (False, "false", "0", 0)
        #: None: the upstream streams when the CLI asks it to; False: whole answers, streamed to the CLI by the proxy
        self.stream = None if stream in (None, "", "auto") else stream not in (False, "false", "0", 0)
        self.boot_timeout_s = boot_timeout_s
        #: read by the rollout: its time limit gets this much on top, for the CLI's start (and the margin lets
        #: this agent's own deadlines, which record what happened, come first)
        self.startup_allowance_s = boot_timeout_s + 30

    # ---- what a CLI agent says ---------------------------------------------------------------

    def config_files(self, task: Task, *, base_url: str, token: str, state: str, limit: float) -> dict[str, str]:
        """Files the CLI reads, by path relative to the state folder (`state`: that folder as the sandbox sees
        it). They hold the proxy token: written readable by the sandbox's user only."""
        return {}

    def command(self, task: Task, *, workspace: str, state: str, limit: float) -> list[str]:
        """The CLI's arguments after its own command; the instruction comes on stdin."""
        raise NotImplementedError

    def environment(self, *, base_url: str, token: str, state: str) -> dict[str, str]:
        """The CLI's environment: the proxy, its key, and its telemetry and update checks off."""
        return {}

    def tool_failed(self, text: str) -> bool:
        """Whether a tool result the protocol carries no error flag for reads as a failure (OpenClaw's text)."""
        return text.strip().lower().startswith(ERROR_PREFIXES)

    def outcome(self, stdout: str) -> dict[str, Any]:
        """What the CLI said about its run (its JSON result), for the sandbox_exec event; {} if nothing."""
        return last_json(stdout)

    def gave_up(self, outcome: dict[str, Any]) -> bool:
        """Whether the CLI says it stopped for time (its own timeout)."""
        return False

    def why(self, outcome: dict[str, Any], stderr: str) -> str:
        return stderr.strip()[-500:]

    # ---- the run ------------------------------------------------------------------------------

    async def preflight(self, tasks: Sequence[Task], sandbox: str) -> None:
        """Refused once before the run, not as a sandbox_error in every rollout: a sandbox the CLI cannot run in,
        and an upstream that does not answer (the rollout checks the rest on the sandbox it gets)."""
        if sandbox not in SANDBOXES:
            raise ValueError(self._refusal(sandbox))
        if self.check_url:
            from clawsdk.proxy import check_base_url

            await check_base_url(self.upstream, self.upstream_key)

    def sandbox_options(self, sandbox: str) -> dict[str, Any]:
        """Options the run's sandboxes get: the install bound in read-only (docker mounts it when the container is
        made, so it cannot wait for the exec)."""
        return {"ro_binds": [str(self.install.home)]} if sandbox in ("bwrap", "docker") else {}

    def _refusal(self, sandbox: str) -> str:
        return (f"the {self.name} agent runs under --sandbox {', '.join(SANDBOXES)}, not {sandbox!r}: it needs the "
                "install and the proxy's socket bound in")

    async def run(self, ctx: AgentContext) -> None:
        from clawsdk.proxy import ModelProxy, serving

        sandbox = ctx.sandbox
        host_home = getattr(sandbox, "home", None)
        if sandbox is None or host_home is None:
            raise SandboxError(f"the {self.name} agent needs a sandbox with a home folder on this host "
                               f"({', '.join(SANDBOXES)})")
        bridged = self._check_sandbox(sandbox)
        folder = f".clawsdk-{self.name}"
        state_host = Path(host_home) / folder
        state = f"{sandbox.base_env()['HOME'].rstrip('/')}/{folder}"  # type: ignore[attr-defined]  # a home: a HostDirSandbox
        state_host.mkdir(exist_ok=True)
        before = await self._listing(sandbox)
        events = ToolEventRecorder(ctx.recorder, who=self.who, failed=self.tool_failed)
        proxy = ModelProxy(self.upstream, self.upstream_key, model=self.model, token_ids=self.token_ids,
                           upstream_stream=self.stream)
        token = proxy.register(events)  # type: ignore[arg-type]  # records like a Recorder
        limit = ctx.task.limits.timeout_s
        sock = state_host / "proxy.sock"
        sock.unlink(missing_ok=True)
        started = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            try:
                url = await stack.enter_async_context(serving(proxy, uds=str(sock) if bridged else None))
            except Exception as e:  # the setup's failure, unscored: never the agent's zero
                raise SandboxError(f"the {self.name} agent could not start its model proxy: {type(e).__name__}: "
                                   f"{e}") from e
            if bridged:
                sock.chmod(0o666)  # the sandbox's uid connects; the token still guards every call
                url = f"http://127.0.0.1:{BRIDGE_PORT}"
            base = url + self.base_path
            self._write_state(sandbox, state_host, self.config_files(ctx.task, base_url=base, token=token,
                                                                     state=state, limit=limit), bridged)
            command = self._command(ctx.task, sandbox, bridged, state, limit)
            env = {"NO_COLOR": "1", "FORCE_COLOR": "0", **self.environment(base_url=base, token=token, state=state)}
            with self._isolation(sandbox, bridged):
                result, stopped = await self._exec(sandbox, command, env, ctx.instruction, events, limit)
        await events.flush()
        boot_s = (events.first_request_at - started) if events.first_request_at else None
        outcome = self.outcome(result.stdout)
        await ctx.recorder.record(SandboxExec.of(command, result, harness=self.name, tail=TAIL, stopped=stopped,
                                                 model_calls=proxy.n_requests, boot_s=boot_s, outcome=outcome))
        removed = await self._clean(sandbox, before)
        if removed:
            await ctx.recorder.record(Note(extra={"harness": self.name, "cleaned": removed}))
        if stopped == "work" or self.gave_up(outcome):
            raise AgentTimeout(f"{self.who} did not finish within {limit:g} s of work")
        # before its first model call the model has had no turn: the CLI's own failure is not scored
        if stopped == "boot":
            raise SandboxError(f"{self.who} made no model call within {self.boot_timeout_s:g} s of starting (its "
                               "start; on a busy machine raise --agent-opt boot_timeout_s=... or lower --concurrency)")
        why = self.why(outcome, result.stderr)
        if events.first_request_at is None and result.exit_code != 0:
            raise SandboxError(f"{self.who} failed before its first model call (exit {result.exit_code}): {why}")
        raise_for_ending(result, proxy, what=self.who, limit=limit + self.boot_timeout_s, upstream=proxy.shown,
                         why=why)

    # ---- the sandbox side --------------------------------------------------------------------

    def _check_sandbox(self, sandbox: Any) -> bool:
        """Whether the CLI needs the bridge to reach the proxy; a SandboxError where it cannot run at all."""
        caps = sandbox.capabilities
        if not caps.network_isolated and not caps.fs_isolated:  # local: the host's loopback and files
            return False
        from clawsdk.sandbox.limits import IsolationOptions

        opts = getattr(sandbox, "opts", None)
        if sandbox.name not in SANDBOXES or not isinstance(opts, IsolationOptions):
            raise SandboxError(self._refusal(sandbox.name))
        prefix = str(self.install.home)
        if prefix not in opts.ro_binds:
            raise SandboxError(f"the {self.name} install {prefix} is not bound into the sandbox: run it with "
                               f"clawsdk run (which binds it), or add it to the sandbox's ro_binds")
        inner_home = opts.home.rstrip("/")
        if prefix == inner_home or prefix.startswith(inner_home + "/"):
            raise SandboxError(f"the {self.name} install {prefix} lies under {inner_home}, which is the sandbox's "
                               f"own home inside it: install elsewhere ({self.package.home_env})")
        from clawsdk_plugins.sandboxes.bwrap import _reachable

        if getattr(sandbox, "file_owner", None) is not None and not _reachable(self.install.home):
            raise SandboxError(f"the sandbox's uid cannot reach the {self.name} install {prefix}: every folder above "
                               f"it must be passable by others (chmod o+x), or install elsewhere "
                               f"({self.package.home_env})")
        return True

    @contextlib.contextmanager
    def _isolation(self, sandbox: Any, bridged: bool) -> Iterator[None]:
        """For the CLI's exec: room for its runtime and its threads.

        V8 and JavaScriptCore reserve far more address space than they use (each of OpenClaw's worker threads
        about 1 GB), so the per-process address-space limit is raised to `mem_mb` for this one exec; and under
        bwrap the process limit, which counts the threads of the sandboxes' shared host uid, to `nproc` (one
        OpenClaw runs about 30 threads: eight at once passed the default 256 and hung in boot).
        """
        opts = getattr(sandbox, "opts", None) if bridged else None
        if opts is None:
            yield
            return
        saved = (opts.mem_mb, opts.nproc)
        if opts.mem_mb:
            opts.mem_mb = max(opts.mem_mb, self.mem_mb)
        if opts.nproc and sandbox.name == "bwrap":  # docker's is the container's, set when it was made
            opts.nproc = max(opts.nproc, self.nproc)
        try:
            yield
        finally:
            opts.mem_mb, opts.nproc = saved

    def _write_state(self, sandbox: Any, state: Path, files: dict[str, str], bridged: bool) -> None:
        """The config files, and the bridge where it is needed, owned by the sandbox's user."""
        owner = getattr(sandbox, "file_owner", None)
        written = [state]
        for rel, text in files.items():
            path = state / rel
            for folder in reversed(path.relative_to(state).parents[:-1]):
                (state / folder).mkdir(exist_ok=True)
                written.append(state / folder)
            path.write_text(text)
            path.chmod(0o600)  # it may hold the proxy token
            written.append(path)
        if bridged:
            shutil.copyfile(BRIDGE, state / "bridge.mjs")
            written.append(state / "bridge.mjs")
        if owner is not None:
            for p in written:
                os.lchown(p, owner, owner)

    def _command(self, task: Task, sandbox: Any, bridged: bool, state: str, limit: float) -> str:
        argv = [*self.install.command, *self.command(task, workspace=sandbox.workspace_path, state=state,
                                                     limit=limit)]
        run = " ".join(shlex.quote(a) for a in argv)
        if bridged:
            node = shlex.quote(str(self.install.node))
            run = f"{node} {shlex.quote(state)}/bridge.mjs {shlex.quote(state)}/proxy.sock {BRIDGE_PORT} -- {run}"
        return "exec " + run

    async def _exec(self, sandbox: Any, command: str, env: dict[str, str], instruction: str,
                    events: ToolEventRecorder, limit: float) -> tuple[Any, str | None]:
        """Run the CLI: stopped if its first model call takes over `boot_timeout_s`, or `limit` s after it.

        Returns (result, "boot" or "work" when it was stopped for time, else None).
        """
        result: list[Any] = []
        stopped: str | None = None
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            async def work() -> None:
                result.append(await sandbox.exec(command, timeout=limit + self.boot_timeout_s + 10, env=env,
                                                 stdin=instruction.encode()))
                tg.cancel_scope.cancel()

            tg.start_soon(work)
            while events.first_request_at is None and time.monotonic() - started < self.boot_timeout_s:  # noqa: ASYNC110 - the proxy stamps it, no event to wait on
                await anyio.sleep(0.2)
            if events.first_request_at is None:
                stopped = "boot"
            else:
                await anyio.sleep(max(0.0, events.first_request_at + limit - time.monotonic()))
                stopped = "work"
            tg.cancel_scope.cancel()
        if result:
            return result[0], None
        from clawsdk.sandbox.base import ExecResult

        # exec was cancelled, so its processes are gone (and its output with them)
        return ExecResult(exit_code=-1, stdout="", stderr="", timed_out=True,
                          duration_s=time.monotonic() - started), stopped

    async def _listing(self, sandbox: Any) -> set[str]:
        return {e.path for e in await sandbox.list(".", recursive=True)}

    async def _clean(self, sandbox: Any, before: set[str]) -> list[str]:
        """Remove the CLI's own files that it added to the workspace; returns what went."""
        now = await self._listing(sandbox)
        tops = sorted({p.split("/", 1)[0] for p in now - before
                       if p.split("/", 1)[0] in self.own_files and p.split("/", 1)[0] not in before})
        if tops:
            args = " ".join(shlex.quote(t) for t in tops)
            await sandbox.exec(f"rm -rf -- {args}", timeout=60)
        return tops


def last_json(stdout: str) -> dict[str, Any]:
    """The last JSON object a CLI printed on stdout (its --json result), or {}."""
    text = stdout.strip()
    start = text.rfind("\n{")
    for chunk in (text, text[start + 1:] if start >= 0 else ""):
        try:
            got = json.loads(chunk)
            if isinstance(got, dict):
                return got
        except json.JSONDecodeError:
            continue
    return {}

