"""OpenClaw's install: Node and a pinned `openclaw` from npm (cli_agent/install.py), in CLAWSDK_OPENCLAW_HOME
(default .clawsdk/openclaw). OpenClaw 2026.9.6 needs Node >= 24.16 and Debian's is 20."""

from __future__ import annotations

import os

from clawsdk_plugins.agents.cli_agent import install as _install
from clawsdk_plugins.agents.cli_agent.install import NODE_VERSION, Install, Package

__all__ = ["NODE_VERSION", "OPENCLAW_VERSION", "PACKAGE", "Install", "find_install", "missing_message"]

#: the pin `install` brings; what the agent was tested with
OPENCLAW_VERSION = "2026.9.6"
PACKAGE = Package(agent="openclaw", npm="openclaw", version=OPENCLAW_VERSION, entry="openclaw/openclaw.mjs",
                  node_script=True, size="about 750 MB")


def find_install(home: str | os.PathLike | None = None) -> Install | None:
    return _install.find_install(PACKAGE, home)


def missing_message(home: str | os.PathLike | None = None) -> str:
    return PACKAGE.missing(home)
