"""The task source `procedural:FAMILY?n=..&seed=..&difficulty=..` (FAMILY may be 'all' or a list): tasks
from the procedural families of clawsdk/synth, never detected from a path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

from clawsdk.errors import TaskFormatError
from clawsdk.hookspecs import hookimpl
from clawsdk.tasks.model import Task


class ProceduralSource:
    """procedural:FAMILIES?n=10&seed=1&difficulty=mixed -> generated tasks (never detected from a path)."""

    def detect(self, path: Path) -> bool:
        return False

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]:
        from clawsdk.synth.families import resolve_families
        from clawsdk.synth.procedural import generate

        spec = str(path)
        names, _, query = spec.partition("?")
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        unknown = set(params) - {"n", "seed", "difficulty"}
        try:
            if unknown:
                raise ValueError(f"unknown parameter(s) {sorted(unknown)}; use n, seed, difficulty")
            fams = resolve_families(names or "all")
            yield from generate(fams, int(params.get("n", 10)), int(params.get("seed", 1)),
                                params.get("difficulty", "mixed"))
        except (LookupError, ValueError) as e:
            yield TaskFormatError(f"procedural:{spec}", str(e))


@hookimpl
def register_task_sources(register):
    register("procedural", ProceduralSource())
