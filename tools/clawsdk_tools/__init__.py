"""clawsdk's core agent tools as MCP servers bound to a sandbox."""

from clawsdk_tools.core import core_server

__all__ = ["core_server"]
