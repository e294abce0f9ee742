"""How many different kinds of work a set of tasks holds: templates, and reference solutions with
their parameters abstracted away.

Task hashes differ whenever a name or a number does, so they count parameters, not kinds of
work. Here every number becomes N and every word that is not Python or shell vocabulary
becomes ID (a run of such words, `so_far` or `Quarterly Budget Review`, one ID), the
separators between them (`_`, `-`, `.`) one symbol, and a solution is the set of its abstracted
lines: a chain of 4 or 9 `mv` commands of the same shape is one solution. Two tasks that differ
only in names, numbers, dates or sizes then have the same abstract solution; a different kind of
fix or rule gives a different one.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from clawsdk.tasks.model import Task

# words that carry structure: Python's own, and the shell commands reference solutions use
VOCABULARY = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {
    "mv", "mkdir", "cp", "rm", "cat", "ls", "python", "unittest", "discover", "tail", "sed", "grep", "echo", "self"}

_NUMBER = re.compile(r"\d+")
_WORD = re.compile(r"[A-Za-z]+")
_SEPARATOR = re.compile(r"(?<=[DN])[_\-.](?=[IN])")  # between two abstracted tokens
_RUN = re.compile(r"ID(?:[ ~]ID)+")


def abstract(text: str) -> str:
    """text with numbers as N, non-vocabulary words as ID (runs of them as one ID), and the separators
    between them (_ - .) as ~."""
    text = _NUMBER.sub("N", text)
    text = _WORD.sub(lambda m: m.group() if m.group() in VOCABULARY or m.group() == "N" else "ID", text)
    text = _SEPARATOR.sub("~", text)
    return _RUN.sub("ID", text)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif value is not None:
        yield str(value)


def abstract_solution(task: Task) -> frozenset[tuple[str, str]]:
    """The task's reference solution as a set of (tool, abstracted line) pairs."""
    out: set[tuple[str, str]] = set()
    for call in task.solution or []:
        for text in _strings(call.args):
            for line in re.split(r"\n| && ", text):
                if line.strip():
                    out.add((call.tool, abstract(line.strip())))
    return frozenset(out)


def template_of(task: Task) -> str:
    return str(task.provenance.get("template") or f"{task.provenance.get('family', task.category)}/default")


def distinctness(tasks: Iterable[Task]) -> dict[str, dict[str, int]]:
    """Per family: tasks, distinct templates, distinct abstract solutions, distinct hashes, and the
    templates whose abstract solutions no other template of the family shares (`separable`)."""
    by_family: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        by_family[str(t.provenance.get("family", t.category))].append(t)
    report = {}
    for family, group in sorted(by_family.items()):
        per_template: dict[str, set] = defaultdict(set)
        for t in group:
            per_template[template_of(t)].add(abstract_solution(t))
        owners: dict[frozenset, set[str]] = defaultdict(set)
        for name, sols in per_template.items():
            for s in sols:
                owners[s].add(name)
        separable = sum(all(len(owners[s]) == 1 for s in sols) for sols in per_template.values())
        report[family] = {"tasks": len(group), "hashes": len({t.hash for t in group}),
                          "templates": len(per_template), "solutions": len(owners), "separable": separable}
    return report
