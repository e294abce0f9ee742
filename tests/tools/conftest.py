"""An in-process MCP client on a tool server bound to a fresh local sandbox."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from clawsdk_plugins.sandboxes.local import LocalSandbox
from mcp import Client

from clawsdk.tasks.model import File, Task


def task_with(files: dict[str, str] | None = None, **fields: Any) -> Task:
    return Task(id="tools-test", instruction="test the tools",
                workspace=[File(path=p, text=t) for p, t in (files or {}).items()], **fields)


@contextlib.asynccontextmanager
async def connected(factory: Callable, task: Task, sandbox: Any = None) -> AsyncIterator[tuple[Client, Any]]:
    sandbox = sandbox or LocalSandbox()
    async with sandbox:
        await sandbox.start(task)
        async with Client(factory(sandbox, task)) as client:
            yield client, sandbox


def text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)
