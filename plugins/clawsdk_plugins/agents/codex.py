"""The `codex` agent: OpenAI's Codex CLI (npm `@openai/codex`) works the task in the sandbox, its Responses API
calls recorded through the proxy in front of any chat-completions upstream.

    clawsdk codex install
    clawsdk run examples/tasks --agent codex --model qwen2.5-7b-instruct --base-url http://127.0.0.1:8000/v1

One-shot `codex exec --json` in the workspace with the instruction on stdin, its own sandbox and approvals off
(clawsdk's sandbox is the boundary: Codex's would need namespaces bwrap does not give it), one model provider
(`clawsdk`, wire API `responses`) pointed at the proxy; update checks, analytics, feedback and history off, its
state (CODEX_HOME) in the sandbox's home, outside the workspace. Codex offers its own tools (`exec_command`,
...): the task's tool policy does not reach inside them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from clawsdk.hookspecs import hookimpl
from clawsdk_plugins.agents.cli_agent.base import CliAgent
from clawsdk_plugins.agents.cli_agent.commands import agent_group
from clawsdk_plugins.agents.cli_agent.install import Package

if TYPE_CHECKING:
    from clawsdk.tasks.model import Task

PACKAGE = Package(agent="codex", npm="@openai/codex", version="0.171.0", entry="@openai/codex/bin/codex.js",
                  node_script=True, size="about 630 MB")
KEY_ENV = "CLAWSDK_PROXY_KEY"
#: how Codex's exec tools report a command that failed
EXIT = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def codex_config(*, base_url: str, model: str, context_window: int) -> str:
    """config.toml: one provider (the proxy), and nothing that calls home."""
    top = {"model": model, "model_provider": "clawsdk", "check_for_update_on_startup": False,
           "model_context_window": context_window}
    sections: dict[str, dict[str, Any]] = {
        "model_providers.clawsdk": {"name": "clawsdk", "base_url": base_url, "env_key": KEY_ENV,
                                    "wire_api": "responses"},
        "analytics": {"enabled": False}, "feedback": {"enabled": False}, "history": {"persistence": "none"},
        "tools": {"web_search": False},
    }
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    for name, values in sections.items():
        lines += ["", f"[{name}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]
    return "\n".join(lines) + "\n"


class CodexAgent(CliAgent):
    name = "codex"
    who = "Codex"
    package = PACKAGE
    own_files = (".codex",)

    def __init__(self, model: str | None = None, *, context_window: int = 128000, **options: Any):
        super().__init__(model, **options)
        self.context_window = int(context_window)

    def config_files(self, task: Task, *, base_url: str, token: str, state: str, limit: float) -> dict[str, str]:
        return {"home/config.toml": codex_config(base_url=base_url, model=self.model,
                                                 context_window=self.context_window)}

    def command(self, task: Task, *, workspace: str, state: str, limit: float) -> list[str]:
        return ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                "--color", "never", "-C", workspace, "-m", self.model, "-"]

    def environment(self, *, base_url: str, token: str, state: str) -> dict[str, str]:
        return {"CODEX_HOME": f"{state}/home", KEY_ENV: token}

    def tool_failed(self, text: str) -> bool:
        m = EXIT.search(text)
        return bool(m and m.group(1) != "0")

    def outcome(self, stdout: str) -> dict[str, Any]:
        """Its --json events: the last turn's ending and usage, and the errors it reported."""
        import json

        out: dict[str, Any] = {}
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            if kind in ("turn.completed", "turn.failed"):
                out["status"] = kind
                out["usage"] = event.get("usage")
                if event.get("error"):
                    out["error"] = event["error"]
            elif kind == "error":
                out["error"] = event.get("message")
        return out

    def why(self, outcome: dict[str, Any], stderr: str) -> str:
        err = outcome.get("error")
        if err:
            return str(err.get("message") if isinstance(err, dict) else err)[:500]
        return stderr.strip()[-500:]


@hookimpl
def register_agents(register):
    register("codex", CodexAgent)


@hookimpl
def register_commands(register):
    register(agent_group(PACKAGE))
