"""Resolving a TASKS argument (a path, or SOURCE:PATH) into tasks through the task-source plugins."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from clawsdk.errors import PluginError, TaskFormatError
from clawsdk.plugins import Contract
from clawsdk.tasks.model import Task, first_unstorable
from clawsdk.tasks.reading import as_task_error

log = logging.getLogger(__name__)


class TaskSource(Protocol):
    """Reads tasks from a location. `detect` says whether a path is in its format."""

    def detect(self, path: Path) -> bool: ...

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]: ...


class TaskSourcePlugin(Contract):
    """The task source kind: an object with `detect` and `load` (`TaskSource`), registered with
    `register_task_sources`. It may carry this method; left out, the format is read-only."""

    kind = "task_sources"

    @property
    def writes(self) -> bool:
        """Whether this format can be written (`clawsdk convert --to NAME`)."""
        return self.provided("export") is not None

    def export(self, tasks: Iterable[Task], dest: Path) -> tuple[int, list]:
        """Write `tasks` to `dest`: (how many were written, a `ConvertError` for each the format cannot
        hold). Left out: PluginError, the format is read-only."""
        write = self.provided("export")
        if write is None:
            raise PluginError(f"task source {self.target!r} cannot write tasks (it has no export)")
        return write(tasks, dest)


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
    if not text.strip() or (not text.partition(":")[2].strip() and text.endswith(":")):
        # Path("") is ".": an unset $TASKS ran every task found under the working folder
        raise FileNotFoundError(f"{text!r}: an empty task path; give a task file or folder")
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
            if _detects(source, source_name, path):
                break
        else:
            known = ", ".join(registry.names("task_sources"))
            raise PluginError(f"{path}: no task source recognises this (sources: {known}); "
                              "prefix the path with SOURCE: to choose one")
    result = LoadedTasks(source=source_name)
    seen: dict[str, str] = {}
    items = source.load(path)
    while True:
        try:
            item = next(items)
        except StopIteration:
            break
        except Exception as e:  # a source that raises ends its own listing, not the run
            result.errors.append(as_task_error(path, e))
            break
        if isinstance(item, TaskFormatError):
            result.errors.append(item)
            continue
        item = storable(item, path)
        if isinstance(item, TaskFormatError):
            result.errors.append(item)
            continue
        _add(result, item, seen, str(item.provenance.get("path", path)))
    return result


def storable(task: Task, path: str | Path) -> Task | TaskFormatError:
    """`task`, or its error when the store could not write it: checked here, at load, so a value no validator
    foresaw (a source's own, a field set after validation) is this task's `skipped task:` line, not the end of
    the whole run at its first write. The hash dumps what it covers (and is kept for the run); the fields it
    leaves out are walked: a second whole dump per task made loading 70% slower."""
    try:
        where = str(task.provenance.get("path", path))
    except Exception:  # a provenance that is not a dict; the dump below says why
        where = str(path)
    try:
        _ = task.hash  # computed (and cached) for what it raises
        if first_unstorable({"metadata": task.metadata, "provenance": task.provenance}) is None:
            return task
        raise ValueError("a value the store cannot write")
    except Exception as e:  # any failure is this task's
        try:
            found = first_unstorable(dict(task))
        except Exception:  # the walk itself failed: name no field
            found = None
        task_id = task.id if isinstance(getattr(task, "id", None), str) else None
        if found is not None:
            field, why = found
            return TaskFormatError(where, f"{why} (the task cannot be stored)", field=field or None, task_id=task_id)
        detail = " ".join(str(e).split())[:300]
        return TaskFormatError(where, f"the task cannot be stored ({type(e).__name__}"
                                      + (f": {detail})" if detail else ")"), task_id=task_id)


def _detects(source: TaskSource, name: str, path: Path) -> bool:
    """Whether `source` claims `path`. A detect() that raises says "not mine": one broken plugin
    source must not stop every path, native tasks included, from loading."""
    try:
        return bool(source.detect(path))
    except Exception as e:  # warned about, then skipped
        from clawsdk.plugins import get_registry

        log.warning("task source %r of plugin %s: detect() raised %s: %s; treated as not recognising %s",
                    name, get_registry().owner("task_sources", name), type(e).__name__, e, path)
        return False


def load_many(specs: Iterable[str | Path]) -> LoadedTasks:
    """The tasks of every spec, with ids unique across all of them.

    A task whose id an earlier spec (or an earlier task of the same spec) already gave is
    refused, with one error naming both files: an id is the task's identity in the store (its
    rollouts, resume, benchmark reports), so a second task of that id is never run under it,
    and never silently renamed to a name that depends on the order of the arguments.
    """
    merged = LoadedTasks()
    seen: dict[str, str] = {}
    sources = []
    for spec in specs:
        loaded = load_tasks(spec)
        sources.append(loaded.source)
        merged.errors.extend(loaded.errors)
        for task in loaded.tasks:
            _add(merged, task, seen, str(task.provenance.get("path", spec)))
    merged.source = ",".join(dict.fromkeys(sources))
    return merged


def _add(result: LoadedTasks, task: Task, seen: dict[str, str], origin: str) -> None:
    if task.id in seen:
        result.errors.append(TaskFormatError(
            origin, f"duplicate task id {task.id!r} (also in {seen[task.id]}); this one is skipped: give it "
                    "another id", field="id", task_id=task.id))
        return
    seen[task.id] = origin
    result.tasks.append(task)
