"""The plugin module named by the `clawsdk` entry point: it registers the skill under the name `todo`."""

from clawsdk.hookspecs import hookimpl
from clawsdk_skill_todo.server import server


@hookimpl
def register_skills(register):
    register("todo", server)
