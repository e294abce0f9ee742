"""Export tasks to any format a task source can write: `clawsdk convert --to FORMAT`.

A task source may carry a writer beside its reader (`TaskSourcePlugin.export`:
``(tasks, dest) -> (written, errors)``), where each error is a `ConvertError` naming the task and what the
format cannot hold (a task is never written without its verifier). The format names are the sources' registered names, so a
third-party format plugs in the same way as ClawGym's. Each format keeps what it can hold;
native -> ClawGym -> native gives the same task (the same Task.hash).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clawsdk.errors import ClawError
from clawsdk.tasks.model import Task
from clawsdk.tasks.sources import TaskSourcePlugin

#: older spellings of format names, still accepted
ALIASES = {"jsonl": "clawgym-jsonl"}


class ConvertError(ClawError):
    """A task that the target format cannot hold."""


def formats() -> list[str]:
    """The registered task sources that can write tasks."""
    from clawsdk.plugins import get_registry

    table = get_registry().tables["task_sources"]
    return sorted(name for name, source in table.items() if TaskSourcePlugin.of(source).writes)


def export_tasks(tasks: Iterable[Task], dest: str | Path, fmt: str) -> tuple[int, list[ConvertError]]:
    """Write tasks to dest in fmt (a task source name, e.g. native, clawgym, clawgym-jsonl)."""
    fmt = ALIASES.get(fmt, fmt)
    known = formats()
    if fmt not in known:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(known)}")
    return TaskSourcePlugin.named(fmt).export(tasks, Path(dest))


__all__ = ["ALIASES", "ConvertError", "export_tasks", "formats"]
