"""Reading a task's files as hostile input: inside the task folder, regular files only, within limits.

Every loader reads through here, so the same rules hold for every format:

- a path is opened from a descriptor of the task folder, one component at a time, with
  ``O_NOFOLLOW``: a symlink (to anywhere) is refused, never followed out of the folder;
- only regular files are read (``S_ISREG`` on the open descriptor), so a fifo cannot hang a
  load and a folder named like a file is an error, not an empty task;
- sizes, counts and YAML/JSON nesting are bounded (`ReadLimits`, overridable by variables),
  so one huge or deeply nested file costs a bounded time and never a ``RecursionError``;
- `guarded` turns any other exception raised while loading one task into a `TaskFormatError`
  for that task, so one bad task never stops the others.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from clawsdk.errors import TaskFormatError
from clawsdk.tasks.model import File, first_unstorable

T = TypeVar("T")

#: variable -> (ReadLimits field, default)
LIMIT_VARS = {
    "CLAWSDK_MAX_TASK_FILE_BYTES": ("task_file_bytes", 8 * 2**20),
    "CLAWSDK_MAX_INSTRUCTION_CHARS": ("instruction_chars", 256 * 2**10),
    "CLAWSDK_MAX_FILE_BYTES": ("file_bytes", 64 * 2**20),
    "CLAWSDK_MAX_TASK_BYTES": ("total_bytes", 256 * 2**20),
    "CLAWSDK_MAX_TASK_FILES": ("files", 10_000),
    "CLAWSDK_MAX_NESTING": ("depth", 100),
}
_VAR_OF = {f: var for var, (f, _) in LIMIT_VARS.items()}
# the composer recurses about twice per level; past this the interpreter's own limit is near
_DEPTH_CEILING = 300


@dataclass(frozen=True)
class ReadLimits:
    """What one task may hold; each has a CLAWSDK_MAX_* variable (see docs/task-format.md)."""

    task_file_bytes: int = LIMIT_VARS["CLAWSDK_MAX_TASK_FILE_BYTES"][1]  # task.yaml, data_entry.json, a .md, a jsonl line
    instruction_chars: int = LIMIT_VARS["CLAWSDK_MAX_INSTRUCTION_CHARS"][1]
    file_bytes: int = LIMIT_VARS["CLAWSDK_MAX_FILE_BYTES"][1]  # one workspace, hidden or asset file
    total_bytes: int = LIMIT_VARS["CLAWSDK_MAX_TASK_BYTES"][1]  # all of one task's files together
    files: int = LIMIT_VARS["CLAWSDK_MAX_TASK_FILES"][1]  # files and folders of one task
    depth: int = LIMIT_VARS["CLAWSDK_MAX_NESTING"][1]  # YAML / JSON nesting

    @classmethod
    def from_env(cls) -> ReadLimits:
        values = {}
        for var, (name, _default) in LIMIT_VARS.items():
            raw = os.environ.get(var)
            if raw is None or not raw.strip():
                continue
            try:
                value = int(raw.strip().replace("_", ""))
            except ValueError:
                raise TaskFormatError(var, f"must be a whole number, got {raw!r}") from None
            if value < 1:
                raise TaskFormatError(var, f"must be at least 1, got {value}")
            values[name] = min(value, _DEPTH_CEILING) if name == "depth" else value
        return cls(**values)

    def too_big(self, what: str, size: int, name: str) -> str:
        limit = getattr(self, name)
        return (f"{what} is {size:,} bytes, over the {limit:,}-byte limit; "
                f"set {_VAR_OF[name]} to allow more")


@dataclass
class Budget:
    """What one task has used so far of its `ReadLimits` (files and bytes across all its folders)."""

    limits: ReadLimits = field(default_factory=ReadLimits.from_env)
    files: int = 0
    bytes: int = 0

    def take(self, where: str, files: int = 0, size: int = 0) -> None:
        self.files += files
        self.bytes += size
        if self.files > self.limits.files:
            raise TaskFormatError(where, f"the task has more than {self.limits.files:,} files and folders; "
                                  f"set CLAWSDK_MAX_TASK_FILES to allow more")
        if self.bytes > self.limits.total_bytes:
            raise TaskFormatError(where, f"the task's files add up to more than {self.limits.total_bytes:,} "
                                  "bytes; set CLAWSDK_MAX_TASK_BYTES to allow more")


# ---- opening beneath a folder ---------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".")]
    if rel.startswith("/") or any(p == ".." for p in parts) or "\x00" in rel:
        raise ValueError(rel)
    return parts


def _symlink_error(where: str, name: str, dir_fd: int) -> TaskFormatError:
    try:
        target = os.readlink(name, dir_fd=dir_fd)
    except OSError:
        target = "?"
    return TaskFormatError(where, f"is a symlink (to {target!r}); task files must be regular files inside "
                                  "the task folder, so it is refused")


def _open_dir(root: Path, parts: list[str]) -> int:
    """A descriptor of root/parts, refusing a symlink at any component below root."""
    fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)  # root itself is the user's own choice
    try:
        for i, part in enumerate(parts):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                here = str(root.joinpath(*parts[:i + 1]))
                if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise _symlink_error(here, part, fd) from None
                raise TaskFormatError(here, "is not a folder (a file, or a fifo); a folder is expected here") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _read_fd(fd: int, where: str, limit: int, limit_name: str, limits: ReadLimits) -> bytes:
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise TaskFormatError(where, "is a folder; a file is expected here")
    if not stat.S_ISREG(st.st_mode):
        raise TaskFormatError(where, "is not a regular file (a fifo, socket or device); refused")
    if st.st_size > limit:
        raise TaskFormatError(where, limits.too_big("the file", st.st_size, limit_name))
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:  # grew while we read it
            raise TaskFormatError(where, limits.too_big("the file", size, limit_name))
    return b"".join(chunks)


def _open_file(dir_fd: int, name: str, where: str) -> int:
    try:
        return os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _symlink_error(where, name, dir_fd) from None
        if e.errno == errno.ENXIO:  # a unix socket (O_NONBLOCK opens a fifo): name it, not the task file
            raise TaskFormatError(where, "is not a regular file (a fifo, socket or device); refused") from None
        raise


def read_file(root: str | os.PathLike, rel: str, *, limits: ReadLimits | None = None,
              task_file: bool = False) -> bytes:
    """The bytes of root/rel, a regular file reached without following any symlink below root.

    Raises FileNotFoundError when it does not exist, TaskFormatError for a symlink, a folder,
    a fifo or a file over its limit (`task_file`: the task-definition limit).
    """
    limits = limits or ReadLimits.from_env()
    root = Path(root)
    where = str(root / rel)
    try:
        parts = _parts(rel)
    except ValueError:
        raise TaskFormatError(where, "must be a relative path inside the task folder") from None
    if not parts:
        raise TaskFormatError(where, "is a folder; a file is expected here")
    dir_fd = _open_dir(root, parts[:-1])
    try:
        fd = _open_file(dir_fd, parts[-1], where)
    finally:
        os.close(dir_fd)
    try:
        name = "task_file_bytes" if task_file else "file_bytes"
        return _read_fd(fd, where, getattr(limits, name), name, limits)
    finally:
        os.close(fd)


def read_head(root: str | os.PathLike, rel: str, size: int) -> bytes:
    """The first `size` bytes of root/rel, read like `read_file` (for a format's detect())."""
    root = Path(root)
    parts = _parts(rel)
    dir_fd = _open_dir(root, parts[:-1])
    try:
        fd = _open_file(dir_fd, parts[-1], str(root / rel))
    finally:
        os.close(dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TaskFormatError(str(root / rel), "is not a regular file")
        return os.read(fd, size)
    finally:
        os.close(fd)


def read_text(root: str | os.PathLike, rel: str, *, limits: ReadLimits | None = None) -> str:
    """A task-definition file (task.yaml, data_entry.json, a .md) as UTF-8 text."""
    data = read_file(root, rel, limits=limits, task_file=True)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TaskFormatError(str(Path(root) / rel), f"not UTF-8 text: {e}") from None


def lexists(root: str | os.PathLike, rel: str) -> bool:
    """Whether root/rel exists as anything (a dangling symlink counts: reading it gives the error)."""
    return os.path.lexists(Path(root) / rel)


def read_tree(root: str | os.PathLike, rel: str, prefix: str = "", *, budget: Budget | None = None) -> list[File]:
    """Every file under root/rel as a File (paths relative to it, after `prefix`).

    Symlinks anywhere in the tree (or rel itself being one) and non-regular files are refused
    with a TaskFormatError naming them; the tree is walked from descriptors, never by name again.
    """
    budget = budget or Budget()
    root = Path(root)
    top = root / rel
    try:
        parts = _parts(rel)
    except ValueError:
        raise TaskFormatError(str(top), "must be a relative path inside the task folder") from None
    files: list[File] = []
    stack = [(_open_dir(root, parts), "")]
    try:
        while stack:
            fd, sub = stack.pop()
            try:
                with os.scandir(fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
                for entry in entries:
                    rel_name = sub + entry.name
                    where = str(top / rel_name)
                    budget.take(where, files=1)
                    if entry.is_symlink():
                        raise _symlink_error(where, entry.name, fd)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((os.open(entry.name, _DIR_FLAGS, dir_fd=fd), rel_name + "/"))
                        continue
                    ffd = _open_file(fd, entry.name, where)
                    try:
                        data = _read_fd(ffd, where, budget.limits.file_bytes, "file_bytes", budget.limits)
                        mode = os.fstat(ffd).st_mode
                    finally:
                        os.close(ffd)
                    budget.take(where, size=len(data))
                    files.append(File.from_bytes(prefix + rel_name, data, executable=bool(mode & 0o111)))
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return sorted(files, key=lambda f: f.path)


def is_dir(root: str | os.PathLike, rel: str) -> bool:
    """Whether root/rel is a real folder (not a symlink to one)."""
    try:
        return stat.S_ISDIR(os.lstat(Path(root) / rel).st_mode)
    except OSError:
        return False


# ---- parsing with bounded nesting -----------------------------------------------------------


class NestingError(ValueError):
    pass


def _bounded_loader(limit: int) -> type:
    class Loader(yaml.SafeLoader):
        depth = 0

        def __init__(self, stream):  # PyYAML's signature
            super().__init__(stream)
            self.open_anchors: set[str] = set()

        def compose_node(self, parent, index):  # PyYAML's signature
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) and event.anchor in self.open_anchors:
                raise NestingError(f"line {event.start_mark.line + 1}: *{event.anchor} refers to the anchor it is "
                                   "inside of (a structure that contains itself)")
            anchor = getattr(event, "anchor", None) if not isinstance(event, yaml.AliasEvent) else None
            self.depth += 1
            if anchor:
                self.open_anchors.add(anchor)
            try:
                if self.depth > limit:
                    raise NestingError(f"line {event.start_mark.line + 1}: nested deeper than {limit} levels; "
                                       "set CLAWSDK_MAX_NESTING to allow more")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1
                if anchor:
                    self.open_anchors.discard(anchor)

        def construct_mapping(self, node, deep=False):  # PyYAML's signature
            # PyYAML keeps the last of two equal keys without a word; a task file that says `id` twice
            # is a mistake to point at. Keys a merge (`<<: *base`) brings in may be overridden.
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, Any] = {}
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node)
                    if key in seen:
                        raise DuplicateKeyError(key, seen[key], key_node.start_mark)
                    seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

    # an unquoted `expected: 2024-01-05` is the text written, not a datetime.date: a date equals no
    # answer the agent can write (JSON and text have none), and a check's `text:` refused it
    # (types-PyYAML types the method as SafeConstructor's, which its bound for a loader leaves out)
    Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)  # type: ignore[type-var]
    return Loader


class DuplicateKeyError(ValueError):
    def __init__(self, key: Any, first: Any, again: Any):
        self.key, self.first, self.again = key, first, again
        super().__init__(f"key {key!r} appears twice")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads's object_pairs_hook: json.loads keeps the last of two equal keys without a word."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key, None, None)
        out[key] = value
    return out


#: values a YAML file may expand to through its aliases (`*name`): a few anchors can stand for billions
MAX_EXPANDED_VALUES = 1_000_000


def expanded_size(value: Any, stop: int = MAX_EXPANDED_VALUES) -> int:
    """How many values `value` holds once every shared (aliased) part is counted each time it appears; more
    than `stop` for a structure that contains itself (YAML's `&a [*a]`), which never ends written out."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # on the path being walked: met again below itself, it contains itself
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        v, done = stack.pop()
        if not isinstance(v, (dict, list)) or (id(v) in sizes and not done):
            continue
        kids = list(v.values()) if isinstance(v, dict) else v
        if done:
            total = 1 + sum(sizes.get(id(k), 1) if isinstance(k, (dict, list)) else 1 for k in kids)
            sizes[id(v)] = min(total, stop + 1)
            open_.discard(id(v))
            continue
        if id(v) in open_:
            return stop + 1
        open_.add(id(v))
        stack.append((v, True))
        stack.extend((k, False) for k in kids if isinstance(k, (dict, list)) and id(k) not in sizes)
    return sizes.get(id(value), 1)


def parse_yaml(text: str, where: str, *, limits: ReadLimits | None = None, line_offset: int = 0) -> Any:
    """YAML (safe types only) with nesting bounded; TaskFormatError saying where it is wrong."""
    limits = limits or ReadLimits.from_env()
    try:
        value = yaml.load(text, Loader=_bounded_loader(limits.depth))  # noqa: S506 - a SafeLoader subclass
    except NestingError as e:
        raise TaskFormatError(where, f"invalid YAML: {e}") from None
    except DuplicateKeyError as e:
        again, first = e.again, e.first
        at = f"line {again.line + 1 + line_offset}, column {again.column + 1}"
        before = f"line {first.line + 1 + line_offset}, column {first.column + 1}"
        raise TaskFormatError(where, f"{at}: key {e.key!r} appears twice (first at {before}); keep one",
                              field=str(e.key)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1 + line_offset}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise TaskFormatError(where, f"invalid YAML: {at}{problem}") from None
    except RecursionError:
        raise TaskFormatError(where, "invalid YAML: nested too deep; set CLAWSDK_MAX_NESTING lower") from None
    if expanded_size(value) > MAX_EXPANDED_VALUES:
        raise TaskFormatError(where, f"invalid YAML: its aliases (*name) expand to more than {MAX_EXPANDED_VALUES:,} "
                                     "values; write the repeated parts out, or share less")
    # a task is JSON-like data (the store writes it as JSON): `!!binary` bytes and `!!set` sets passed
    # loading and then ended the whole run, at the store or at the hash
    found = first_unstorable(value)
    if found is not None:
        field, why = found
        task_id = value.get("id") if isinstance(value, dict) and isinstance(value.get("id"), str) else None
        raise TaskFormatError(where, why, field=field or None, task_id=task_id)
    return value


def parse_json(text: str, where: str, *, limits: ReadLimits | None = None) -> Any:
    """JSON with nesting bounded; TaskFormatError saying where it is wrong."""
    limits = limits or ReadLimits.from_env()
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except DuplicateKeyError as e:
        raise TaskFormatError(where, f"key {e.key!r} appears twice in one object; keep one",
                              field=str(e.key)) from None
    except json.JSONDecodeError as e:
        raise TaskFormatError(where, f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise TaskFormatError(where, f"invalid JSON: nested deeper than {limits.depth} levels; "
                                     "set CLAWSDK_MAX_NESTING to allow more") from None
    deepest = nesting(value, limits.depth)
    if deepest > limits.depth:
        raise TaskFormatError(where, f"invalid JSON: nested deeper than {limits.depth} levels; "
                                     "set CLAWSDK_MAX_NESTING to allow more")
    return value


def nesting(value: Any, stop: int) -> int:
    """How deep lists and dicts nest in value (counting stops past `stop`); no recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if deepest > stop:
                return deepest
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def check_instruction(text: object, where: str, field: str, task_id: str | None,
                      limits: ReadLimits | None = None) -> None:
    limits = limits or ReadLimits.from_env()
    if isinstance(text, str) and len(text) > limits.instruction_chars:
        raise TaskFormatError(where, f"is {len(text):,} characters, over the {limits.instruction_chars:,}-character "
                              "limit; set CLAWSDK_MAX_INSTRUCTION_CHARS to allow more", field=field, task_id=task_id)


# ---- one task's failure stays that task's --------------------------------------------------


def guarded(where: str | os.PathLike, load: Callable[[], T]) -> T | TaskFormatError:
    """load(), or the error it raised as a TaskFormatError for `where`.

    Loaders name the file and field of every failure they foresee; this is for the ones they
    do not, so a bug or an odd input in one task never stops the rest.
    """
    try:
        return load()
    except Exception as e:  # the point: no exception of one task escapes
        return as_task_error(where, e)


def as_task_error(where: str | os.PathLike, e: Exception) -> TaskFormatError:
    """Any exception raised while loading from `where` as the one-line TaskFormatError users see."""
    if isinstance(e, TaskFormatError):
        return e
    if isinstance(e, RecursionError):
        return TaskFormatError(str(where), "nested too deep to read; set CLAWSDK_MAX_NESTING lower")
    if isinstance(e, MemoryError):
        return TaskFormatError(str(where), "too large to read into memory")
    if isinstance(e, OSError):
        # a name relative to a descriptor says less than the task file being loaded
        name = e.filename if isinstance(e.filename, str) and e.filename.startswith("/") else str(where)
        if isinstance(e, FileNotFoundError):
            return TaskFormatError(name, "missing (or removed while loading)")
        return TaskFormatError(name, f"cannot be read: {e.strerror or e}")
    detail = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return TaskFormatError(str(where), f"cannot be loaded ({type(e).__name__}" + (f": {detail})" if detail else ")"))
