"""The todo skill's MCP server: every file access goes through the sandbox, so it stays in the workspace."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.mcp.toolkit import skill_server, tool_errors

TODO = "todo.txt"


class Item(BaseModel):
    number: int
    text: str
    priority: str | None = None
    due: str | None = None
    done: bool = False


def parse(line: str, number: int) -> Item:
    done = line.startswith("x ")
    body = re.sub(r"^x \d{4}-\d{2}-\d{2} ", "", line) if done else line
    m = re.match(r"^\(([A-Z])\) ", body)
    due = re.search(r"\bdue:(\d{4}-\d{2}-\d{2})\b", body)
    return Item(number=number, text=body, priority=m.group(1) if m else None, due=due.group(1) if due else None,
                done=done)


def server(sandbox: Any, task: Any = None):
    srv = skill_server(Path(__file__).parent / "SKILL.md")

    async def lines() -> list[str]:
        try:
            return (await sandbox.read(TODO)).decode("utf-8").splitlines()
        except FileNotFoundError:
            return []

    @srv.tool()
    @tool_errors
    async def todo_list(all: bool = False) -> list[Item]:
        """The items of todo.txt with their numbers: open ones by priority, or every item with all=true."""
        items = [parse(line, n) for n, line in enumerate(await lines(), 1) if line.strip()]
        if not all:
            items = [i for i in items if not i.done]
        return sorted(items, key=lambda i: (i.done, i.priority or "~", i.number))

    @srv.tool()
    @tool_errors
    async def todo_add(text: str, priority: str | None = None, due: str | None = None) -> Item:
        """Add an item. priority: one letter A-Z; due: YYYY-MM-DD."""
        if not text.strip() or "\n" in text:
            raise ToolError("an item is one non-empty line of text")
        if priority is not None and not re.fullmatch(r"[A-Z]", priority):
            raise ToolError(f"priority {priority!r} must be one capital letter, A (highest) to Z")
        if due is not None:
            dt.date.fromisoformat(due)  # a ValueError becomes a tool error
        line = (f"({priority}) " if priority else "") + text.strip() + (f" due:{due}" if due else "")
        current = await lines()
        await sandbox.write(TODO, ("\n".join([*current, line]) + "\n").encode("utf-8"))
        return parse(line, len(current) + 1)

    @srv.tool()
    @tool_errors
    async def todo_done(number: int) -> Item:
        """Mark item `number` (as todo_list shows it) done today."""
        current = await lines()
        if not 1 <= number <= len(current) or not current[number - 1].strip():
            raise ToolError(f"there is no item {number}; todo_list shows the numbers")
        item = parse(current[number - 1], number)
        if item.done:
            raise ToolError(f"item {number} is already done")
        current[number - 1] = f"x {dt.date.today().isoformat()} {current[number - 1]}"
        await sandbox.write(TODO, ("\n".join(current) + "\n").encode("utf-8"))
        return parse(current[number - 1], number)

    return srv


server.skill_dir = Path(__file__).parent  # lets `clawsdk skills check` and the kit find SKILL.md
