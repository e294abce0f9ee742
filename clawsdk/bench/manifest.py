"""The benchmark manifest: a frozen, versioned list of tasks (by content hash) with their weights.

A manifest is what makes two runs comparable: the same task hashes, categories, weights and
judge model. It is a JSON file carrying `schema_version`; a reader refuses a version newer
than it knows rather than silently misreading it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clawsdk.errors import ClawError, TaskFormatError
from clawsdk.tasks.reading import parse_json

MANIFEST_SCHEMA_VERSION = 1
MANIFEST_KIND = "clawsdk-benchmark"
#: samples per task a manifest may ask for: past it a run's rollout list alone would not fit in memory
#: (and 1e30 overflowed SQLite's INTEGER); `clawsdk run -k` has the same bound
MAX_SAMPLES = 100_000


class ManifestError(ClawError):
    """A manifest that cannot be read or does not fit the tasks it names."""


class BenchTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hash: str = Field(min_length=16, description="Task.hash: what the task is, not what it is called")
    id: str
    category: str | None = None
    #: finite and bounded: an infinite weight (1e999 is valid JSON) or a sum past float's range makes every
    #: weighted score NaN
    weight: float = Field(1.0, gt=0, le=1e9, allow_inf_nan=False)
    #: measured when the benchmark was built: mean pass rate over the build runs
    pass_rate: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)


class Manifest(BaseModel):
    """A benchmark: its tasks, how they are weighted, and what scores them."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = MANIFEST_SCHEMA_VERSION
    kind: str = MANIFEST_KIND
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    description: str = ""
    #: the model behind rubric/hybrid verifiers; None when every verifier is code
    judge_model: str | None = None
    #: samples per task the benchmark is meant to be run with (`bench run -k` defaults to it)
    samples: int = Field(1, ge=1, le=MAX_SAMPLES)
    #: task specs the tasks were read from (SOURCE:PATH), so `bench run` can find them again
    sources: list[str] = Field(default_factory=list)
    tasks: list[BenchTask]
    #: how it was built: parameters, runs measured, what was dropped and why
    build: dict[str, Any] = Field(default_factory=dict)

    @field_validator("schema_version")
    @classmethod
    def _known(cls, v: int) -> int:
        if v > MANIFEST_SCHEMA_VERSION:
            raise ValueError(f"benchmark manifest schema_version {v} is newer than this clawsdk reads "
                             f"({MANIFEST_SCHEMA_VERSION}); upgrade clawsdk")
        return v

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v != MANIFEST_KIND:
            raise ValueError(f"kind is {v!r}, not {MANIFEST_KIND!r}: this is not a clawsdk benchmark manifest")
        return v

    @field_validator("tasks")
    @classmethod
    def _unique(cls, tasks: list[BenchTask]) -> list[BenchTask]:
        if not tasks:
            raise ValueError("a benchmark needs at least one task")
        seen: dict[str, str] = {}
        for t in tasks:
            if t.hash in seen:
                raise ValueError(f"task {t.id!r} has the same hash as task {seen[t.hash]!r}")
            seen[t.hash] = t.id
        ids = [t.id for t in tasks]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"task ids appear twice: {dup}")
        return tasks

    @property
    def hash(self) -> str:
        """sha256 over what decides a score: tasks, weights, judge. Not the build log or dates."""
        body = {"name": self.name, "version": self.version, "judge_model": self.judge_model,
                "tasks": sorted([t.hash, t.category, t.weight] for t in self.tasks)}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def weights(self) -> dict[str, float]:
        return {t.hash: t.weight for t in self.tasks}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=2) + "\n")
        return path


def looks_like_manifest(path: str | Path) -> bool:
    p = Path(path)
    if not p.is_file() or p.suffix.lower() != ".json":
        return False
    try:
        # nesting bounded: json.loads recursed out past about 1,000 levels
        head = parse_json(p.read_text(), str(p))
    except (OSError, ValueError, TaskFormatError):
        return False
    return isinstance(head, dict) and head.get("kind") == MANIFEST_KIND


def load_manifest(path: str | Path) -> Manifest:
    """Read a manifest file; a clear error names the file and the field at fault."""
    p = Path(path)
    if p.exists() and not p.is_dir() and not p.is_file():  # a fifo would block the read for ever
        raise ManifestError(f"{p}: not a regular file (a fifo, socket or device); pass the manifest's JSON file")
    try:
        raw = parse_json(p.read_text(), str(p))
    except FileNotFoundError:
        raise ManifestError(f"{p}: no such benchmark manifest") from None
    except TaskFormatError as e:  # names the file: invalid, nested too deep, a key twice
        raise ManifestError(str(e)) from None
    except ValueError as e:
        raise ManifestError(f"{p}: not JSON ({e})") from None
    except OSError as e:
        raise ManifestError(f"{p}: cannot be read ({e.strerror or e}); pass the manifest's JSON file") \
            from None
    if not isinstance(raw, dict):
        raise ManifestError(f"{p}: a benchmark manifest is a JSON object")
    return parse_manifest(raw, str(p))


def parse_manifest(raw: dict, where: str = "manifest") -> Manifest:
    try:
        return Manifest.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "(top level)"
        more = f" (and {len(e.errors()) - 1} more problems)" if len(e.errors()) > 1 else ""
        raise ManifestError(f"{where}: {field}: {first['msg']}{more}") from None
