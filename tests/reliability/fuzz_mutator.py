"""A seeded mutator of task folders in every format, and the watch kept while one is loaded.

Each mutation starts from a small valid task (native, ClawGym folder, syn_task.jsonl line,
PinchBench markdown with an asset) and applies one to three operators: byte edits of the task
file, replacing a value deep in its fields with a hostile one, or replacing a file with a
symlink out of the task, a fifo, a folder, an empty or huge file. Canary files sit outside the
task folder; a load must never read them.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import stat
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from clawsdk_plugins.sources.clawgym import REWARD_SH

from clawsdk.errors import TaskFormatError
from clawsdk.tasks.sources import load_tasks

SECRET = "CANARY-7f3a-outside-the-task"
PER_INPUT_S = 10.0  # a load that takes longer is a hang

GRADE = ("## Automated Checks\n\n```python\ndef grade(transcript, workspace_path):\n"
         "    from pathlib import Path\n    p = Path(workspace_path) / 'out.txt'\n"
         "    return {'written': float(p.exists())}\n```\n")

NATIVE_SPEC = {
    "id": "fz", "category": "systems & automation", "difficulty": "easy", "tags": ["fuzz"],
    "instruction": "Read notes/in.txt and write out.txt with its first line.",
    "limits": {"timeout_s": 60, "max_tool_calls": 20},
    "metadata": {"origin": {"k": [1, 2, {"v": "x"}]}},
    "verifier": {"type": "checks", "pass_threshold": 1.0, "checks": [
        {"type": "file_exists", "path": "out.txt"},
        {"type": "regex", "path": "out.txt", "pattern": "^first", "flags": "m"},
        {"type": "json_equals", "path": "o.json", "expected_file": "expected.json", "subset": True},
        {"type": "command", "run": "test -s out.txt", "weight": 2}]},
}
CLAWGYM_ENTRY = {
    "task_id": "task_fz", "user_query": "Write reports/out.txt summarising input/data.csv.",
    "metadata": {"category": "", "grading_type": "automated"}, "input_mount_dir": "/root/.openclaw/workspace",
}
CHECK_PY = ("import json, sys\nfrom pathlib import Path\nws = Path(sys.argv[1])\n"
            "print(json.dumps({'out': float((ws / 'reports/out.txt').exists())}))\n")
JSONL_RECORD = {
    "prompt": "Write out/summary.md from input/a.csv.", "hook_code": CHECK_PY,
    "input_files": [{"file_path": "/root/.openclaw/workspace/input/a.csv", "content": "a,b\n1,2\n"}],
    "rules": [{"name": "summary", "file_path": "out/summary.md", "scores": {"0": "none", "1": "good"}}],
    "origin_template": "tmpl-1", "category": "reporting", "macro_category": "analysis & reasoning",
}
PINCH_FRONT = {"id": "task_fz", "name": "Fuzz", "category": "file_ops", "grading_type": "automated",
               "timeout_seconds": 60, "workspace_files": [{"source": "data.csv", "dest": "data.csv"},
                                                          {"path": "notes.txt", "content": "hello"}]}


def hostile_values(outside: Path) -> list[Any]:
    secret = str(outside / "secret.txt")
    return [
        None, True, 0, -1, 10**30, 1e308, float("inf"), "", " ", "\x00", "[", "(?P<", "*", "a" * 5000,
        "../../../../../../" + secret.lstrip("/"), secret, "/etc/passwd", "..", ".", "~/.ssh/id_rsa",
        "${HOME}", "{{x}}", "\u202e\u0000\ud7ff", [], {}, [None], {"": None}, [[[[[[[[]]]]]]]],
        {"type": "nope"}, {"type": "regex", "path": "x", "pattern": "["}, {"source": "../secret.txt", "dest": "s"},
        nested(150), nested(1000, dict_=True), list(range(50)),
    ]


def nested(depth: int, dict_: bool = False) -> Any:
    v: Any = "leaf"
    for _ in range(depth):
        v = {"k": v} if dict_ else [v]
    return v


# ---- seeds ---------------------------------------------------------------------------------


def seed_native(root: Path) -> tuple[str, Path]:
    t = root / "fz"
    (t / "workspace" / "notes").mkdir(parents=True)
    (t / "workspace" / "notes" / "in.txt").write_text("first line\nsecond\n")
    (t / "workspace" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (t / "workspace" / "run.sh").chmod(0o755)
    (t / "hidden").mkdir()
    (t / "hidden" / "expected.json").write_text('{"a": 1}\n')
    (t / "solution").mkdir()
    (t / "solution" / "steps.yaml").write_text(yaml.safe_dump([
        {"tool": "write", "args": {"path": "out.txt", "content": "first line\n"}},
        {"tool": "write", "args": {"path": "o.json", "content": '{"a": 1, "b": 2}'}}]))
    (t / "task.yaml").write_text(yaml.safe_dump(NATIVE_SPEC, sort_keys=False))
    return "native", t / "task.yaml"


def seed_clawgym(root: Path) -> tuple[str, Path]:
    t = root / "task_fz"
    (t / "input_files" / "input").mkdir(parents=True)
    (t / "input_files" / "input" / "data.csv").write_text("id,v\n1,2\n")
    (t / "reward").mkdir()
    (t / "reward" / "reward.sh").write_text(REWARD_SH)
    (t / "reward" / "check.py").write_text(CHECK_PY)
    (t / "data_entry.json").write_text(json.dumps(CLAWGYM_ENTRY, indent=2))
    return "clawgym", t / "data_entry.json"


def seed_jsonl(root: Path) -> tuple[str, Path]:
    p = root / "syn_task.jsonl"
    second = {**JSONL_RECORD, "prompt": "Another task.", "rules": None, "rule": "be concise"}
    p.write_text(json.dumps(JSONL_RECORD) + "\n" + json.dumps(second) + "\n")
    return "clawgym-jsonl", p


def seed_pinchbench(root: Path) -> tuple[str, Path]:
    (root / "tasks").mkdir()
    (root / "assets").mkdir()
    (root / "assets" / "data.csv").write_text("region,revenue\nEast,10\n")
    md = root / "tasks" / "task_fz.md"
    md.write_text("---\n" + yaml.safe_dump(PINCH_FRONT, sort_keys=False) + "---\n\n## Prompt\n\nWrite out.txt.\n\n"
                  "## Expected Behavior\n\nThe agent writes out.txt.\n\n" + GRADE)
    return "pinchbench", md


SEEDS = {"native": seed_native, "clawgym": seed_clawgym, "clawgym-jsonl": seed_jsonl, "pinchbench": seed_pinchbench}


def argument_of(fmt: str, base: Path, main: Path) -> Path:
    return {"pinchbench": base / "tasks", "clawgym-jsonl": main}.get(fmt, base)


def spec_of(fmt: str, base: Path, main: Path) -> str:
    """The TASKS argument that loads the mutated input."""
    if fmt == "pinchbench":
        return f"pinchbench:{base / 'tasks'}"
    if fmt == "clawgym-jsonl":
        return f"clawgym-jsonl:{main}"
    return f"{fmt}:{base}"


# ---- operators -----------------------------------------------------------------------------


def _structured(fmt: str, main: Path) -> tuple[Any, str] | None:
    text = main.read_text(encoding="utf-8", errors="replace")
    try:
        if fmt == "native":
            return yaml.safe_load(text), "yaml"
        if fmt == "clawgym":
            return json.loads(text), "json"
        if fmt == "clawgym-jsonl":
            return json.loads(text.splitlines()[0]), "jsonl"
        front = text.split("---\n")[1]
        return yaml.safe_load(front), "front"
    except Exception:  # an earlier operator broke it; edit bytes instead
        return None


def _write_structured(fmt: str, main: Path, data: Any, kind: str) -> None:
    text = main.read_text(encoding="utf-8", errors="replace")
    if kind == "yaml":
        main.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    elif kind == "json":
        main.write_text(json.dumps(data, ensure_ascii=False))
    elif kind == "jsonl":
        rest = text.splitlines()[1:]
        main.write_text("\n".join([json.dumps(data, ensure_ascii=False), *rest]) + "\n")
    else:
        parts = text.split("---\n")
        parts[1] = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        main.write_text("---\n".join(parts))


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def op_value(rng: random.Random, fmt: str, base: Path, main: Path, outside: Path) -> str:
    parsed = _structured(fmt, main)
    if parsed is None or not isinstance(parsed[0], (dict, list)):
        return op_bytes(rng, fmt, base, main, outside)
    data, kind = parsed
    path = rng.choice(_paths(data)[1:] or [()])
    if not path:
        return op_bytes(rng, fmt, base, main, outside)
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    choice = rng.random()
    if choice < 0.15 and isinstance(parent, dict):
        del parent[path[-1]]
        what = "delete"
    elif choice < 0.25 and isinstance(parent, dict):
        parent[rng.choice(["bogus", "workspace", "hidden", "clawsdk", "rule", "grading_weights", "solution",
                           "tool_policy", "schema_version"])] = rng.choice(hostile_values(outside))
        what = "add"
    else:
        parent[path[-1]] = rng.choice(hostile_values(outside))
        what = "replace"
    try:
        _write_structured(fmt, main, data, kind)
    except Exception:  # a value YAML cannot dump (e.g. a lone surrogate)
        return op_bytes(rng, fmt, base, main, outside)
    return f"value:{what}:{'.'.join(map(str, path))[:40]}"


TOKENS = [b"[", b"]", b"{", b"}", b":", b"- ", b"---\n", b"```", b"\n## Prompt\n", b"&a ", b"*a", b"!!python/object:os.system ",
          b"\x00", b"\xff\xfe", b"\t", b"'", b'"', b"\\", b"%YAML 1.1\n", b"? ", b"|", b">", b"#", b"\r\n",
          b"[" * 600, b"{a: " * 300, b"&r [*r]", b"&s {k: *s}",
          b"&l0 [x, x, x, x, x, x, x, x] " + b" ".join(b"&l%d [%s]" % (i, b", ".join([b"*l%d" % (i - 1)] * 8))
                                                     for i in range(1, 9))]


def op_bytes(rng: random.Random, fmt: str, base: Path, main: Path, outside: Path) -> str:
    data = bytearray(main.read_bytes())
    kind = rng.choice(["flip", "insert", "delete", "truncate", "duplicate"])
    pos = rng.randrange(len(data) + 1) if data else 0
    if kind == "flip" and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == "insert":
        data[pos:pos] = rng.choice(TOKENS)
    elif kind == "delete" and data:
        del data[pos:pos + rng.randint(1, 40)]
    elif kind == "truncate":
        del data[pos:]
    else:
        span = bytes(data[pos:pos + rng.randint(1, 200)])
        data[pos:pos] = span * rng.randint(2, 20)
    main.write_bytes(bytes(data))
    return f"bytes:{kind}"


def _files(base: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        out += [Path(dirpath) / n for n in dirnames + filenames]
    return sorted(out)


def op_fs(rng: random.Random, fmt: str, base: Path, main: Path, outside: Path) -> str:
    target = rng.choice(_files(base))
    kinds = ["symlink_out", "symlink_dir_out", "dangling", "fifo", "folder", "empty", "loop", "big", "add_symlink",
             "chmod0"]
    if target == argument_of(fmt, base, main):
        # the TASKS argument itself is followed like any path a user names: no links there
        kinds = ["fifo", "folder", "empty", "big", "chmod0"]
    kind = rng.choice(kinds)
    if kind == "add_symlink":
        where = target if target.is_dir() and not target.is_symlink() else target.parent
        os.symlink(rng.choice([outside / "secret.txt", outside, Path("/etc")]), where / "sneaky")
        return f"fs:add_symlink:{where.name}"
    _remove(target)
    if kind == "symlink_out":
        os.symlink(outside / "secret.txt", target)
    elif kind == "symlink_dir_out":
        os.symlink(outside, target)
    elif kind == "dangling":
        os.symlink(outside / "missing", target)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "empty":
        target.write_bytes(b"")
    elif kind == "loop":
        os.symlink(target.name, target)
    elif kind == "big":
        with target.open("wb") as f:
            f.truncate(9 * 2**20)  # sparse: over the task-file limit, costs no disk
    else:
        target.write_text("x")
        target.chmod(0)
    return f"fs:{kind}:{target.name}"


def _remove(p: Path) -> None:
    if p.is_symlink() or not p.is_dir():
        p.unlink()
    else:
        shutil.rmtree(p)


OPERATORS = [(op_value, 5), (op_bytes, 3), (op_fs, 2)]


def mutate(rng: random.Random, fmt: str, base: Path, main: Path, outside: Path) -> list[str]:
    ops = [op for op, w in OPERATORS for _ in range(w)]
    applied = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if not main.exists() or main.is_symlink() or not main.is_file() or stat.S_ISFIFO(main.lstat().st_mode):
            break  # the main file itself was replaced: nothing more to edit
        applied.append(rng.choice(ops)(rng, fmt, base, main, outside))
    return applied


# ---- the watch -----------------------------------------------------------------------------


class _Hang(BaseException):
    pass


@dataclass
class Watch:
    """Counts outcomes; fails on a traceback, a hang, or a read of anything outside the task."""

    outside: Path
    allowed: list[str] = field(default_factory=list)
    active: Path | None = None
    outcomes: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    opened_outside: list[str] = field(default_factory=list)
    slowest: float = 0.0

    def install(self) -> None:
        self.allowed = sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).resolve().parents[2]),
                               "/dev/null", "/proc/self", "/usr/lib", "/usr/local/lib", "/etc/localtime"})
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple) -> None:
        if self.active is None or event not in ("open", "os.listdir", "os.scandir"):
            return
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path.startswith("/"):
            return  # a descriptor, or a name relative to one the loader opened inside the task
        real = os.path.normpath(path)
        inside = real == str(self.active) or real.startswith(str(self.active) + "/")
        if not inside and not any(real == a or real.startswith(a + "/") for a in self.allowed):
            self.opened_outside.append(f"{event} {real}")

    def load(self, fmt: str, base: Path, spec: str, label: str) -> None:
        self.active = base
        started = time.perf_counter()
        old = signal.signal(signal.SIGALRM, self._alarm)
        signal.setitimer(signal.ITIMER_REAL, PER_INPUT_S)
        try:
            loaded = load_tasks(spec)
        except _Hang:
            self.failures.append(f"{label}: no answer within {PER_INPUT_S:g} s")
            self.outcomes[(fmt, "HANG")] += 1
            return
        except BaseException as e:  # what the suite is looking for
            self.failures.append(f"{label}: raised {type(e).__name__}\n{traceback.format_exc()}")
            self.outcomes[(fmt, "TRACEBACK")] += 1
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            self.active = None
            self.slowest = max(self.slowest, time.perf_counter() - started)
        for t in loaded.tasks:
            self.outcomes[(fmt, "loaded")] += 1
            if SECRET in t.model_dump_json():
                self.failures.append(f"{label}: task {t.id} holds the canary from outside the task folder")
        for e in loaded.errors:
            self.outcomes[(fmt, f"refused: {outcome_key(e)}")] += 1
            if not isinstance(e, TaskFormatError):
                self.failures.append(f"{label}: an error that is not a TaskFormatError: {e!r}")
            elif "\n" in str(e) or not str(e).startswith(str(base)):
                self.failures.append(f"{label}: not one line naming a file of the task: {str(e)[:300]!r}")
            if SECRET in str(e):
                self.failures.append(f"{label}: an error message shows the canary: {str(e)[:200]!r}")

    def _alarm(self, *_: Any) -> None:
        raise _Hang()

    def report(self, only: str | None = None) -> str:
        lines = [f"{'format':<15} {'outcome':<58} {'count':>6}"]
        counts = {k: n for k, n in self.outcomes.items() if only in (None, k[0])}
        for (fmt, what), n in sorted(counts.items()):
            lines.append(f"{fmt:<15} {what[:58]:<58} {n:>6}")
        by: Counter = Counter()
        for (_fmt, what), n in counts.items():
            by[what.split(":")[0]] += n
        lines.append("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
        lines.append(f"slowest load: {self.slowest:.2f} s (bound {PER_INPUT_S:g} s)")
        return "\n".join(lines)


def outcome_key(e: TaskFormatError) -> str:
    """A refusal grouped by the field it names, or by what kind of refusal it is."""
    msg = e.message
    if e.field:
        return "field " + re.split(r"[.\[]", e.field)[0]
    for key in ("is a symlink", "not a regular file", "is a folder", "invalid YAML", "invalid JSON", "not UTF-8",
                "over the", "nested", "missing", "cannot be read", "cannot be loaded", "must be", "no YAML frontmatter",
                "duplicate", "no ClawGym task", "no PinchBench task"):
        if key in msg:
            return key
    return msg[:40]
