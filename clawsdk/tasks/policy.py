"""Per-task tool selection, like OpenClaw's tools.profile / tools.allow / tools.deny.

- `profile` sets a base allow-list of OpenClaw's core tools: minimal, coding, messaging, full.
  A profile limits only those core tools; skill tools are governed by allow/deny.
- `allow` adds to the profile; without a profile it is the whole allow-list.
- `deny` always wins.

Entries: a tool name, `group:NAME`, `server:NAME` (every tool of that server), or a `*`
wildcard pattern. Matching ignores case.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clawsdk.tasks.model import ToolPolicy

#: OpenClaw's tool groups, plus clawsdk's ls/glob/grep in group:fs.
GROUPS: dict[str, frozenset[str]] = {
    "group:fs": frozenset({"read", "write", "edit", "apply_patch", "ls", "glob", "grep"}),
    "group:runtime": frozenset({"exec", "bash", "process"}),
    "group:web": frozenset({"web_search", "web_fetch"}),
    "group:memory": frozenset({"memory_search", "memory_get"}),
    "group:sessions": frozenset({"sessions_list", "sessions_history", "sessions_send", "sessions_spawn",
                                 "session_status"}),
    "group:ui": frozenset({"browser", "canvas"}),
    "group:automation": frozenset({"cron", "gateway"}),
    "group:messaging": frozenset({"message"}),
    "group:nodes": frozenset({"nodes"}),
    "group:media": frozenset({"image"}),
}
GROUPS["group:openclaw"] = frozenset().union(*GROUPS.values())
CORE_TOOLS = GROUPS["group:openclaw"]

PROFILES: dict[str, tuple[str, ...]] = {
    "minimal": ("session_status",),
    "coding": ("group:fs", "group:runtime", "group:sessions", "group:memory", "image"),
    "messaging": ("group:messaging", "sessions_list", "sessions_history", "sessions_send", "session_status"),
    "full": ("*",),
}


def _matches(entry: str, tool: str, server: str) -> bool:
    e = entry.strip().lower()
    t = tool.lower()
    if e in GROUPS:
        return t in GROUPS[e]
    if e.startswith("server:"):
        return fnmatch.fnmatchcase(server.lower(), e[len("server:"):])
    return fnmatch.fnmatchcase(t, e) or fnmatch.fnmatchcase(f"{server.lower()}__{t}", e)


def check_policy(policy: ToolPolicy) -> None:
    """Raise ValueError naming the field with an unknown profile or group."""
    if policy.profile is not None and policy.profile not in PROFILES:
        raise ValueError(f"tool_policy.profile: unknown profile {policy.profile!r}; one of {', '.join(PROFILES)}")
    for fld in ("allow", "deny"):
        for entry in getattr(policy, fld):
            if entry.lower().startswith("group:") and entry.lower() not in GROUPS:
                raise ValueError(f"tool_policy.{fld}: unknown group {entry!r}; one of {', '.join(sorted(GROUPS))}")


def tool_allowed(policy: ToolPolicy | None, tool: str, server: str) -> bool:
    """Whether `tool` of `server` is offered to the agent under `policy`."""
    if policy is None:
        return True
    if any(_matches(d, tool, server) for d in policy.deny):
        return False
    profile = policy.profile
    if profile in (None, "full"):
        if policy.allow and profile is None:
            return any(_matches(a, tool, server) for a in policy.allow)
        return True
    base = PROFILES.get(profile, ())
    if tool.lower() not in CORE_TOOLS:  # a profile limits OpenClaw's core tools, not skills
        return True
    return any(_matches(e, tool, server) for e in (*base, *policy.allow))
