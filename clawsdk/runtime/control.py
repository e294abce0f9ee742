"""The control channel of a live run: `clawsdk ctl RUN ...` and the TUI talk to the running process.

The process that runs a run listens on a unix socket beside its store (`socket_path`), made with the store
file's permissions: whoever may write the store may steer the run, nobody else (the socket's mode is the
store's, less the execute bits; connecting needs write permission on it). A request is one line of JSON,
`{"op": ..., "by": "cli", ...}`, and so is the answer, `{"ok": true, "state": {...}}` or `{"ok": false,
"error": ...}`. The kernel says who connected (SO_PEERCRED), and every change is recorded in the store's
run_control table with that user, pid and client, and when.

Operations: `status`; `pause` (no new rollout or attempt starts and no new model call is sent, at their next
boundary; what is in flight keeps its sandbox and its place, and the time paused is given back to each
rollout's clock); `resume`; `cancel` (the run stops as on Ctrl-C: rollouts in flight end `cancelled`, a
rerun of the run id finishes it); `requeue_unscored` (rollouts of the run that ended unscored run again, as
a next attempt, in this process); `set` with `concurrency` (a number: fixed; `auto`: the controller again),
`ceiling` (the most `auto` may reach) and `verifiers` (verifiers at once, where the executor has a limit).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pwd
import socket
import stat
import struct
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketStream

from clawsdk.errors import ClawError

log = logging.getLogger(__name__)

OPS = ("status", "pause", "resume", "cancel", "requeue_unscored", "set")
SETTINGS = ("concurrency", "ceiling", "verifiers")
#: a request line longer than this is refused (the channel carries short commands)
MAX_LINE = 64 * 1024
_SUN_PATH = 100  # sockaddr_un holds 108 bytes; keep room


class ControlError(ClawError):
    """The run cannot be reached, or it refused the request."""


def socket_path(db: str | os.PathLike, run_id: str) -> Path:
    """Where the process running `run_id` on store `db` listens: `.ctl/` beside the store, or, when that
    path is too long for a unix socket, a folder of this user's in the temp dir; the same for every caller."""
    db_path = Path(db).resolve()
    digest = hashlib.sha256(f"{db_path}\0{run_id}".encode()).hexdigest()
    near = db_path.parent / f".{db_path.name}.ctl" / f"{digest[:16]}.sock"
    if len(os.fsencode(near)) <= _SUN_PATH:
        return near
    return Path(tempfile.gettempdir()) / f"clawsdk-ctl-{os.getuid()}" / f"{digest[:24]}.sock"


@dataclass
class Peer:
    uid: int
    pid: int
    client: str

    @property
    def actor(self) -> str:
        try:
            user = pwd.getpwuid(self.uid).pw_name
        except KeyError:
            user = f"uid {self.uid}"
        return f"{user} (pid {self.pid}, {self.client})"


def _peer(stream: SocketStream, client: str) -> Peer:
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
    except (OSError, AttributeError):  # not Linux: the socket's mode still guards it
        pid, uid = -1, -1
    return Peer(uid=uid, pid=pid, client=client[:40] or "client")


Handler = Callable[[dict, Peer], Awaitable[dict]]


async def serve_control(path: Path, store_file: Path, handler: Handler, *,
                task_status: anyio.abc.TaskStatus[Path] = anyio.TASK_STATUS_IGNORED) -> None:
    """Listen on `path` until cancelled, with `store_file`'s owner and permissions; each request goes to
    `handler(request, peer)`. The socket is removed when it stops."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.parent.name.startswith("clawsdk-ctl-"):
        os.chmod(path.parent, 0o700)  # a folder of ours in the shared temp dir
    if await anyio.Path(path).exists() or await anyio.Path(path).is_symlink():
        if _alive(path):
            raise ControlError(f"another process already controls this run at {path}; is the run still "
                               "going?")
        await anyio.Path(path).unlink()
    listener = await anyio.create_unix_listener(path)
    try:
        _match_store(path, store_file)
    except OSError as e:
        await listener.aclose()
        await anyio.Path(path).unlink(missing_ok=True)
        raise ControlError(f"could not give the control socket {path} the store's permissions: {e}") from e

    async def one(stream: SocketStream) -> None:
        # shielded: a request that cancels the run (which ends this listener) still gets its answer
        with anyio.CancelScope(shield=True):
            await answer(stream)

    async def answer(stream: SocketStream) -> None:
        async with stream:
            try:
                try:
                    line = await _read_line(stream)
                except (anyio.EndOfStream, anyio.BrokenResourceError, TimeoutError):
                    return  # connected and left (a liveness probe), or said nothing in time
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
                reply = await handler(request, _peer(stream, str(request.get("by") or "")))
            except (ValueError, ControlError) as e:
                reply = {"ok": False, "error": str(e)}
            except Exception as e:  # one bad request must not stop the channel
                log.exception("control request failed")
                reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            try:
                await stream.send((json.dumps(reply, default=str) + "\n").encode())
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    try:
        task_status.started(path)
        await listener.serve(one)
    finally:
        with anyio.CancelScope(shield=True):
            await listener.aclose()
            try:
                await anyio.Path(path).unlink()
            except OSError:
                pass


def _match_store(path: Path, store_file: Path) -> None:
    """The socket as the store: the same owner and group, its read and write bits (no execute)."""
    st = store_file.stat()
    if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
        os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, stat.S_IMODE(st.st_mode) & 0o666)


def _alive(path: Path) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


async def _read_line(stream: SocketStream) -> bytes:
    buf = b""
    with anyio.fail_after(10):
        while b"\n" not in buf:
            chunk = await stream.receive(65536)
            buf += chunk
            if len(buf) > MAX_LINE:
                raise ValueError(f"request longer than {MAX_LINE} bytes")
    return buf.split(b"\n", 1)[0]


# ---- the client ---------------------------------------------------------------------------------------


def request(db: str | os.PathLike, run_id: str, op: str, *, by: str = "cli", timeout_s: float = 30.0,
            **args: Any) -> dict:
    """Send one request to the process running `run_id`; its answer's `state`. ControlError when the run is
    not running here, the socket refuses this user, or the run refused the request (its reason)."""
    if op not in OPS:
        raise ControlError(f"unknown operation {op!r}; one of {', '.join(OPS)}")
    path = socket_path(db, run_id)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        try:
            s.connect(str(path))
        except FileNotFoundError:
            raise ControlError(f"run {run_id} is not running on {db} (no control socket at {path}): it has "
                               "ended, or it runs on another machine or store") from None
        except PermissionError:
            raise ControlError(f"not allowed to steer run {run_id}: its control socket {path} has the "
                               "store's permissions, and this user may not write the store") from None
        except ConnectionRefusedError:
            raise ControlError(f"run {run_id} is not running (a socket at {path} is left from a process that "
                               "ended)") from None
        s.sendall((json.dumps({"op": op, "by": by, **args}) + "\n").encode())
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except TimeoutError:
        raise ControlError(f"run {run_id} did not answer within {timeout_s:g} s") from None
    finally:
        s.close()
    try:
        answer = json.loads(buf.split(b"\n", 1)[0])
    except ValueError:
        raise ControlError(f"run {run_id} answered something that is not JSON: {buf[:200]!r}") from None
    if not answer.get("ok"):
        raise ControlError(f"run {run_id} refused {op}: {answer.get('error')}")
    return answer.get("state") or {}


def parse_settings(pairs: list[str] | tuple[str, ...]) -> dict[str, int | str]:
    """`concurrency=8`, `concurrency=auto`, `ceiling=256`, `verifiers=4` as a dict; ValueError naming the
    bad one."""
    from clawsdk.runtime.concurrency import parse_concurrency

    out: dict[str, int | str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in SETTINGS:
            raise ValueError(f"set {pair!r}: expected KEY=VALUE with KEY one of {', '.join(SETTINGS)}")
        if key == "concurrency":
            out[key] = parse_concurrency(value)
        else:
            try:
                n = int(value)
            except ValueError:
                n = 0
            if n < 1:
                raise ValueError(f"set {key}={value}: a whole number of at least 1")
            out[key] = n
    if not out:
        raise ValueError("set needs KEY=VALUE (concurrency=N|auto, ceiling=N, verifiers=N)")
    return out


# ---- what the requests do to a live run ----------------------------------------------------------------


Record = Callable[..., Awaitable[None]]


class Steering:
    """The operations of the control channel on one live run: its slots (level, pause), its controller, the
    requeue and cancel the runner provides, the executor's verifier limit. Every change is recorded."""

    def __init__(self, run_id: str, slots: Any, controller: Any | None, *, record: Record,
                 cancel: Callable[[str], None], requeue: Callable[[], Awaitable[int]],
                 verifiers: anyio.CapacityLimiter | None = None):
        self.run_id = run_id
        self.slots = slots
        self.controller = controller
        self.record = record
        self.cancel = cancel
        self.requeue = requeue
        self.verifiers = verifiers
        self.cancelled_by: str | None = None

    def state(self) -> dict:
        c = self.controller
        mode = "auto" if c is not None and not c.fixed else "fixed"
        return {"run_id": self.run_id, "paused": self.slots.paused, "concurrency": self.slots.level,
                "mode": mode, "in_flight": self.slots.in_use, "ceiling": c.ceiling if c is not None else None,
                "reason": c.reason if c is not None else None,
                "verifiers": self.verifiers.total_tokens if self.verifiers is not None else None,
                "cancelled_by": self.cancelled_by}

    async def handle(self, req: dict, peer: Peer) -> dict:
        op = req.get("op")
        if op not in OPS:
            raise ValueError(f"unknown operation {op!r}; one of {', '.join(OPS)}")
        who = peer.actor
        if op == "status":
            return {"ok": True, "state": self.state()}
        if self.cancelled_by is not None and op != "status":
            raise ControlError(f"the run is being cancelled (by {self.cancelled_by})")
        if op == "pause":
            if self.slots.paused:
                return {"ok": True, "state": self.state(), "note": "already paused"}
            self.slots.pause()
            await self._record(who, "pause", "paused: no new rollout or model call starts; those in flight "
                                             "wait")
        elif op == "resume":
            if not self.slots.paused:
                return {"ok": True, "state": self.state(), "note": "not paused"}
            self.slots.resume()
            await self._record(who, "resume", "resumed")
        elif op == "cancel":
            self.cancelled_by = who
            await self._record(who, "cancel", "cancelled: rollouts in flight end cancelled; rerun the run id "
                                              "to finish it")
            self.cancel(who)
        elif op == "requeue_unscored":
            n = await self.requeue()
            await self._record(who, "requeue_unscored", f"requeued {n} unscored rollout(s) as a next attempt",
                               {"requeued": n})
            return {"ok": True, "state": {**self.state(), "requeued": n}}
        else:
            settings = req.get("settings")
            if not isinstance(settings, dict):
                raise ValueError("set needs settings: {concurrency|ceiling|verifiers: value}")
            settings = parse_settings([f"{k}={v}" for k, v in settings.items()])
            done = self._apply(settings)
            await self._record(who, "set", "set " + ", ".join(done), {k: v for k, v in settings.items()})
        return {"ok": True, "state": self.state()}

    def _apply(self, settings: dict) -> list[str]:
        c = self.controller
        if "verifiers" in settings and self.verifiers is None:
            raise ValueError("this run's executor has no verifier limit to set")
        if "ceiling" in settings and c is None:
            raise ValueError("ceiling bounds -c auto, and this run has no controller")
        done = []
        if "ceiling" in settings:
            assert c is not None  # refused above
            c.ceiling = int(settings["ceiling"])
            if not c.fixed and self.slots.level > c.ceiling:
                self.slots.level = c.ceiling
            done.append(f"ceiling={c.ceiling}")
        if "concurrency" in settings:
            value = settings["concurrency"]
            if value == "auto":
                if c is None:
                    raise ValueError("this run has no controller (it was started with a fixed -c)")
                c.set_auto()
            elif c is not None:
                c.set_fixed(int(value))
            else:
                self.slots.level = int(value)
            done.append(f"concurrency={value}")
        if "verifiers" in settings:
            assert self.verifiers is not None  # refused above
            self.verifiers.total_tokens = int(settings["verifiers"])
            done.append(f"verifiers={settings['verifiers']}")
        return done

    async def _record(self, who: str, action: str, reason: str, detail: dict | None = None) -> None:
        log.info("run %s: %s by %s", self.run_id, action, who)
        await self.record(source="operator", actor=who, action=action, reason=reason, detail=detail)
