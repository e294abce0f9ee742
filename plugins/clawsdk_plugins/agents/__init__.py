"""Agents: the built-ins (oracle, scripted), the tool loop, replay, the harness and the CLI agents
(OpenClaw, Claude Code, Codex)."""
