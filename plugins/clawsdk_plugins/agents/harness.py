"""The `harness` agent: a black-box agent CLI run inside the sandbox, its model calls recorded through the proxy.

As ClawGym did with OpenClaw: the CLI works the task with its own tools in the workspace; its
model provider points at a recording proxy (clawsdk.mcp.proxy) in front of the real upstream,
so every model request and response lands in the rollout's events. The workspace it leaves is
scored like any agent's.

The command runs with bash in the workspace and gets:

    CLAWSDK_INSTRUCTION   the task's instruction (also on stdin)
    OPENAI_BASE_URL / OPENAI_API_BASE   the proxy, e.g. http://127.0.0.1:PORT/v1
    OPENAI_API_KEY        the proxy token for this rollout
    OPENAI_MODEL / CLAWSDK_MODEL        the model name to ask for

    clawsdk run TASKS --agent harness --agent-opt command='my-agent --task "$CLAWSDK_INSTRUCTION"' \\
        --base-url http://127.0.0.1:8000/v1 --model qwen2.5-7b --sandbox local

The proxy listens on the host's loopback, so the sandbox must share the host's network (`local`);
a network-isolating sandbox is refused before the command starts, as an unscored sandbox_error.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from clawsdk.errors import AgentError, ModelError, RolloutError, SandboxError
from clawsdk.hookspecs import hookimpl
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.store.events import SandboxExec

TAIL = 4000


class HarnessAgent(Agent):
    name = "harness"

    def __init__(self, command: str, base_url: str | None = None, model: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", env: dict[str, str] | None = None,
                 timeout_s: float | None = None, proxy_host: str = "127.0.0.1", check_url: bool = True):
        if not command or not command.strip():
            raise ValueError("the harness agent needs command=...: the agent CLI to run in the sandbox")
        upstream = base_url or os.environ.get("CLAWSDK_OPENAI_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        if not upstream:
            raise ValueError("the harness agent needs the upstream model server: --base-url URL (or OPENAI_BASE_URL)")
        self.command = command
        self.upstream = upstream.rstrip("/")
        self.model = model
        self.upstream_key = os.environ.get(api_key_env)
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.proxy_host = proxy_host
        self.check_url = check_url not in (False, "false", "0", 0)

    async def preflight(self, tasks: Any, sandbox: str) -> None:
        """The upstream is asked once before the run: a wrong --base-url is one line, not every rollout's
        model_error (`check_url=false` for a command that never calls the model)."""
        if self.check_url:
            from clawsdk.proxy import check_base_url

            await check_base_url(self.upstream, self.upstream_key)

    async def run(self, ctx: AgentContext) -> None:
        from clawsdk.proxy import ModelProxy, serving

        # Whatever stops the command from starting is the setup's failure, unscored: never the agent's zero.
        sandbox = ctx.sandbox
        if sandbox is None:
            raise SandboxError("the harness agent needs the rollout's sandbox (AgentContext.sandbox)")
        if sandbox.capabilities.network_isolated and self.proxy_host in ("127.0.0.1", "localhost"):
            raise SandboxError(f"sandbox {sandbox.name!r} isolates the network, so a CLI inside it cannot reach the "
                               "proxy on this host's loopback; run harness rollouts with --sandbox local")
        proxy = ModelProxy(self.upstream, self.upstream_key)
        token = proxy.register(ctx.recorder)
        async with contextlib.AsyncExitStack() as stack:
            try:
                url = await stack.enter_async_context(serving(proxy, self.proxy_host))
            except Exception as e:
                raise SandboxError(f"the harness could not start its model proxy: {type(e).__name__}: {e}") from e
            base = url + "/v1"
            env = {"CLAWSDK_INSTRUCTION": ctx.instruction, "OPENAI_BASE_URL": base, "OPENAI_API_BASE": base,
                   "OPENAI_API_KEY": token, **({"OPENAI_MODEL": self.model, "CLAWSDK_MODEL": self.model}
                                               if self.model else {}), **self.env}
            limit = self.timeout_s or ctx.task.limits.timeout_s
            try:
                result = await sandbox.exec(self.command, timeout=limit, env=env, stdin=ctx.instruction.encode())
            except RolloutError:
                raise
            except Exception as e:
                raise SandboxError(f"the sandbox could not run the harness command: {type(e).__name__}: {e}") from e
        # `command` as every sandbox_exec event has it (`clawsdk show`, the TUI); `harness` marks the step
        await ctx.recorder.record(SandboxExec.of(self.command, result, harness=self.command, tail=TAIL,
                                                 model_calls=proxy.n_requests))
        raise_for_ending(result, proxy, what="the harness command", limit=limit, upstream=proxy.shown,
                         why=result.stderr.strip()[-500:])


def raise_for_ending(result: Any, proxy: Any, *, what: str, limit: float, upstream: str, why: str) -> None:
    """How a black-box agent's command ended, as the rollout counts it: past its time or a non-zero exit is the
    agent's (scored); a non-zero exit right after the model server failed its last call is the model's
    (unscored). Only the last: one glitch the agent got past does not make its own later crash unscored."""
    if result.timed_out:
        raise AgentError(f"{what} did not finish within {limit:g} s")
    if result.exit_code != 0 and proxy.last_failed:
        raise ModelError(f"{what} failed after the model server {upstream} failed its last call "
                         f"({proxy.n_upstream_errors} failed in all): {why}")
    if result.exit_code != 0:
        raise AgentError(f"{what} exited with {result.exit_code}: {why}")


def _harness(**options: Any) -> HarnessAgent:
    env = options.pop("env", None)
    if isinstance(env, str):  # --agent-opt env=A=1,B=2
        env = dict(pair.split("=", 1) for pair in env.split(",") if "=" in pair)
    return HarnessAgent(env=env, **options)


@hookimpl
def register_agents(register):
    register("harness", _harness)
