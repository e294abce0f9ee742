"""Decontamination: keep tasks a model may have trained on out of a benchmark.

The tests, against a *training export* (or a set of held-out tasks): the same task (by content
hash), or a near-duplicate. A near-duplicate shares its content with a task of the set, whatever
its wording: all its hidden files (the expected answers), its whole workspace or its reference
solution (`fingerprint`; known only where the set holds whole tasks: `add_task`, dataset exports
in the store); or, where the content cannot tell, its instruction is close to one of the set's
(Jaccard similarity of word 3-gram shingles at or above a threshold). The Jaccard is exact, not a
MinHash estimate: an inverted index from shingle to training item means each benchmark candidate is
compared only with the training items that share a shingle with it, which is fast enough for tens of
thousands of instructions.

A training export is read from files in whichever shape they come:

- JSONL, one item a line: an object with a task hash (`task_hash`, `hash`, or the same
  under `metadata`/`clawsdk`) and/or an instruction (`instruction`, `prompt`,
  `user_query`, `query`, or the first user turn of `messages`); a bare JSON string is a
  hash if it looks like one, else an instruction;
- a JSON list of such items;
- plain text: a line of 64 hex digits is a hash, any other non-empty line an instruction.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawsdk.bench.manifest import ManifestError
from clawsdk.errors import TaskFormatError
from clawsdk.tasks.reading import parse_json

_HASH = re.compile(r"^[0-9a-f]{64}$")
_WORD = re.compile(r"[a-z0-9]+")
SHINGLE = 3
DEFAULT_THRESHOLD = 0.7
#: content shorter than this (bytes, once normalized) is left out of a task's fingerprint: an empty
#: `__init__.py` or a one-line answer (a time slot) is shared by distinct tasks by chance
MIN_CONTENT = 64


def shingles(text: str, n: int = SHINGLE) -> frozenset[str]:
    """Word n-grams of the lower-cased text (all words when it is shorter than n)."""
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _content(data: bytes) -> bytes | None:
    """A file's content as compared: text with its line ends, trailing spaces and surrounding blank lines
    normalized, and a JSON object or array dumped canonically; None when under MIN_CONTENT bytes."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        body = data
    else:
        text = "\n".join(line.rstrip() for line in text.strip().splitlines())
        if text[:1] in ("{", "["):
            try:
                text = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            except ValueError:
                pass
        body = text.encode("utf-8")
    return body if len(body) >= MIN_CONTENT else None


def _digest(parts: Iterable[bytes]) -> str:
    return hashlib.sha256(b"\0".join(sorted(hashlib.sha256(p).digest() for p in parts))).hexdigest()


def fingerprint(task: Any) -> dict[str, str]:
    """signal -> digest of the content a near-duplicate shares: `hidden` (the hidden files), `workspace`
    (the whole initial workspace), `solution` (the reference solution). Files compare by content, not
    name; content under MIN_CONTENT bytes is left out, and a signal with nothing left is absent."""
    out = {}
    for signal, files in (("hidden", task.hidden), ("workspace", task.workspace)):
        kept = [c for f in files if (c := _content(f.data)) is not None]
        if kept:
            out[signal] = _digest(kept)
    if task.solution:
        calls = json.dumps([c.model_dump(mode="json") for c in task.solution]).encode("utf-8")
        if (c := _content(calls)) is not None:
            out["solution"] = _digest([c])
    return out


@dataclass
class Match:
    """Which task of the set a near-duplicate is one of (`other`: its id, or its instruction's start,
    quoted), by which signals, and what it shares (`detail`)."""

    other: str
    signals: tuple[str, ...]  # "hidden", "workspace", "solution" (in this order), or "instruction"
    detail: str


@dataclass
class TrainingSet:
    """Hashes, instructions and (where whole tasks were added) content a model was trained on."""

    hashes: set[str] = field(default_factory=set)
    instructions: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index: dict[str, list[int]] = defaultdict(list)
        self._shingles: list[frozenset[str]] = []
        self._labels: list[str] = []  # what a match names, one per instruction
        self._content: dict[tuple[str, str], str] = {}  # (signal, digest) -> the task's label
        self._signals: dict[int, frozenset[str]] = {}  # instruction -> the content signals its task has
        for text in self.instructions:
            self._add_shingles(text)

    def _add_shingles(self, text: str, label: str | None = None) -> None:
        sh = shingles(text)
        i = len(self._shingles)
        self._shingles.append(sh)
        self._labels.append(label or repr(text[:80].replace("\n", " ")))
        for s in sh:
            self._index[s].append(i)

    def add(self, hash_: str | None = None, instruction: str | None = None, label: str | None = None) -> bool:
        """Add an item; True when it had an instruction to index."""
        if hash_:
            self.hashes.add(hash_.lower())
        if instruction and instruction.strip():
            self.instructions.append(instruction)
            self._add_shingles(instruction, label)
            return True
        return False

    def add_task(self, task: Any) -> None:
        """Add a whole task: its hash, its instruction and its content (`fingerprint`)."""
        label, prints = f"task {task.id}", fingerprint(task)
        if self.add(task.hash, task.instruction, label):
            self._signals[len(self._shingles) - 1] = frozenset(prints)
        for key in prints.items():
            self._content.setdefault(key, label)

    def near_duplicate(self, task: Any, threshold: float = DEFAULT_THRESHOLD) -> Match | None:
        """The task of the set `task` is a near-duplicate of, and by which signals: the content it shares
        (`fingerprint`), else an instruction at or above `threshold` where the content cannot tell (one of
        the two has none of the other's signals: an item of a training export, a task without files). Two
        tasks whose files were compared and differ are distinct whatever their words: a procedural family
        words its tasks alike (the instructions of two mail-contacts tasks are at Jaccard 0.92). None when
        it is no task's near-duplicate; the same task (its hash) is for the caller to test first."""
        mine = fingerprint(task)
        found: dict[str, list[str]] = {}
        for signal, digest in mine.items():
            if (label := self._content.get((signal, digest))) is not None:
                found.setdefault(label, []).append(signal)
        sim = 0.0
        if not found:
            for similarity, i in self._similar(task.instruction, threshold):
                if not mine.keys() & self._signals.get(i, frozenset()):
                    found[self._labels[i]] = ["instruction"]
                    sim = similarity
                    break
        if not found:
            return None
        label, signals = max(found.items(), key=lambda kv: len(kv[1]))  # the first with the most signals
        shared = []
        for s in signals:
            if s == "hidden":
                paths = [f.path for f in task.hidden if _content(f.data) is not None]
                shared.append(f"hidden files ({', '.join(paths)})")
            elif s == "workspace":
                n = sum(_content(f.data) is not None for f in task.workspace)
                shared.append(f"workspace ({n} file{'s' if n != 1 else ''})")
            elif s == "solution":
                shared.append("reference solution")
        detail = f"the same {', '.join(shared)}" if shared else ""
        if "instruction" in signals:
            detail += ("; " if detail else "") + f"instruction Jaccard {sim:.2f}"
        return Match(label.removeprefix("task "), tuple(signals), detail)

    def _similarities(self, instruction: str) -> dict[int, float]:
        """The Jaccard similarity of `instruction` to each training instruction sharing a shingle with it."""
        index = self._index
        mine = shingles(instruction)
        shared: Counter[int] = Counter()
        for s in mine:
            for i in index.get(s, ()):
                shared[i] += 1
        return {i: inter / (len(mine) + len(self._shingles[i]) - inter) for i, inter in shared.items()}

    def _similar(self, instruction: str, threshold: float) -> list[tuple[float, int]]:
        """(similarity, which) of the training instructions at or above `threshold`, the closest first."""
        return sorted(((sim, i) for i, sim in self._similarities(instruction).items() if sim >= threshold),
                      key=lambda x: (-x[0], x[1]))

    def nearest(self, instruction: str) -> tuple[float, int | None]:
        """The highest Jaccard similarity of `instruction` to a training instruction, and which."""
        best, which = 0.0, None
        for i, sim in self._similarities(instruction).items():
            if sim > best:
                best, which = sim, i
        return best, which


def _item(obj: object) -> tuple[str | None, str | None]:
    """(hash, instruction) of one export item."""
    if isinstance(obj, str):
        s = obj.strip()
        return (s.lower(), None) if _HASH.match(s.lower()) else (None, s)
    if not isinstance(obj, dict):
        return None, None
    h = None
    for where in (obj, obj.get("metadata") or {}, obj.get("clawsdk") or {}):
        if isinstance(where, dict):
            for key in ("task_hash", "hash"):
                v = where.get(key)
                if isinstance(v, str) and _HASH.match(v.lower()):
                    h = v.lower()
                    break
        if h:
            break
    text = None
    for key in ("instruction", "prompt", "user_query", "query"):
        v = obj.get(key)
        if isinstance(v, str) and v.strip():
            text = v
            break
    if text is None and isinstance(obj.get("messages"), list):
        for m in obj["messages"]:
            if isinstance(m, dict) and m.get("role") == "user":
                content = m.get("content")
                if isinstance(content, list):  # content parts
                    content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
                if isinstance(content, str) and content.strip():
                    text = content
                break
    return h, text


def read_training(paths: Iterable[str | Path]) -> TrainingSet:
    """Read training exports (see the module docstring for the shapes understood)."""
    ts = TrainingSet()
    for path in paths:
        p = Path(path)
        what = ("a training export: JSONL (task_hash/instruction/prompt/messages per line), a JSON list, "
                "or lines of hashes")
        try:
            if p.exists() and not p.is_dir() and not p.is_file():  # a fifo would block the read for ever
                raise ManifestError(f"{p}: not a regular file (a fifo, socket or device); pass {what}")
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ManifestError(f"{p}: no such training export") from None
        except IsADirectoryError:
            raise ManifestError(f"{p}: is a folder; pass {what} (a dataset export's data.jsonl)") from None
        except UnicodeDecodeError as e:
            raise ManifestError(f"{p}: not UTF-8 text (byte {e.start}): a binary file? pass {what}") from None
        except OSError as e:
            raise ManifestError(f"{p}: cannot be read ({e.strerror or e}); pass {what}") from None
        ts.sources.append(str(p))
        before = (len(ts.hashes), len(ts.instructions))
        stripped = text.lstrip()
        if stripped.startswith("["):
            try:
                items = parse_json(text, str(p))
            except TaskFormatError as e:
                raise ManifestError(f"{p}: starts like a JSON list but is not one ({e.message})") from None
            for obj in items:
                ts.add(*_item(obj))
        else:
            # lines end at "\n" only: splitlines() also broke lines at U+2028 and U+0085, which a JSON string
            # may hold as they are (an instruction with a line separator), and an export's row read as broken
            for lineno, line in enumerate(text.split("\n"), 1):
                line = line.strip()
                if not line:
                    continue
                if line.startswith(("{", '"')):
                    try:
                        obj = parse_json(line, f"{p}:{lineno}")
                    except TaskFormatError as e:
                        raise ManifestError(f"{p}:{lineno}: not valid JSON ({e.message})") from None
                else:
                    obj = line
                ts.add(*_item(obj))
        if (len(ts.hashes), len(ts.instructions)) == before:
            raise ManifestError(f"{p}: found no task hash or instruction in it; expected JSONL with "
                                "task_hash/instruction/prompt/messages, or lines of hashes")
    return ts


def pool_duplicates(tasks: list[Any], threshold: float = DEFAULT_THRESHOLD) -> dict[str, tuple[str, str]]:
    """Within a pool, the later near-duplicates of earlier tasks, judged as `TrainingSet.near_duplicate` judges
    them (by content; by instruction only where the content cannot tell): hash -> (the kept task's id, what
    they share). By instruction alone, 515 of 600 distinct procedural tasks were dropped: a family words its
    tasks alike."""
    kept = TrainingSet()
    out: dict[str, tuple[str, str]] = {}
    for t in tasks:
        m = kept.near_duplicate(t, threshold)
        if m is not None:
            out[t.hash] = (m.other, m.detail)
            continue
        kept.add_task(t)
    return out


def read_datasets(store, dataset_ids: Iterable[str], into: TrainingSet | None = None) -> TrainingSet:
    """Training exports recorded in the store (`datasets` / `dataset_rows`): their task hashes, and those
    tasks from the store's `tasks` table (their instructions and content) for the near-duplicate test."""
    ts = into or TrainingSet()
    if "dataset_rows" not in store.db.table_names():
        raise ManifestError(f"{store.path} records no dataset exports (no dataset_rows table)")
    for ds in dataset_ids:
        rows = store.query(
            """SELECT DISTINCT r.task_hash, t.instruction FROM dataset_rows r
               LEFT JOIN tasks t ON t.hash = r.task_hash WHERE r.dataset_id = ?""", [ds])
        if not rows:
            known = [r["id"] for r in store.query("SELECT id FROM datasets ORDER BY created_at DESC LIMIT 5")]
            raise ManifestError(f"no dataset {ds!r} with rows in {store.path}"
                                + (f" (recent: {', '.join(known)})" if known else ""))
        for r in rows:
            task = store.task(r["task_hash"]) if r["instruction"] is not None else None
            if task is not None:
                ts.add_task(task)
            else:
                ts.add(r["task_hash"], r["instruction"])
        ts.sources.append(f"dataset {ds}")
    return ts
