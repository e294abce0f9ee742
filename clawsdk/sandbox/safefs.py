"""File operations on a host folder that the sandbox can change while we use it.

The workspace is shared with code we do not trust: while a file tool runs on the host (as
root), a command in the sandbox may swap a folder for a symlink to ``/`` (``renameat2`` with
``RENAME_EXCHANGE`` in a loop). Checking a path and then opening it again by name loses
that race. So a `Tree` never uses a name twice: it opens the root as a descriptor, walks the
path one component at a time with ``O_NOFOLLOW`` relative to the descriptor it holds, and
acts on the descriptors it opened (``fstat``, ``fchown``, ``fchmod``, ``mkdir``/``rename``
relative to a folder descriptor). A raced swap then makes the call fail, never leave the root.

Policy, chosen so agents keep the symlinks they legitimately make:

- A symlink (in the middle or at the end of a path) is followed only by walking its target
  again from the folder that holds it, or from the root for an absolute target that names
  the root as the sandbox sees it (``aliases``, e.g. ``/root/.openclaw/workspace``); ``..``
  is undone on our own record of the folders walked, so it can never climb above the root. Any
  other absolute target, a ``..`` above the root or more than `MAX_HOPS` links is
  `PathEscapeError`. A dangling link to a path inside is created there on write.
- A walk keeps descriptors for its deepest `KEEP_OPEN` folders only, and opens at most `MAX_OPENS`: the
  runner's descriptors are every rollout's, and links chained down a deep folder made one walk hold
  thousands of them (see `_Descent`).
- Only regular files are read or written. Files are opened ``O_NONBLOCK``, so a fifo or a
  device node planted as a file is refused after ``fstat`` instead of hanging the host.
- A write never modifies an inode that has another name (``st_nlink > 1``): a hardlink could
  tie it to a file outside the workspace, so the file is replaced by a new one, renamed into
  place within the folder. A file with one name is rewritten in place (cheaper, keeps its
  inode for commands that hold it open). Reading a hardlinked file is allowed: inside bwrap or
  docker the workspace is its own mount, so the agent can only link what it can already read.
- What a write creates (the file, the folders for it) is handed to ``owner`` on the
  descriptor; nothing that existed before is chowned, and no parent is touched by name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from clawsdk.errors import FileTooLarge, PathEscapeError
from clawsdk.tasks.paths import normalize_relative

#: symlinks followed in one path, as the kernel's own limit
MAX_HOPS = 40
#: how many times an operation re-walks a path that changed under it before it gives up
MAX_RETRIES = 8
#: a recursive listing stops descending this deep
MAX_DEPTH = 256
#: folder descriptors one walk keeps open: those of its deepest folders (a `..` past them walks down again)
KEEP_OPEN = 16
#: folders one walk may open, its walks down again included: as many as the kernel's own walk passes through
#: (the path and 40 links, each at most PATH_MAX, so 2,048 names); past that the path is refused
MAX_OPENS = (MAX_HOPS + 1) * 2048

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC  # never waits on a fifo
O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC
O_WRITE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC


class _Changed(Exception):
    """The last component turned into a symlink between the walk and the open: walk again."""


@dataclass
class Node:
    path: str
    is_dir: bool
    size: int


@dataclass
class _Spot:
    """Where a walk ended: the folder descriptor holding `name`; name '' when `fd` is the folder itself."""

    fd: int
    name: str
    rel: str  # the resolved path of `name` from the root


class _Descent:
    """Where a walk is: the names of the folders from the root down, with descriptors for the root and the
    deepest `KEEP_OPEN` of them only. A descriptor per level let links chained through a folder 24,000 deep
    hold the runner's every descriptor, again and again while `scrub` judged them, and another rollout's next
    command failed to start (EMFILE). A `..` past the kept ones walks the names down again from the root,
    without following links: the walk still never leaves the root."""

    def __init__(self, root_fd: int, label: str):
        self.root_fd = root_fd
        self.label = label  # names the path in errors
        self.names: list[str] = []
        self.fds: deque[int] = deque()  # the folders at the end of `names`; empty only at the root
        self.opens = 0

    def fd(self) -> int:
        return self.fds[-1] if self.fds else self.root_fd

    def rel(self, name: str) -> str:
        return "/".join([*self.names, name]) if name else "/".join(self.names)

    def count(self) -> None:
        self.opens += 1
        if self.opens > MAX_OPENS:
            raise PathEscapeError(f"{self.label}: more than {MAX_OPENS} folders to walk")

    def down(self, name: str, fd: int) -> None:
        self.names.append(name)
        self.fds.append(fd)
        if len(self.fds) > KEEP_OPEN:
            os.close(self.fds.popleft())

    def up(self) -> None:
        self.names.pop()
        os.close(self.fds.pop())
        if self.names and not self.fds:
            fd = self.root_fd
            for name in self.names:
                self.count()
                try:
                    fd = os.open(name, O_DIR, dir_fd=fd)
                except OSError:
                    raise PathEscapeError(f"{self.label} keeps changing while it is used") from None
                self.fds.append(fd)
                if len(self.fds) > KEEP_OPEN:
                    os.close(self.fds.popleft())

    def to_root(self) -> None:
        while self.fds:
            os.close(self.fds.pop())
        self.names.clear()

    def take(self) -> int:
        """The descriptor of where the walk is, now the caller's."""
        if self.fds:
            return self.fds.pop()
        fd, self.root_fd = self.root_fd, -1
        return fd

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())
        if self.root_fd >= 0:
            os.close(self.root_fd)


class Tree:
    """A folder on the host, reached only through descriptors. See the module for the policy."""

    def __init__(self, root: Path | str, *, aliases: tuple[str, ...] | list[str] = (), owner: int | None = None,
                 mode: int | None = None, what: str = "workspace"):
        self.root = str(root)
        self.mode = mode  # every file written gets this mode (0o755 when executable); None: as created
        self.aliases = tuple(a.rstrip("/") for a in aliases if a and a.rstrip("/"))
        self.owner = owner
        self.what = what

    # ---- the walk --------------------------------------------------------------------------

    def _split(self, path: str, allow_root: bool) -> list[str]:
        if allow_root and path in ("", ".", "./"):
            return []
        norm = normalize_relative(path)
        if norm == ".":
            raise PathEscapeError(f"path {path!r} is the {self.what} itself")
        return norm.split("/")

    def _target_parts(self, path: str, target: str) -> tuple[bool, list[str]]:
        """(from the root?, components) of a symlink's target; an absolute one must name the root."""
        if not target.startswith("/"):
            return False, target.split("/")
        for alias in self.aliases:
            if target == alias or target.startswith(alias + "/"):
                return True, target[len(alias):].split("/")
        raise PathEscapeError(f"path {path!r} leads outside the {self.what} (a symlink to {target!r})")

    def _walk(self, path: str, *, allow_root: bool = False, make_parents: bool = False,
              follow_last: bool = True, names: list[str] | None = None) -> _Spot:
        """Walk `path` from a fresh root descriptor; the caller closes the returned `fd`. `names`: the path's
        components as the folders hold them (a name may hold a backslash, which `path` would read as a
        separator), for the walks of `scrub`."""
        parts = deque(names if names is not None else self._split(path, allow_root))
        try:
            root_fd = os.open(self.root, O_DIR)
        except OSError as e:
            raise OSError(e.errno, f"the {self.what} is gone ({e.strerror})") from None
        at = _Descent(root_fd, f"path {path!r}")
        hops = 0
        try:
            while parts:
                name = parts.popleft()
                if name in ("", "."):
                    continue
                if name == "..":
                    if not at.names:
                        raise PathEscapeError(f"path {path!r} leads outside the {self.what}")
                    at.up()
                    continue
                here = at.fd()
                if not parts:  # the last component: walked further only if it is a symlink to follow
                    link = _readlink(here, name) if follow_last else None
                    if link is None:
                        rel = at.rel(name)
                        return _Spot(at.take(), name, rel)
                else:
                    at.count()
                    try:
                        fd = os.open(name, O_DIR, dir_fd=here)
                    except FileNotFoundError:
                        if not make_parents:
                            raise FileNotFoundError(errno.ENOENT, f"no such file or folder: {path}") from None
                        made = self._mkdir(here, name)
                        if made is None:  # raced: something else appeared there; look again
                            hops += 1
                            if hops > MAX_HOPS:
                                raise PathEscapeError(f"path {path!r} keeps changing while it is used") from None
                            parts.appendleft(name)
                            continue
                        fd = made
                        link = None
                    except OSError as e:
                        if e.errno not in (errno.ENOTDIR, errno.ELOOP):
                            raise
                        link = _readlink(here, name)
                        if link is None:
                            raise NotADirectoryError(errno.ENOTDIR, f"{path}: {name!r} is not a folder") from None
                    else:
                        link = None
                    if link is None:
                        at.down(name, fd)
                        continue
                hops += 1
                if hops > MAX_HOPS:
                    raise PathEscapeError(f"path {path!r}: more than {MAX_HOPS} symlinks")
                from_root, more = self._target_parts(path, link)
                if from_root:
                    at.to_root()
                parts.extendleft(reversed(more))
            # the walk ended on a folder itself (the root, or a link to a folder): hand over its descriptor
            rel = at.rel("")
            return _Spot(at.take(), "", rel)
        finally:
            at.close()

    def scrub(self, aside: str, budget_s: float = 30.0) -> list[str]:
        """The end of an agent's turn, from the host, with nothing of the agent's still running: what a
        verifier could not read, or could be misled by, is taken out of the tree. Returns the paths removed.

        - Every folder gets its owner's read and search (r-x) and every regular file its owner's read, so
          the verifier (the agent's uid) can read what the agent left; a read-only mode stays read-only.
          `chmod 111 .` hid a link from the old in-sandbox scan, and `chmod 000 .` made every verifier
          command fail before it ran.
        - Every FIFO, socket and device is removed: a verifier reading one blocks or fails.
        - Every symlink that does not resolve inside the tree by `_walk`'s rules (the aliases, at most
          MAX_HOPS links, no `..` above the root) is removed, the link itself.
        - The walk is iterative (any depth). Past `budget_s`, every symlink not yet judged is removed and
          every folder not yet walked is moved to `aside` (a folder outside the tree, on its filesystem).
        """
        deadline = time.monotonic() + budget_s
        removed: list[str] = []
        folders: deque[str] = deque([""])
        while folders:
            if folders[0] and time.monotonic() > deadline:  # the root itself is always walked
                self._move_out(list(folders), aside, removed)
                break
            rel = folders.popleft()
            fd = self._open_folder(rel)
            if fd is None:
                continue
            try:
                with os.scandir(fd) as it:
                    entries = [(e.name, e.stat(follow_symlinks=False)) for e in it]
            except OSError:
                os.close(fd)
                continue
            try:
                for name, st in entries:
                    path = f"{rel}/{name}" if rel else name
                    mode = st.st_mode
                    if stat.S_ISDIR(mode):
                        if mode & 0o500 != 0o500:
                            _chmod(fd, name, stat.S_IMODE(mode) | 0o500, O_DIR)
                        folders.append(path)
                    elif stat.S_ISREG(mode):
                        if not mode & 0o400:
                            _chmod(fd, name, stat.S_IMODE(mode) | 0o400, O_READ)
                    elif stat.S_ISLNK(mode):
                        target = _readlink(fd, name) or ""
                        if time.monotonic() > deadline or not self._inside(path, target):
                            _unlink(fd, name, path, removed)
                    else:  # fifo, socket, device
                        _unlink(fd, name, path, removed)
            finally:
                os.close(fd)
        return sorted(removed)

    def _move_out(self, folders: list[str], aside: str, removed: list[str]) -> None:
        """Move `folders` (none inside another: the walk's queue) to `aside`, opening each parent once: their
        parents were all walked, so this costs no more than the walk did."""
        os.makedirs(aside, mode=0o700, exist_ok=True)
        by_parent: dict[str, list[str]] = {}
        for rel in folders:
            parent, _, name = rel.rpartition("/")
            by_parent.setdefault(parent, []).append(name)
        to = os.open(aside, O_DIR)
        try:
            for parent, names in by_parent.items():
                fd = self._open_folder(parent)
                if fd is None:
                    continue
                try:
                    for name in names:
                        try:
                            os.rename(name, secrets.token_hex(8), src_dir_fd=fd, dst_dir_fd=to)
                            removed.append(f"{parent}/{name}/ (not walked in time)" if parent
                                           else f"{name}/ (not walked in time)")
                        except OSError:
                            pass
                finally:
                    os.close(fd)
        finally:
            os.close(to)

    def _open_folder(self, rel: str) -> int | None:
        """A descriptor of the folder `rel` (walked without following any link, its mode made readable
        first where needed), or None if it is gone or is not a folder any more."""
        try:
            fd = os.open(self.root, O_DIR)
        except OSError:
            return None
        for name in rel.split("/") if rel else []:
            try:
                try:
                    sub = os.open(name, O_DIR, dir_fd=fd)
                except PermissionError:  # not root: the owner gives itself the rights first
                    mode = stat.S_IMODE(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
                    os.chmod(name, mode | 0o500, dir_fd=fd)
                    sub = os.open(name, O_DIR, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = sub
        if rel == "":
            st = os.fstat(fd)
            if st.st_mode & 0o500 != 0o500:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o500)
        return fd

    def _inside(self, path: str, target: str) -> bool:
        """Whether the symlink `path` (to `target`) resolves inside the tree. A dangling one does only if its
        target climbs no `..`: `x -> d/../../etc/passwd` would leave the tree once a verifier makes `d`."""
        try:
            spot = self._walk(path, names=path.split("/"))
        except (FileNotFoundError, NotADirectoryError):
            return ".." not in target.split("/")
        except (PathEscapeError, OSError):  # out, above the root, or too many links
            return False
        os.close(spot.fd)
        return True

    def _mkdir(self, parent: int, name: str) -> int | None:
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        except FileExistsError:
            return None
        try:
            fd = os.open(name, O_DIR, dir_fd=parent)
        except OSError:
            return None
        os.fchmod(fd, 0o755)  # whatever the umask
        if self.owner is not None:
            os.fchown(fd, self.owner, self.owner)
        return fd

    def _retry(self, path: str, op):
        for _ in range(MAX_RETRIES):
            try:
                return op()
            except _Changed:
                continue
        raise PathEscapeError(f"path {path!r} keeps changing while it is used (a symlink swapped in?)")

    # ---- operations ------------------------------------------------------------------------

    def read(self, path: str, max_bytes: int | None = None) -> bytes:
        """The bytes of a regular file; IsADirectoryError, FileNotFoundError, PathEscapeError name `path`;
        FileTooLarge past `max_bytes`, found before reading (or while, if the file grows)."""

        def once() -> bytes:
            spot = self._walk(path, allow_root=True)
            try:
                if not spot.name:
                    raise IsADirectoryError(errno.EISDIR, f"{path} is a folder")
                fd = _open(spot, O_READ, path)
            finally:
                os.close(spot.fd)
            try:
                st = os.fstat(fd)
                _regular(st, path)
                if max_bytes is not None and st.st_size > max_bytes:
                    raise FileTooLarge(path, st.st_size, max_bytes)
                chunks: list[bytes] = []
                total = 0
                while True:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        return b"".join(chunks)
                    total += len(chunk)
                    if max_bytes is not None and total > max_bytes:
                        raise FileTooLarge(path, max(total, st.st_size), max_bytes)
                    chunks.append(chunk)
            finally:
                os.close(fd)

        return self._retry(path, once)

    def write(self, path: str, data: bytes, *, executable: bool = False) -> None:
        """Create or overwrite a regular file, and the folders for it."""

        def once() -> None:
            spot = self._walk(path, make_parents=True)
            try:
                if not spot.name:
                    raise IsADirectoryError(errno.EISDIR, f"{path} is a folder")
                fd = _open(spot, O_WRITE, path, mode=0o644)
                try:
                    st = os.fstat(fd)
                    _regular(st, path)
                    if st.st_nlink > 1:
                        os.close(fd)
                        fd = -1
                        self._replace(spot, data, st, executable)
                        return
                    os.ftruncate(fd, 0)
                    _write_all(fd, data)
                    if self.owner is not None and (st.st_uid, st.st_gid) != (self.owner, self.owner):
                        os.fchown(fd, self.owner, self.owner)
                    if executable or self.mode is not None:
                        os.fchmod(fd, 0o755 if executable or self.mode is None else self.mode)
                finally:
                    if fd >= 0:
                        os.close(fd)
            finally:
                os.close(spot.fd)

        self._retry(path, once)

    def _replace(self, spot: _Spot, data: bytes, old: os.stat_result, executable: bool) -> None:
        tmp = f".{spot.name[:200]}.clawsdk-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=spot.fd)
        try:
            try:
                _write_all(fd, data)
                os.fchmod(fd, 0o755 if executable else self.mode or stat.S_IMODE(old.st_mode) & 0o777)
                if self.owner is not None:
                    os.fchown(fd, self.owner, self.owner)
            finally:
                os.close(fd)
            os.rename(tmp, spot.name, src_dir_fd=spot.fd, dst_dir_fd=spot.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=spot.fd)
            except OSError:
                pass
            raise

    def resolve_dir(self, path: str | None) -> str:
        """The resolved path (from the root, '' for the root) of a folder, or the contract's errors."""
        if not path:
            return ""

        def once() -> str:
            spot = self._walk(path, allow_root=True)
            try:
                if spot.name:
                    os.close(_open(spot, O_DIR, path))
                return spot.rel
            finally:
                os.close(spot.fd)

        return self._retry(path, once)

    def open_dir(self, path: str) -> int:
        """A descriptor of the folder `path` ('' for the root), walked as every other call walks (a link
        swapped in leads nowhere outside), or the contract's errors; the caller closes it."""

        def once() -> int:
            spot = self._walk(path, allow_root=True)
            if not spot.name:
                return spot.fd
            try:
                return _open(spot, O_DIR, path or ".")
            finally:
                os.close(spot.fd)

        return self._retry(path or ".", once)

    def list(self, path: str = ".", *, recursive: bool = False) -> list[Node]:
        """Entries of a folder (paths from the root, as resolved); symlinks are listed, never followed."""

        def once() -> list[Node]:
            spot = self._walk(path, allow_root=True)
            try:
                fd = os.dup(spot.fd) if not spot.name else _open(spot, O_DIR, path)
            finally:
                os.close(spot.fd)
            out: list[Node] = []
            try:
                _scan(fd, spot.rel, recursive, out, 0)
            finally:
                os.close(fd)
            return out

        return self._retry(path, once)

    def move_aside(self, path: str, suffix: str = "agent") -> str | None:
        """Rename whatever `path` names (file, folder, symlink: not followed) to a fresh name next to it.

        Returns the new path, or None if there was nothing. This is how the host takes back a
        name the sandbox must not own (hidden files written where the agent planted its own).
        """
        try:
            spot = self._walk(path, follow_last=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            new = f"{spot.name}.{suffix}-{secrets.token_hex(3)}"
            try:
                os.rename(spot.name, new, src_dir_fd=spot.fd, dst_dir_fd=spot.fd)
            except FileNotFoundError:
                return None
            parent = spot.rel.rpartition("/")[0]
            return f"{parent}/{new}" if parent else new
        finally:
            os.close(spot.fd)


def _chmod(dir_fd: int, name: str, mode: int, flags: int) -> None:
    """Set the mode of `name` (a folder or a regular file, never through a symlink) in `dir_fd`."""
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:  # not root and no right to open it: by name (nothing of the agent's runs now)
        with contextlib.suppress(OSError):
            os.chmod(name, mode, dir_fd=dir_fd)
        return
    try:
        os.fchmod(fd, mode)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink(dir_fd: int, name: str, path: str, removed: list[str]) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    except OSError:
        return  # left: the verifier meets it, as it would have before
    removed.append(path)


def _readlink(dir_fd: int, name: str) -> str | None:
    """The target if `name` is a symlink in `dir_fd`, else None (also when it does not exist)."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _open(spot: _Spot, flags: int, path: str, mode: int = 0o644) -> int:
    try:
        return os.open(spot.name, flags, mode, dir_fd=spot.fd)
    except OSError as e:
        if e.errno == errno.ELOOP or (e.errno == errno.ENOTDIR and flags & os.O_DIRECTORY
                                      and _readlink(spot.fd, spot.name) is not None):
            raise _Changed from None
        if e.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, f"no such file or folder: {path}") from None
        if e.errno == errno.EISDIR:
            raise IsADirectoryError(errno.EISDIR, f"{path} is a folder") from None
        if e.errno == errno.ENOTDIR:
            raise NotADirectoryError(errno.ENOTDIR, f"{path} is not a folder") from None
        if e.errno == errno.ENXIO:  # a fifo with no reader, opened to write
            raise OSError(errno.EINVAL, f"{path} is not a regular file") from None
        raise OSError(e.errno, f"{path}: {e.strerror}") from None


def _regular(st: os.stat_result, path: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"{path} is a folder")
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, f"{path} is not a regular file (a fifo, socket or device): refused")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _scan(fd: int, rel: str, recursive: bool, out: list[Node], depth: int) -> None:
    """os.walk's order (a folder's folders, then its files, sorted; then each sub-folder) over descriptors."""
    with os.scandir(fd) as it:
        entries = sorted(it, key=lambda e: e.name)
    dirs: list[tuple[str, os.stat_result]] = []
    files: list[tuple[str, os.stat_result]] = []
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        (dirs if stat.S_ISDIR(st.st_mode) else files).append((e.name, st))
    prefix = f"{rel}/" if rel else ""
    if not recursive:
        out.extend(Node(prefix + name, stat.S_ISDIR(st.st_mode), 0 if stat.S_ISDIR(st.st_mode) else st.st_size)
                   for name, st in entries_sorted(dirs, files))
        return
    out.extend(Node(prefix + name, True, 0) for name, _ in dirs)
    out.extend(Node(prefix + name, False, st.st_size) for name, st in files)
    if depth >= MAX_DEPTH:
        return
    for name, _ in dirs:
        try:
            sub = os.open(name, O_DIR, dir_fd=fd)
        except OSError:
            continue  # swapped for a symlink or removed meanwhile: not ours to follow
        try:
            _scan(sub, prefix + name, True, out, depth + 1)
        finally:
            os.close(sub)


def entries_sorted(dirs: list, files: list) -> list:
    """One folder's entries by name, as a plain listing shows them."""
    return sorted(dirs + files, key=lambda x: x[0])
