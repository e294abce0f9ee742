"""An example clawsdk skill: a todo.txt list in the workspace."""

from clawsdk_skill_todo.server import server

__all__ = ["server"]
