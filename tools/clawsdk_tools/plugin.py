"""Registers the core tool server as the `core` skill."""

from clawsdk.hookspecs import hookimpl
from clawsdk_tools.core import core_server


@hookimpl
def register_skills(register):
    register("core", core_server)
