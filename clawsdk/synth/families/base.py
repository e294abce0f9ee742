"""What a procedural task family is, and how one generated task becomes a Task.

A family turns (rng, level, template) into a `Spec`: the instruction, workspace files, hidden
files, declarative checks and a reference solution as core-tool calls. Everything comes from
the rng, so one (family, seed, index) always gives the same task.

A *template* is one kind of work inside a family (a program with one kind of bug, a renaming
rule built from particular fields); the parameters (names, numbers, dates, sizes) vary within
it. Each task records its template in its provenance, so train and held-out splits can be cut
by template and not only by parameters.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from clawsdk.tasks.model import File, Limits, Task, ToolCall, VerifierSpec

LEVELS = {"easy": 1, "medium": 2, "hard": 3}
LEVEL_NAMES = {v: k for k, v in LEVELS.items()}


@dataclass
class Spec:
    """One generated task, before it becomes a Task."""

    instruction: str
    workspace: dict[str, str]
    checks: list[dict[str, Any]]
    solution: list[dict[str, Any]]
    hidden: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    max_tool_calls: int = 60
    template: str = "default"
    detail: dict[str, Any] = field(default_factory=dict)  # extra provenance (e.g. which bugs)


class Family:
    """A generator of one kind of task. Subclasses set the class attributes and `build`."""

    name: str = ""
    category: str = ""
    subcategory: str = ""
    summary: str = ""

    def templates(self, level: int) -> tuple[str, ...]:
        """The kinds of work this family makes at a level; a family with one kind says 'default'."""
        return ("default",)

    def build(self, rng: random.Random, level: int, template: str) -> Spec:
        raise NotImplementedError

    def task(self, seed: int, index: int, level: int, template: str | None = None) -> Task:
        """The task for (seed, index) at difficulty level 1..3, of a template the rng picks unless given;
        deterministic."""
        if level not in LEVEL_NAMES:
            raise ValueError(f"difficulty level must be 1, 2 or 3, not {level!r}")
        choices = self.templates(level)
        task_id = f"{self.name}-{seed}-{LEVEL_NAMES[level][0]}{index:05d}"
        if template is None:
            rng = random.Random(f"{self.name}:{seed}:{index}:{level}")
            template = rng.choice(choices) if len(choices) > 1 else choices[0]
        elif template not in choices:
            raise LookupError(f"family {self.name} has no template {template!r} at level {level} "
                              f"(templates: {', '.join(choices)})")
        else:  # a forced template is its own stream: (seed, index) of two templates are two tasks
            rng = random.Random(f"{self.name}:{seed}:{index}:{level}:{template}")
            task_id += "-" + "".join(c if c.isalnum() else "-" for c in template)
        spec = self.build(rng, level, template)
        return Task(
            id=task_id,
            instruction=spec.instruction.strip() + "\n",
            category=self.category,
            difficulty=LEVEL_NAMES[level],
            tags=[self.name, *spec.tags],
            tools=["core"],
            workspace=[File(path=p, text=t) for p, t in sorted(spec.workspace.items())],
            hidden=[File(path=p, text=t) for p, t in sorted(spec.hidden.items())],
            solution=[ToolCall.model_validate(s) for s in spec.solution],
            verifier=VerifierSpec(type="checks", checks=spec.checks),
            limits=Limits(timeout_s=600, max_tool_calls=spec.max_tool_calls),
            provenance={"source": "procedural", "route": "procedural", "family": self.name, "seed": seed,
                        "index": index, "level": level, "template": f"{self.name}/{spec.template}",
                        **spec.detail},
            metadata={"subcategory": self.subcategory},
        )


# ---- helpers the families share -------------------------------------------------------------


def read(path: str) -> dict[str, Any]:
    return {"tool": "read", "args": {"path": path}}


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool": "write", "args": {"path": path, "content": content}}


def ls(path: str = ".", recursive: bool = False) -> dict[str, Any]:
    args: dict[str, Any] = {"path": path}
    if recursive:
        args["recursive"] = True
    return {"tool": "ls", "args": args}


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"tool": "edit", "args": {"path": path, "old_text": old, "new_text": new}}


def exec_(command: str) -> dict[str, Any]:
    return {"tool": "exec", "args": {"command": command}}


def dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def json_check(path: str, expected_file: str, **extra: Any) -> list[dict[str, Any]]:
    """The usual pair: the deliverable exists, and it equals the hidden expected JSON."""
    return _pair("json_equals", path, expected_file, **extra)


def csv_check(path: str, expected_file: str, **extra: Any) -> list[dict[str, Any]]:
    """The deliverable exists, and its rows equal the hidden expected CSV."""
    return _pair("csv_equals", path, expected_file, **extra)


def _pair(kind: str, path: str, expected_file: str, **extra: Any) -> list[dict[str, Any]]:
    # the existence check scores nothing (weight 0) and stays as a sub-score to read: at weight 1 beside
    # the answer's 3, any file of that name (empty, `{}`, a copy of the input) scored 0.25
    return [
        {"type": "file_exists", "path": path, "weight": 0},
        {"type": kind, "name": f"{path} is correct", "path": path, "expected_file": expected_file,
         "weight": 3, **extra},
    ]
