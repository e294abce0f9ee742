"""Skill packs: one folder each, a SKILL.md and an MCP server of domain tools."""
