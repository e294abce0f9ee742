"""Built-in task sources."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from clawsdk.errors import TaskFormatError
from clawsdk.hookspecs import hookimpl
from clawsdk.tasks.model import Task
from clawsdk.tasks.native import TASK_FILE, find_task_folders, iter_tasks, save_task, task_folder


class NativeSource:
    """Folders with a task.yaml (one task, or a tree of them)."""

    def detect(self, path: Path) -> bool:
        return path.is_dir() and ((path / TASK_FILE).is_file() or bool(find_task_folders(path)))

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]:
        if not path.is_dir():
            yield TaskFormatError(str(path), "a native task source is a folder")
            return
        yield from iter_tasks(path)

    def export(self, tasks: Iterable[Task], dest: Path) -> tuple[int, list]:
        """Every task as a folder dest/TASK_ID; native folders hold every field, so none is refused."""
        n = 0
        for task in tasks:
            save_task(task, task_folder(dest, task))
            n += 1
        return n, []


@hookimpl
def register_task_sources(register):
    register("native", NativeSource())
