"""Read and write the native task folder: task.yaml, workspace/, hidden/, solution/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import yaml
from pydantic import ValidationError

from clawsdk.errors import TaskFormatError
from clawsdk.tasks.model import File, Task, ToolCall

TASK_FILE = "task.yaml"
_FOLDER_FIELDS = ("workspace", "hidden")


def read_files(folder: Path, prefix: str = "") -> list[File]:
    """Every file under `folder` as a File (paths relative to it, after `prefix`); symlinks are refused."""
    files = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                raise TaskFormatError(str(p), "symlinks are not allowed in task files")
            rel = prefix + p.relative_to(folder).as_posix()
            files.append(File.from_bytes(rel, p.read_bytes(), executable=os.access(p, os.X_OK)))
    return files


def validation_message(e: ValidationError) -> tuple[str, str]:
    """(field, message) of the first error, with the field as a dotted path."""
    err = e.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"]
    if err["type"] == "missing":
        msg = "is required but missing"
    elif err["type"] == "extra_forbidden":
        msg = "is not a known field (typo?)"
    return field, msg


def load_task(folder: str | os.PathLike) -> Task:
    """Load one native task folder, or raise TaskFormatError saying which file and field is wrong."""
    folder = Path(folder)
    spec_path = folder / TASK_FILE
    try:
        raw = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskFormatError(str(spec_path), f"missing; a task folder needs a {TASK_FILE}") from None
    except UnicodeDecodeError as e:
        raise TaskFormatError(str(spec_path), f"not UTF-8 text: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise TaskFormatError(str(spec_path), f"invalid YAML: {where}{problem}") from None
    if not isinstance(raw, dict):
        raise TaskFormatError(str(spec_path), f"must be a mapping of fields, not {type(raw).__name__}")
    task_id = raw.get("id") or folder.name
    for name in _FOLDER_FIELDS:
        if name in raw:
            raise TaskFormatError(str(spec_path), f"files belong in the {name}/ folder, not in {TASK_FILE}",
                                  field=name, task_id=str(task_id))
    data = dict(raw)
    data.setdefault("id", folder.name)
    try:
        for name in _FOLDER_FIELDS:
            sub = folder / name
            data[name] = read_files(sub) if sub.is_dir() else []
        if "solution" not in data:
            data["solution"] = _read_solution(folder / "solution")
        task = Task.model_validate(data)
    except ValidationError as e:
        field, msg = validation_message(e)
        raise TaskFormatError(str(spec_path), msg, field=field, task_id=str(task_id)) from None
    except ValueError as e:
        raise TaskFormatError(str(folder), str(e), task_id=str(task_id)) from None
    task.provenance.setdefault("source", "native")
    task.provenance.setdefault("path", str(folder))
    _check_verifier(task, spec_path)
    return task


def _read_solution(folder: Path) -> list[dict] | None:
    steps = folder / "steps.yaml"
    script = folder / "solve.sh"
    if steps.exists():
        try:
            loaded = yaml.safe_load(steps.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise TaskFormatError(str(steps), f"invalid YAML: {e}") from None
        if not isinstance(loaded, list):
            raise TaskFormatError(str(steps), "must be a list of {tool, args} steps")
        return loaded
    if script.exists():
        return [{"tool": "exec", "args": {"command": script.read_text(encoding="utf-8")}}]
    return None


def _check_verifier(task: Task, spec_path: Path) -> None:
    """Ask the verifier plugin to parse the spec now, so a bad check fails at load, not after a rollout."""
    from clawsdk.plugins import get_registry

    registry = get_registry()
    try:
        factory = registry.get("verifiers", task.verifier.type)
    except Exception:
        known = ", ".join(registry.names("verifiers"))
        raise TaskFormatError(str(spec_path), f"unknown verifier type {task.verifier.type!r} (known: {known})",
                              field="verifier.type", task_id=task.id) from None
    try:
        factory(task.verifier)
    except (ValueError, TypeError) as e:
        raise TaskFormatError(str(spec_path), str(e), field="verifier", task_id=task.id) from None


def find_task_folders(root: str | os.PathLike, marker: str = TASK_FILE) -> list[Path]:
    """Every folder holding `marker` under root; such a folder is not searched further, nor hidden ones."""
    root = Path(root)
    if (root / marker).is_file():
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if marker in filenames:
            found.append(Path(dirpath))
            dirnames[:] = []
        else:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
    return found


def iter_tasks(root: str | os.PathLike) -> Iterator[Task | TaskFormatError]:
    for folder in find_task_folders(root):
        try:
            yield load_task(folder)
        except TaskFormatError as e:
            yield e


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


__all__ = ["load_task", "save_task", "iter_tasks", "find_task_folders", "ToolCall"]
