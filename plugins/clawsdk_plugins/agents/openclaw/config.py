"""The OpenClaw config of one rollout: its model provider is the rollout's recording proxy, its tools the task's.

OpenClaw works the task with its own tools (read, write, edit, apply_patch, ls, exec, process,
web_*, memory_*), which carry the names of clawsdk's core tool servers. The task's `tools:` say
which of them it gets (core: files and commands; web; memory; openclaw: all three) and its
`tool_policy` filters them with clawsdk's own matcher (clawsdk.tasks.policy), so a task means the same
under OpenClaw as under the built-in agent. Everything else OpenClaw offers (sessions, messaging,
UI, automation, media, secrets...) is denied by group, and tool search is off so the model sees
the tools themselves rather than a search meta tool.
"""

from __future__ import annotations

from typing import Any

from clawsdk.tasks.model import Task
from clawsdk.tasks.policy import tool_allowed

PROVIDER = "clawsdk"

#: OpenClaw's own tools, by the clawsdk tool server whose tools they stand for
SERVER_TOOLS: dict[str, tuple[str, ...]] = {
    "core": ("read", "write", "edit", "apply_patch", "ls", "exec", "process"),
    "web": ("web_fetch", "web_search"),
    "memory": ("memory_search", "memory_get"),
}
SERVER_TOOLS["openclaw"] = tuple(t for tools in SERVER_TOOLS.values() for t in tools)

#: groups and tools that stand for nothing in a task: always denied
ALWAYS_DENIED = ("group:sessions", "group:ui", "group:automation", "group:messaging", "group:nodes",
                 "group:media", "group:agents", "intent", "secrets", "x_search", "code_execution")


def allowed_tools(task: Task) -> list[str]:
    """The OpenClaw tools this task offers, in a stable order."""
    out: list[str] = []
    for server in task.tools:
        for tool in SERVER_TOOLS.get(server, ()):
            if tool not in out and tool_allowed(task.tool_policy, tool, server):
                out.append(tool)
    return out


def unsupported_servers(task: Task) -> list[str]:
    """The task's tool servers OpenClaw has no tools for (skill packs): they are not offered."""
    return [s for s in task.tools if s not in SERVER_TOOLS and s != "workspace-skills"]


def tool_policy(task: Task) -> dict[str, Any]:
    """OpenClaw's `tools` section: the coding profile less every core tool the task does not offer."""
    allowed = set(allowed_tools(task))
    every = {t for tools in SERVER_TOOLS.values() for t in tools}
    deny = [*ALWAYS_DENIED, *sorted(every - allowed)]
    return {"toolSearch": False, "profile": "coding", "deny": deny}


def models_config(*, base_url: str, token: str, model: str, context_window: int = 128000, max_tokens: int = 8192,
                  timeout_s: float = 600.0) -> dict[str, Any]:
    """OpenClaw's `models` section: one OpenAI-compatible provider, PROVIDER, with one model."""
    return {"mode": "replace", "providers": {PROVIDER: {
        "baseUrl": base_url, "apiKey": token, "api": "openai-completions",
        "timeoutSeconds": max(1, int(timeout_s)),
        "models": [{"id": model, "name": model, "reasoning": False, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": context_window, "maxTokens": max_tokens}],
    }}}


def openclaw_config(task: Task, *, base_url: str, token: str, model: str, context_window: int = 128000,
                    max_tokens: int = 8192, timeout_s: float = 600.0) -> dict[str, Any]:
    """The whole config file (`openclaw agent exec --config FILE`) for one rollout."""
    return {
        "models": models_config(base_url=base_url, token=token, model=model, context_window=context_window,
                                max_tokens=max_tokens, timeout_s=timeout_s),
        "tools": tool_policy(task),
        # no update checks, no telemetry: the sandbox has no network and a rollout must not wait on one
        "update": {"checkOnStart": False},
    }


def serve_config(url: str, *, token_env: str = "CLAWSDK_TOKEN") -> dict[str, Any]:
    """A host OpenClaw's config for `clawsdk serve --http` (`clawsdk openclaw config --serve URL`).

    None of OpenClaw's own tools: the server's (`clawsdk__read`, ...) stand for them, so every
    workspace action is recorded and sandboxed; the rest is denied as for the `openclaw` agent.
    """
    return {
        "tools": {"toolSearch": False, "profile": "coding", "deny": [*ALWAYS_DENIED, *SERVER_TOOLS["openclaw"]]},
        "mcp": {"servers": {"clawsdk": {"url": url, "transport": "streamable-http",
                                        "headers": {"Authorization": f"Bearer ${{{token_env}}}"}}}},
        "update": {"checkOnStart": False},
    }
