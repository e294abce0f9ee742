"""Registers the core tool servers: `core`, `web`, `memory` and `openclaw` (all three in one)."""

from clawsdk.hookspecs import hookimpl
from clawsdk_tools.core import core_server, memory_server, openclaw_server, web_server


@hookimpl
def register_skills(register):
    register("core", core_server)
    register("web", web_server)
    register("memory", memory_server)
    register("openclaw", openclaw_server)
