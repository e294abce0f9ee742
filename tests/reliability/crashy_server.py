"""A stdio MCP tool server whose `crash` tool kills its own process (fault injection)."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashy")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.tool()
def crash() -> str:
    """Exit the server process without answering."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
