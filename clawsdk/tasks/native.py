"""Read and write the native task folder: task.yaml, workspace/, hidden/, solution/."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import yaml
from pydantic import ValidationError

from clawsdk.errors import TaskFormatError
from clawsdk.tasks.model import Task, ToolCall, check_task_id
from clawsdk.tasks.reading import (
    Budget,
    check_instruction,
    guarded,
    lexists,
    parse_yaml,
    read_file,
    read_text,
    read_tree,
)

TASK_FILE = "task.yaml"
_FOLDER_FIELDS = ("workspace", "hidden")


def validation_message(e: ValidationError) -> tuple[str, str]:
    """(field, message) of the first error, with the field as a dotted path."""
    err = e.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "is required but missing"
    elif err["type"] == "extra_forbidden":
        msg = "is not a known field (typo?)"
    return field, msg


def load_task(folder: str | os.PathLike) -> Task:
    """Load one native task folder, or raise TaskFormatError saying which file and field is wrong."""
    folder = Path(folder)
    spec_path = folder / TASK_FILE
    budget = Budget()
    try:
        text = read_text(folder, TASK_FILE, limits=budget.limits)
    except FileNotFoundError:
        raise TaskFormatError(str(spec_path), f"missing; a task folder needs a {TASK_FILE}") from None
    raw = parse_yaml(text, str(spec_path), limits=budget.limits)
    if not isinstance(raw, dict):
        raise TaskFormatError(str(spec_path), f"must be a mapping of fields, not {type(raw).__name__}")
    task_id = raw.get("id") or folder.name
    for name in _FOLDER_FIELDS:
        if name in raw:
            raise TaskFormatError(str(spec_path), f"files belong in the {name}/ folder, not in {TASK_FILE}",
                                  field=name, task_id=str(task_id))
    check_instruction(raw.get("instruction"), str(spec_path), "instruction", str(task_id), budget.limits)
    data = dict(raw)
    data.setdefault("id", folder.name)
    try:
        for name in _FOLDER_FIELDS:
            try:
                data[name] = read_tree(folder, name, budget=budget) if lexists(folder, name) else []
            except ValidationError as e:  # a file no workspace can hold; the message names it
                raise TaskFormatError(str(folder), validation_message(e)[1], field=name, task_id=str(task_id)) \
                    from None
        if "solution" not in data:
            data["solution"] = _read_solution(folder, budget)
        task = Task.model_validate(data)
    except ValidationError as e:
        field, msg = validation_message(e)
        raise TaskFormatError(str(spec_path), msg, field=field, task_id=str(task_id)) from None
    except TaskFormatError as e:
        e.task_id = e.task_id or str(task_id)
        raise
    except ValueError as e:
        raise TaskFormatError(str(folder), str(e), task_id=str(task_id)) from None
    task.provenance.setdefault("source", "native")
    task.provenance.setdefault("path", str(folder))
    _check_verifier(task, spec_path)
    return task


def _read_solution(folder: Path, budget: Budget) -> list[dict] | None:
    for name in ("steps.yaml", "solve.sh"):
        rel = f"solution/{name}"
        if not lexists(folder, rel):
            continue
        where = str(folder / rel)
        data = read_file(folder, rel, limits=budget.limits, task_file=True)
        budget.take(where, files=1, size=len(data))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TaskFormatError(where, f"not UTF-8 text: {e}") from None
        if name == "solve.sh":
            return [{"tool": "exec", "args": {"command": text}}]
        loaded = parse_yaml(text, where, limits=budget.limits)
        if not isinstance(loaded, list):
            raise TaskFormatError(where, "must be a list of {tool, args} steps")
        return loaded
    return None


def _check_verifier(task: Task, spec_path: Path) -> None:
    """Ask the verifier plugin to parse the spec now, so a bad check fails at load, not after a rollout.

    A verifier with a `check_task(task)` method is asked too whether it can score this task at all (the
    hidden files it reads are there, its code compiles): ValueError("verifier.FIELD: why") if not.
    """
    from clawsdk.plugins import get_registry

    registry = get_registry()
    try:
        factory = registry.get("verifiers", task.verifier.type)
    except Exception:
        known = ", ".join(registry.names("verifiers"))
        raise TaskFormatError(str(spec_path), f"unknown verifier type {task.verifier.type!r} (known: {known})",
                              field="verifier.type", task_id=task.id) from None
    try:
        verifier = factory(task.verifier)
        # `Verifier.check_task` (clawsdk/verify/verdict.py) is the contract; the task layer sits below it, so it
        # asks the made object for the method instead of importing VerifierPlugin
        if hasattr(verifier, "check_task"):
            verifier.check_task(task)
    except (ValueError, TypeError) as e:
        field, sep, msg = str(e).partition(": ")
        if not (sep and field.startswith("verifier")):  # the plugin named no field of its own
            field, msg = "verifier", str(e)
        raise TaskFormatError(str(spec_path), msg, field=field, task_id=task.id) from None
    except RecursionError:
        raise TaskFormatError(str(spec_path), "nested too deep to read", field="verifier", task_id=task.id) from None


def find_task_folders(root: str | os.PathLike, marker: str = TASK_FILE) -> list[Path]:
    """Every folder holding `marker` under root; such a folder is not searched further, nor hidden ones."""
    root = Path(root)
    if os.path.lexists(root / marker):  # a folder or symlink of that name too: loading says what is wrong
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if marker in filenames or marker in dirnames:
            found.append(Path(dirpath))
            dirnames[:] = []
        else:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
    return found


def iter_tasks(root: str | os.PathLike) -> Iterator[Task | TaskFormatError]:
    for folder in find_task_folders(root):
        yield guarded(folder / TASK_FILE, functools.partial(load_task, folder))


def task_folder(parent: str | os.PathLike, task: Task) -> Path:
    """PARENT/ID, where a writer puts `task`; refuses an id that would name anything else.

    Ids are checked when a task is read, and again here: `model_copy(update=...)` and assignment
    skip validation.
    """
    try:
        check_task_id(task.id)
    except ValueError as e:
        raise TaskFormatError(str(parent), str(e), field="id", task_id=task.id) from None
    return Path(parent) / task.id


def save_task(task: Task, folder: str | os.PathLike) -> Path:
    """Write a task as a native folder (round-trips through load_task)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spec = task.model_dump(mode="json", exclude={"workspace", "hidden", "solution"}, exclude_defaults=True)
    spec["id"] = task.id
    spec["instruction"] = task.instruction
    (folder / TASK_FILE).write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    for name in _FOLDER_FIELDS:
        for f in getattr(task, name):
            target = folder / name / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.data)
            if f.executable:
                target.chmod(0o755)
    if task.solution is not None:
        (folder / "solution").mkdir(exist_ok=True)
        steps = [c.model_dump(mode="json") for c in task.solution]
        (folder / "solution" / "steps.yaml").write_text(
            yaml.safe_dump(steps, sort_keys=False, allow_unicode=True), encoding="utf-8"
        )
    return folder


__all__ = ["load_task", "save_task", "task_folder", "iter_tasks", "find_task_folders", "ToolCall"]
