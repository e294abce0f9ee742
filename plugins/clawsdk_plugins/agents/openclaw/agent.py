"""The `openclaw` agent: the real OpenClaw CLI works the task inside the sandbox, its model calls recorded.

As ClawGym collected its trajectories: OpenClaw with the workspace at /root/.openclaw/workspace (the
isolating sandboxes mount it there), its model provider pointed at the recording proxy in front of the real
upstream (OpenAI chat completions). The run itself is the CLI agents' (cli_agent/base.py); this module says
what is OpenClaw's: its config (openclaw.json: the provider, the task's tools, tool search off), its command
(`openclaw agent exec --config ... --cwd WORKSPACE --model clawsdk/MODEL --json --message-file -`, the
instruction on stdin) and the files it writes for itself (AGENTS.md, SOUL.md, .openclaw/...).

    clawsdk openclaw install
    clawsdk run examples/tasks/access-log-report --agent openclaw --model qwen2.5-7b-instruct \\
        --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from clawsdk.store.events import Note
from clawsdk_plugins.agents.cli_agent.base import CliAgent
from clawsdk_plugins.agents.openclaw.config import PROVIDER, openclaw_config, unsupported_servers
from clawsdk_plugins.agents.openclaw.install import PACKAGE

if TYPE_CHECKING:
    from clawsdk.runtime.agent import AgentContext
    from clawsdk.tasks.model import Task


class OpenClawAgent(CliAgent):
    name = "openclaw"
    who = "OpenClaw"
    package = PACKAGE
    #: what OpenClaw may write into its workspace for itself (bootstrap files, its state folder)
    own_files = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md",
                 ".openclaw", ".clawhub", ".pi")

    def __init__(self, model: str | None = None, *, thinking: str = "off", context_window: int = 128000,
                 max_tokens: int = 8192, **options: Any):
        if model and model.startswith(PROVIDER + "/"):
            model = model.split("/", 1)[1]
        super().__init__(model, **options)
        self.thinking = thinking
        self.context_window = context_window
        self.max_tokens = max_tokens

    async def run(self, ctx: AgentContext) -> None:
        skipped = unsupported_servers(ctx.task)
        if skipped:
            await ctx.recorder.record(Note(extra={"harness": self.name, "not_offered": skipped,
                                                  "why": "tool servers without OpenClaw tools"}))
        await super().run(ctx)

    def config_files(self, task: Task, *, base_url: str, token: str, state: str, limit: float) -> dict[str, str]:
        config = openclaw_config(task, base_url=base_url, token=token, model=self.model,
                                 context_window=self.context_window, max_tokens=self.max_tokens, timeout_s=limit)
        return {"openclaw.json": json.dumps(config, indent=1)}

    def command(self, task: Task, *, workspace: str, state: str, limit: float) -> list[str]:
        return ["agent", "exec", "--config", f"{state}/openclaw.json", "--cwd", workspace,
                "--model", f"{PROVIDER}/{self.model}", "--json", "--message-file", "-", "--thinking", self.thinking,
                "--timeout", str(int(limit + self.boot_timeout_s))]

    def environment(self, *, base_url: str, token: str, state: str) -> dict[str, str]:
        return {"OPENCLAW_NO_AUTO_UPDATE": "1"}

    def outcome(self, stdout: str) -> dict[str, Any]:
        envelope = super().outcome(stdout)
        return {k: envelope[k] for k in ("status", "final", "usage", "toolSummary", "assistantTurns", "error")
                if k in envelope}

    def gave_up(self, outcome: dict[str, Any]) -> bool:
        return outcome.get("status") == "timeout"

    def why(self, outcome: dict[str, Any], stderr: str) -> str:
        err = outcome.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        return stderr.strip()[-500:]
