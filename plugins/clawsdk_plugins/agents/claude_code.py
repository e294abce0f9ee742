"""The `claude-code` agent: Anthropic's Claude Code CLI (npm `@anthropic-ai/claude-code`) works the task in the
sandbox, its Anthropic Messages calls recorded through the proxy in front of any chat-completions upstream.

    clawsdk claude-code install
    clawsdk run examples/tasks --agent claude-code --model qwen2.5-7b-instruct --base-url http://127.0.0.1:8000/v1

One-shot `claude -p` with the instruction on stdin, `--output-format json`, permissions bypassed (the sandbox is
the boundary; under bwrap and docker it runs as an unprivileged user), only the built-in tools the task's tools
stand for (`--tools`), no MCP servers, no session kept; telemetry, error reporting, update checks and every
other call home are off, and the sandbox has no network anyway: it reaches the proxy only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawsdk.hookspecs import hookimpl
from clawsdk_plugins.agents.cli_agent.base import CliAgent
from clawsdk_plugins.agents.cli_agent.commands import agent_group
from clawsdk_plugins.agents.cli_agent.install import Package

if TYPE_CHECKING:
    from clawsdk.tasks.model import Task

PACKAGE = Package(agent="claude-code", npm="@anthropic-ai/claude-code", version="2.1.332",
                  entry="@anthropic-ai/claude-code/bin/claude.exe", node_script=False, size="about 600 MB")

#: Claude Code's built-in tools, by the clawsdk tool each stands for and the tool server that has it
TOOLS = {"core": {"read": "Read", "write": "Write", "edit": "Edit", "exec": "Bash"}, "web": {"web_fetch": "WebFetch"}}
TOOLS["openclaw"] = {**TOOLS["core"], **TOOLS["web"]}

#: off: telemetry, error reports, the auto-updater, surveys, and every other call that is not the model's
QUIET = {"DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
         "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
         "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1", "DISABLE_COST_WARNINGS": "1"}


def offered_tools(task: Task) -> list[str]:
    """Claude Code's tools for this task: those its tool servers' tools stand for, filtered by its tool_policy."""
    from clawsdk.tasks.policy import tool_allowed

    out: list[str] = []
    for server in task.tools:
        for ours, theirs in TOOLS.get(server, {}).items():
            if theirs not in out and tool_allowed(task.tool_policy, ours, server):
                out.append(theirs)
    return out


class ClaudeCodeAgent(CliAgent):
    name = "claude-code"
    who = "Claude Code"
    package = PACKAGE
    own_files = (".claude", ".mcp.json")
    base_path = ""  # the Anthropic client adds /v1/messages itself

    def __init__(self, model: str | None = None, **options: Any):
        options.setdefault("mem_mb", 65536)  # JavaScriptCore reserves tens of GB of address space it never uses
        super().__init__(model, **options)

    def command(self, task: Task, *, workspace: str, state: str, limit: float) -> list[str]:
        return ["-p", "--output-format", "json", "--model", self.model, "--dangerously-skip-permissions",
                "--tools", ",".join(offered_tools(task)), "--strict-mcp-config", "--no-session-persistence"]

    def environment(self, *, base_url: str, token: str, state: str) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": token, "ANTHROPIC_MODEL": self.model,
                "ANTHROPIC_SMALL_FAST_MODEL": self.model, "ANTHROPIC_DEFAULT_HAIKU_MODEL": self.model,
                "CLAUDE_CONFIG_DIR": f"{state}/config", "IS_SANDBOX": "1", **QUIET}

    def tool_failed(self, text: str) -> bool:
        return False  # its results carry is_error, which the proxy keeps

    def gave_up(self, outcome: dict[str, Any]) -> bool:
        return outcome.get("subtype") == "error_max_turns"

    def why(self, outcome: dict[str, Any], stderr: str) -> str:
        if outcome.get("is_error") and outcome.get("result"):
            return str(outcome["result"])[:500]
        return stderr.strip()[-500:]


@hookimpl
def register_agents(register):
    register("claude-code", ClaudeCodeAgent)


@hookimpl
def register_commands(register):
    register(agent_group(PACKAGE))
