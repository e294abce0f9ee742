"""The task as it stood before the agent, for a verifier to tell its own slowness or failure from the agent's."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from clawsdk.tasks.model import File
from clawsdk.verify.verdict import VerifyContext

log = logging.getLogger(__name__)


async def untouched_copy(ctx: VerifyContext, files: list[File],
                         extra: Callable[[str], list[File]] | None = None) -> str | None:
    """Copy `files` (the task's initial workspace) into a fresh folder beside the hidden files, where the
    agent can write none of the folders above: in the workspace, a tool that looks upward for its
    configuration (pytest's conftest.py, git's config) found the agent's. `extra(folder)` gives more files
    to put there, knowing the folder as the sandbox sees it. Returns that folder, or None when it cannot be
    written (the agent filled its disk quota)."""
    name = f".untouched-{secrets.token_hex(4)}"
    base = (ctx.sandbox.hidden_path or "").rstrip("/")
    copies = [File(path=f"{name}/.keep", text=""),  # the folder, for a task with no files
              *(f.model_copy(update={"path": f"{name}/{f.path}"}) for f in files)]
    try:
        if extra is not None:
            if not base:  # where the hidden files go is known once they are there
                base = (await ctx.sandbox.inject_hidden([])).rstrip("/")
            copies += [f.model_copy(update={"path": f"{name}/{f.path}"}) for f in extra(f"{base}/{name}")]
        where = await ctx.sandbox.inject_hidden(copies)
    except OSError as e:
        log.info("task %s: no room for an untouched copy: %s", ctx.task.id, e)
        return None
    return f"{where.rstrip('/')}/{name}"
