"""Tools behind the sandbox's boundary.

Every tool that interprets what the agent wrote (a document, a spreadsheet, a calendar, mail, a query, a
regular expression) and every MCP server a task or a skill declares runs in a process inside the rollout's
sandbox, never in the runner: under bwrap in the sandbox's namespaces, under docker in its container, as
its uid, with no network and the kernel's limits on memory and CPU (`Limits.tool_memory_mb`, the task's
time). The runner moves MCP messages to it and back; a call past `Limits.tool_timeout_s` kills the process
and answers the agent with a timeout, and the rollout goes on.

- `inside`: the tool host, run in the sandbox (`python -m clawsdk.mcp.toolhost.inside`, the spec on stdin);
- `client`: `ToolHost`, the runner's MCP client of one such process, started on first use;
- `view`: the `Sandbox` the skill servers get inside (the workspace through descriptors);
- `boundary`: `Boundary`, the tool hosts of one tool session (clawsdk.mcp.session);
- `standalone`: one skill as an MCP server of its own (`clawsdk skills serve`).

docs/sandboxes.md says which tools run where, and why.
"""

from __future__ import annotations
