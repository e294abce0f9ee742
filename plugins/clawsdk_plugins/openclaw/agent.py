"""The `openclaw` agent: the real OpenClaw CLI works the task inside the sandbox, its model calls recorded.

As ClawGym collected its trajectories: OpenClaw with the workspace at /root/.openclaw/workspace
(the isolating sandboxes mount it there), its model provider pointed at a recording proxy
(clawsdk.mcp.proxy) in front of the real upstream. Per rollout:

1. the proxy starts with a token for this rollout; under a sandbox without network (bwrap) it
   listens on a unix socket in the sandbox's home folder, and a small bridge (bridge.mjs) started
   in the same command forwards 127.0.0.1:BRIDGE_PORT inside the sandbox's own network namespace
   to it, so the sandbox reaches the proxy and nothing else;
2. OpenClaw's config (openclaw.json: the provider, the task's tools, tool search off) goes in the
   sandbox's home, and one `openclaw agent exec --config ... --cwd WORKSPACE --model clawsdk/MODEL
   --json --message-file -` reads the instruction from stdin;
3. its tool calls are recorded as tool_call/tool_result events as they happen (events.py);
4. files OpenClaw writes for itself (AGENTS.md, SOUL.md, .openclaw/...) that were not in the
   task's workspace are removed before the workspace is scored.

The task's time limit counts OpenClaw's work: its boot (10-80 s for one on a busy 2-core machine,
before its first model request) is allowed on top, up to `boot_timeout_s`; failing or not booting
in that time is an unscored sandbox_error, since the model has had no turn yet.

    clawsdk openclaw install
    clawsdk run examples/tasks/access-log-report --agent openclaw --model qwen2.5-7b-instruct \\
        --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from clawsdk.errors import AgentTimeout, SandboxError
from clawsdk.runtime.agent import Agent, AgentContext

from clawsdk_plugins.agent_harness import raise_for_ending
from clawsdk_plugins.openclaw.config import PROVIDER, openclaw_config, unsupported_servers
from clawsdk_plugins.openclaw.events import ToolEventRecorder
from clawsdk_plugins.openclaw.install import Install, find_install, missing_message

TAIL = 4000
BRIDGE_PORT = 18789  # inside the sandbox's own network namespace, so never taken by another rollout
STATE = ".clawsdk-openclaw"  # in the sandbox's home: config, bridge, proxy socket
BRIDGE = Path(__file__).with_name("bridge.mjs")
#: what OpenClaw may write into its workspace for itself (bootstrap files, its state folder)
OWN_FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md",
             ".openclaw", ".clawhub", ".pi")


def _refusal(sandbox: str) -> str:
    """Why OpenClaw cannot run on `sandbox`: said before the run (preflight) and by a rollout that gets it."""
    return (f"the openclaw agent runs under --sandbox bwrap or local, not {sandbox!r}: it needs the install and "
            "the proxy's socket bound in")


class OpenClawAgent(Agent):
    name = "openclaw"

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 home: str | None = None, boot_timeout_s: float = 240.0, thinking: str = "off",
                 context_window: int = 128000, max_tokens: int = 8192, mem_mb: int = 32768,
                 nproc: int = 4096):
        upstream = base_url or os.environ.get("CLAWSDK_OPENAI_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        if not upstream:
            raise ValueError("the openclaw agent needs the upstream model server: --base-url URL (or OPENAI_BASE_URL)")
        if not model:
            raise ValueError("the openclaw agent needs --model NAME (the model the upstream serves)")
        found = find_install(home)
        if found is None:
            raise ValueError(missing_message(home))
        self.install: Install = found
        self.upstream = upstream.rstrip("/")
        self.model = model.split("/", 1)[1] if model.startswith(PROVIDER + "/") else model
        self.upstream_key = os.environ.get(api_key_env)
        self.thinking = thinking
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.mem_mb = mem_mb
        self.nproc = nproc
        self.boot_timeout_s = boot_timeout_s
        #: read by the rollout: its time limit gets this much on top, for OpenClaw's boot (and the
        #: margin lets this agent's own deadlines, which record what happened, come first)
        self.startup_allowance_s = boot_timeout_s + 30

    def preflight(self, tasks: Any, sandbox: str) -> None:
        """Refused once before the run, not as a sandbox_error in every rollout: a sandbox OpenClaw cannot run
        in (the rollout checks the rest, `_check_sandbox`, on the sandbox it gets)."""
        from clawsdk.sandbox.capabilities import backend_capabilities

        caps = backend_capabilities(sandbox)
        if (caps.network_isolated or caps.fs_isolated) and sandbox != "bwrap":
            raise ValueError(_refusal(sandbox))

    async def run(self, ctx: AgentContext) -> None:
        from clawsdk.proxy import ModelProxy, serving

        sandbox = ctx.sandbox
        host_home = getattr(sandbox, "home", None)
        if sandbox is None or host_home is None:
            raise SandboxError("the openclaw agent needs a sandbox with a home folder on this host (local, bwrap)")
        bridged = self._check_sandbox(sandbox)
        state = Path(host_home) / STATE
        state.mkdir(exist_ok=True)
        before = await self._listing(sandbox)
        skipped = unsupported_servers(ctx.task)
        if skipped:
            await ctx.recorder.record("note", {"openclaw": f"tool servers without OpenClaw tools, not offered: "
                                                           f"{', '.join(skipped)}"})
        events = ToolEventRecorder(ctx.recorder)
        proxy = ModelProxy(self.upstream, self.upstream_key)
        token = proxy.register(events)  # type: ignore[arg-type] - records like a Recorder
        limit = ctx.task.limits.timeout_s
        sock = state / "proxy.sock"
        sock.unlink(missing_ok=True)
        started = time.monotonic()
        async with serving(proxy, **({"uds": str(sock)} if bridged else {})) as url:
            if bridged:
                sock.chmod(0o666)  # the sandbox's uid connects; the token still guards every call
                base = f"http://127.0.0.1:{BRIDGE_PORT}/v1"
            else:
                base = url + "/v1"
            self._write_state(sandbox, state, openclaw_config(
                ctx.task, base_url=base, token=token, model=self.model, context_window=self.context_window,
                max_tokens=self.max_tokens, timeout_s=limit))
            command = self._command(sandbox, bridged, limit)
            with self._isolation(sandbox, bridged):
                result, stopped = await self._exec(sandbox, command, ctx.instruction, events, limit)
        await events.flush()
        boot_s = (events.first_request_at - started) if events.first_request_at else None
        envelope = _envelope(result.stdout)
        await ctx.recorder.record("sandbox_exec", {
            "command": command, "harness": "openclaw agent exec", "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "stopped": stopped,
            "stdout": result.stdout[-TAIL:], "stderr": result.stderr[-TAIL:], "model_calls": proxy.n_requests,
            "boot_s": boot_s, "openclaw": {k: envelope.get(k) for k in ("status", "final", "usage", "toolSummary",
                                                                         "assistantTurns", "error") if k in envelope}},
            duration_ms=result.duration_s * 1000)
        removed = await self._clean(sandbox, before)
        if removed:
            await ctx.recorder.record("note", {"openclaw_cleaned": removed})
        if stopped == "work" or envelope.get("status") == "timeout":
            raise AgentTimeout(f"OpenClaw did not finish within {limit:g} s of work")
        # before its first model call the model has had no turn: OpenClaw's own failure is not scored
        if stopped == "boot":
            raise SandboxError(f"OpenClaw made no model call within {self.boot_timeout_s:g} s of starting (its boot; "
                               "on a busy machine raise --agent-opt boot_timeout_s=... or lower --concurrency)")
        if events.first_request_at is None and result.exit_code != 0:
            raise SandboxError(f"OpenClaw failed before its first model call (exit {result.exit_code}): "
                               f"{_why(envelope, result.stderr)}")
        raise_for_ending(result, proxy, what="OpenClaw", limit=limit + self.boot_timeout_s, upstream=proxy.shown,
                         why=_why(envelope, result.stderr))

    # ---- the sandbox side --------------------------------------------------------------------

    def _check_sandbox(self, sandbox: Any) -> bool:
        """Whether OpenClaw needs the bridge to reach the proxy; a SandboxError where it cannot run at all."""
        caps = sandbox.capabilities
        if not caps.network_isolated and not caps.fs_isolated:  # local: the host's loopback and files
            return False
        from clawsdk.sandbox.limits import IsolationOptions

        opts = getattr(sandbox, "opts", None)
        if sandbox.name != "bwrap" or not isinstance(opts, IsolationOptions):
            raise SandboxError(_refusal(sandbox.name))
        prefix = str(self.install.home)
        inner_home = opts.home.rstrip("/")
        if prefix == inner_home or prefix.startswith(inner_home + "/"):
            raise SandboxError(f"the OpenClaw install {prefix} lies under {inner_home}, which is the sandbox's own "
                               "home inside it: install elsewhere (CLAWSDK_OPENCLAW_HOME)")
        from clawsdk_plugins.sandbox_bwrap import _reachable

        if getattr(sandbox, "host_uid", None) is not None and not _reachable(self.install.home):
            raise SandboxError(f"the sandbox's uid cannot reach the OpenClaw install {prefix}: every folder above it "
                               "must be passable by others (chmod o+x), or install elsewhere (CLAWSDK_OPENCLAW_HOME)")
        return True

    @contextlib.contextmanager
    def _isolation(self, sandbox: Any, bridged: bool) -> Iterator[None]:
        """For OpenClaw's exec under bwrap: the install bound in read-only, room for V8 and for threads.

        V8 reserves far more address space than it uses (each of OpenClaw's worker threads about 1 GB),
        so the sandbox's per-process address-space limit is raised to `mem_mb` for this one exec; and
        the process limit, which counts threads of the sandboxes' shared host uid, to `nproc` (one
        OpenClaw runs about 30 threads: eight at once passed the default 256 and hung in boot).
        """
        if not bridged:
            yield
            return
        opts = sandbox.opts
        saved = (list(opts.ro_binds), opts.mem_mb, opts.nproc)
        opts.ro_binds = [*opts.ro_binds, str(self.install.home)]
        if opts.mem_mb:
            opts.mem_mb = max(opts.mem_mb, self.mem_mb)
        if opts.nproc:
            opts.nproc = max(opts.nproc, self.nproc)
        try:
            yield
        finally:
            opts.ro_binds, opts.mem_mb, opts.nproc = saved

    def _write_state(self, sandbox: Any, state: Path, config: dict[str, Any]) -> None:
        (state / "openclaw.json").write_text(json.dumps(config, indent=1))
        shutil.copyfile(BRIDGE, state / "bridge.mjs")
        owner = getattr(sandbox, "file_owner", None)
        for p in (state, state / "openclaw.json", state / "bridge.mjs"):
            if owner is not None:
                os.lchown(p, owner, owner)
        (state / "openclaw.json").chmod(0o600)  # it holds the proxy token

    def _command(self, sandbox: Any, bridged: bool, limit: float) -> str:
        node, entry = shlex.quote(str(self.install.node)), shlex.quote(str(self.install.entry))
        cfg = f'"$HOME"/{STATE}/openclaw.json'
        run = (f"{node} {entry} agent exec --config {cfg} --cwd {shlex.quote(sandbox.workspace_path)} "
               f"--model {PROVIDER}/{shlex.quote(self.model)} --json --message-file - --thinking "
               f"{shlex.quote(self.thinking)} --timeout {int(limit + self.boot_timeout_s)}")
        if bridged:
            run = f'{node} "$HOME"/{STATE}/bridge.mjs "$HOME"/{STATE}/proxy.sock {BRIDGE_PORT} -- {run}'
        return "exec " + run

    async def _exec(self, sandbox: Any, command: str, instruction: str, events: ToolEventRecorder,
                    limit: float) -> tuple[Any, str | None]:
        """Run OpenClaw: stopped if its first model call takes over `boot_timeout_s`, or `limit` s after it.

        Returns (result, "boot" or "work" when it was stopped for time, else None).
        """
        env = {"OPENCLAW_NO_AUTO_UPDATE": "1", "NO_COLOR": "1", "FORCE_COLOR": "0"}
        result: list[Any] = []
        stopped: str | None = None
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            async def work() -> None:
                result.append(await sandbox.exec(command, timeout=limit + self.boot_timeout_s + 10, env=env,
                                                 stdin=instruction.encode()))
                tg.cancel_scope.cancel()

            tg.start_soon(work)
            while events.first_request_at is None and time.monotonic() - started < self.boot_timeout_s:
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
        """Remove OpenClaw's own files that it added to the workspace; returns what went."""
        now = await self._listing(sandbox)
        gone = sorted(p for p in now - before if p.split("/", 1)[0] in OWN_FILES and p.split("/", 1)[0] not in before)
        tops = sorted({p.split("/", 1)[0] for p in gone})
        if tops:
            args = " ".join(shlex.quote(t) for t in tops)
            await sandbox.exec(f"rm -rf -- {args}", timeout=60)
        return tops


def _envelope(stdout: str) -> dict[str, Any]:
    """OpenClaw's --json result (the last JSON object on stdout), or {}."""
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


def _why(envelope: dict[str, Any], stderr: str) -> str:
    err = envelope.get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])[:500]
    return stderr.strip()[-500:]
