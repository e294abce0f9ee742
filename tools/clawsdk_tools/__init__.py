"""clawsdk's core agent tools as MCP servers bound to a sandbox."""

from clawsdk_tools.core import core_server, memory_server, openclaw_server, web_server

__all__ = ["core_server", "memory_server", "openclaw_server", "web_server"]
