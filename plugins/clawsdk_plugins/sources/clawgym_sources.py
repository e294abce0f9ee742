"""The ClawGym task sources: `clawgym` (task folders) and `clawgym-jsonl` (syn_task.jsonl). They read with
clawgym (the formats and the reward verifier) and write with clawgym_export (`clawsdk convert --to`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clawsdk.errors import TaskFormatError
from clawsdk.hookspecs import hookimpl
from clawsdk.tasks.model import Task
from clawsdk.tasks.reading import ReadLimits, guarded, parse_json
from clawsdk_plugins.sources.clawgym import ENTRY_FILE, find_task_folders, load_folder_task, load_jsonl_record


def _looks_like_syn_task(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    first = json.loads(line)
                    return isinstance(first, dict) and "prompt" in first and (
                        "hook_code" in first or "rule" in first or "rules" in first)
    except (OSError, ValueError):
        return False
    return False


def _load_line(line: str, where: str, default_id: str) -> Task:
    return load_jsonl_record(_parse_line(line, where, default_id), where, default_id)


def _parse_line(line: str, where: str, default_id: str) -> Any:
    try:
        return parse_json(line, where)
    except TaskFormatError as e:
        e.task_id = default_id
        raise


def _bounded_lines(path: Path, limit: int) -> Iterator[tuple[int, str | None]]:
    """(line number, text) of each non-blank line; None for a line longer than `limit` bytes."""
    with path.open("rb") as f:
        n = 0
        while True:
            raw = f.readline(limit + 1)
            if not raw:
                return
            n += 1
            if len(raw) > limit and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # skip the rest of the long line
                    raw = f.readline(1 << 20)
                yield n, None
                continue
            text = raw.decode("utf-8", errors="replace")
            if text.strip():
                yield n, text


class ClawGymSource:
    """ClawGym task folders (data_entry.json) under a path, or a syn_task.jsonl file."""

    def detect(self, path: Path) -> bool:
        if path.is_file():
            return path.suffix == ".jsonl" and _looks_like_syn_task(path)
        return path.is_dir() and bool(find_task_folders(path))

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]:
        if path.is_file():
            yield from ClawGymJsonlSource().load(path)
            return
        if not path.is_dir():
            yield TaskFormatError(str(path), "no such folder; a ClawGym source is a task folder, a folder of "
                                             "them, or a syn_task.jsonl file")
            return
        folders = find_task_folders(path)
        if not folders:
            yield TaskFormatError(str(path), f"no ClawGym task here (no {ENTRY_FILE} found)")
        for folder in folders:
            yield guarded(folder / ENTRY_FILE, functools.partial(load_folder_task, folder))

    def export(self, tasks: Any, dest: Path) -> tuple[int, list]:
        """Write tasks as ClawGym folders under dest (a writer, for `clawsdk convert --to clawgym`)."""
        from clawsdk_plugins.sources.clawgym_export import write_folders

        return write_folders(tasks, dest)


class ClawGymJsonlSource:
    """ClawGym's syn_task.jsonl: one task per line."""

    def detect(self, path: Path) -> bool:
        return path.is_file() and path.suffix == ".jsonl" and _looks_like_syn_task(path)

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]:
        if not path.is_file():
            yield TaskFormatError(str(path), "no such file; a clawgym-jsonl source is a .jsonl file")
            return
        limits = ReadLimits.from_env()
        for n, line in _bounded_lines(path, limits.task_file_bytes):
            where = f"{path}:{n}"
            default_id = f"{path.stem}_{n:05d}"
            if line is None:
                yield TaskFormatError(where, f"the line is over the {limits.task_file_bytes:,}-byte limit; "
                                             "set CLAWSDK_MAX_TASK_FILE_BYTES to allow more", task_id=default_id)
                continue
            yield guarded(where, functools.partial(_load_line, line, where, default_id))

    def export(self, tasks: Any, dest: Path) -> tuple[int, list]:
        """Write tasks as one syn_task.jsonl file at dest."""
        from clawsdk_plugins.sources.clawgym_export import write_jsonl

        return write_jsonl(tasks, dest)


@hookimpl
def register_task_sources(register):
    register("clawgym", ClawGymSource())
    register("clawgym-jsonl", ClawGymJsonlSource())
