"""`clawsdk serve`: a task's tools for an external MCP client, each client session one recorded, scored rollout
(`host`: the rollouts behind the sessions; `transports`: stdio and streamable HTTP)."""

from clawsdk.serve.host import MESSAGE_TEMPLATE, RolloutHost, ServeConfig, default_stdio_db, hosting
from clawsdk.serve.transports import serve_http, serve_stdio

__all__ = ["MESSAGE_TEMPLATE", "RolloutHost", "ServeConfig", "default_stdio_db", "hosting", "serve_http",
           "serve_stdio"]
