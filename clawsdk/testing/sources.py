"""The task source conformance kit.

    from clawsdk.testing import check_task_source

    def test_my_source():
        check_task_source(MySource(), "tests/fixtures/my-tasks", broken="tests/fixtures/my-broken").assert_ok()

The contract (`clawsdk.tasks.sources.TaskSource`):

- ``detect(path) -> bool`` never raises: False for a path that is missing or not in the format;
- ``load(path)`` never raises for bad input: it yields a `TaskFormatError` per task it cannot
  read, whose ``path`` names the file (or folder) at fault, and goes on with the rest; a path
  that does not exist gives one TaskFormatError naming it;
- the same input gives the same tasks (ids and content hashes), so reruns resume;
- optional ``export(tasks, dest) -> (written, errors)``: what it writes loads back as the same tasks.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from clawsdk.errors import TaskFormatError
from clawsdk.tasks.model import Task
from clawsdk.tasks.sources import TaskSourcePlugin
from clawsdk.testing.report import Report


def _load(source: Any, path: Path) -> tuple[list[Task], list[TaskFormatError], BaseException | None]:
    tasks: list[Task] = []
    errors: list[TaskFormatError] = []
    try:
        for item in source.load(path):
            (tasks if isinstance(item, Task) else errors).append(item)
    except Exception as e:
        return tasks, errors, e
    return tasks, errors, None


def check_task_source(source: Any, sample: str | os.PathLike, *, broken: str | os.PathLike | None = None,
                      name: str | None = None) -> Report:
    """Check `source` on `sample` (a location holding good tasks) and optionally `broken` (bad ones)."""
    sample = Path(sample)
    report = Report("task source", name or type(source).__name__)
    with tempfile.TemporaryDirectory(prefix="clawsdk-kit-") as tmp:
        empty, missing = Path(tmp) / "empty", Path(tmp) / "no-such-place"
        empty.mkdir()
        for what, path, want in (("detect(sample)", sample, True), ("detect(empty folder)", empty, False),
                                 ("detect(missing path)", missing, False)):
            try:
                got = source.detect(path)
                report.add(what, got is want, f"returned {got!r}, expected {want}")
            except Exception as e:
                report.add(what, False, f"raised {type(e).__name__}: {e} (detect must not raise)")

        tasks, errors, crash = _load(source, sample)
        report.add("load(sample) does not raise", crash is None, f"{type(crash).__name__}: {crash}")
        report.add("load(sample) yields tasks", bool(tasks) and not errors,
                   f"{len(tasks)} task(s), {len(errors)} error(s): {errors[:1]}")
        ids = [t.id for t in tasks]
        report.add("task ids are unique", len(ids) == len(set(ids)), f"repeated: {sorted({i for i in ids if ids.count(i) > 1})}")
        again, _, _ = _load(source, sample)
        report.add("loading twice gives the same tasks", [(t.id, t.hash) for t in again] == [(t.id, t.hash) for t in tasks],
                   "ids or content hashes differ between two loads of the same input")

        _, errs, crash = _load(source, missing)
        report.add("load(missing path) yields a TaskFormatError naming it",
                   crash is None and len(errs) == 1 and str(missing) in errs[0].path,
                   f"raised {type(crash).__name__}: {crash}" if crash else f"yielded {errs!r}")

        if broken is not None:
            broken = Path(broken)
            _good, errs, crash = _load(source, broken)
            report.add("load(broken) does not raise", crash is None, f"{type(crash).__name__}: {crash}")
            inside = all(Path(e.path).resolve().is_relative_to(broken.resolve()) for e in errs)
            report.add("each unreadable task is a TaskFormatError naming its file", bool(errs) and inside,
                       f"errors: {[e.path for e in errs]} (want paths under {broken})")

        writer = TaskSourcePlugin.of(source)
        if writer.writes and tasks:
            dest = Path(tmp) / ("export.jsonl" if sample.is_file() else "export")
            written, refused = writer.export(tasks, dest)
            back, errs, crash = _load(source, dest)
            original = {t.id: t.hash for t in tasks}
            same = all(original.get(t.id) == t.hash for t in back)
            report.add("export writes what load reads back, unchanged",
                       crash is None and not errs and written == len(back) and same,
                       f"wrote {written}, refused {len(refused)}, read back {len(back)} tasks "
                       f"({'changed' if not same else errs[:1] or crash})")
    return report


__all__ = ["check_task_source"]
