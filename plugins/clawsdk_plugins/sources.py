"""Built-in task sources."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clawsdk.errors import TaskFormatError
from clawsdk.hookspecs import hookimpl
from clawsdk.tasks.model import Task
from clawsdk.tasks.native import TASK_FILE, find_task_folders, iter_tasks


class NativeSource:
    """Folders with a task.yaml (one task, or a tree of them)."""

    def detect(self, path: Path) -> bool:
        return path.is_dir() and ((path / TASK_FILE).is_file() or bool(find_task_folders(path)))

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]:
        if not path.is_dir():
            yield TaskFormatError(str(path), "a native task source is a folder")
            return
        yield from iter_tasks(path)


@hookimpl
def register_task_sources(register):
    register("native", NativeSource())
