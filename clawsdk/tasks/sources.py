"""Resolving a TASKS argument (a path, or SOURCE:PATH) into tasks through the task-source plugins."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from clawsdk.errors import PluginError, TaskFormatError
from clawsdk.tasks.model import Task


class TaskSource(Protocol):
    """Reads tasks from a location. `detect` says whether a path is in its format."""

    def detect(self, path: Path) -> bool: ...

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]: ...


@dataclass
class LoadedTasks:
    tasks: list[Task] = field(default_factory=list)
    errors: list[TaskFormatError] = field(default_factory=list)
    source: str = ""


def load_tasks(spec: str | Path) -> LoadedTasks:
    """Tasks from `spec`: `SOURCE:PATH` picks a source, a bare path is detected.

    Tasks that cannot be read come back as errors next to the ones that could; nothing raises
    for one bad task. Duplicate ids are errors too.
    """
    from clawsdk.plugins import get_registry

    registry = get_registry()
    text = str(spec)
    name, _, rest = text.partition(":")
    if rest and name in registry.tables["task_sources"]:
        source_name, path = name, Path(rest)
        source = registry.get("task_sources", source_name)
    else:
        path = Path(text)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file or folder")
        for source_name in registry.names("task_sources"):
            source = registry.get("task_sources", source_name)
            if source.detect(path):
                break
        else:
            known = ", ".join(registry.names("task_sources"))
            raise PluginError(f"{path}: no task source recognises this (sources: {known}); "
                              "prefix the path with SOURCE: to choose one")
    result = LoadedTasks(source=source_name)
    seen: dict[str, str] = {}
    for item in source.load(path):
        if isinstance(item, TaskFormatError):
            result.errors.append(item)
            continue
        origin = str(item.provenance.get("path", path))
        if item.id in seen:
            result.errors.append(TaskFormatError(origin, f"duplicate task id {item.id!r} (also in {seen[item.id]})",
                                                 field="id", task_id=item.id))
            continue
        seen[item.id] = origin
        result.tasks.append(item)
    return result
