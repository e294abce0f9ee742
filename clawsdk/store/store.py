"""The trajectory store: one SQLite file holding runs, tasks, rollouts, events and verdicts."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from clawsdk._text import printable
from clawsdk.errors import StoreError
from clawsdk.store.events import StoredEvent, parse_event
from clawsdk.store.migrations import applied, check_is_store, migrate

DEFAULT_DB = Path(".clawsdk") / "clawsdk.db"
BUSY_TIMEOUT_MS = 30_000
#: how long a reader waits for a store another process is creating
READY_WAIT_S = 2.0


def default_db_path() -> Path:
    return Path(os.environ.get("CLAWSDK_DB") or DEFAULT_DB)


#: (the second, its "YYYY-MM-DDTHH:MM:SS" text); every event is stamped, and building a datetime
#: and its isoformat() per event was a fifth of recording's cost
_second: tuple[int, str] = (-1, "")


def now() -> str:
    """The time in UTC as ISO 8601 with microseconds: the same text as
    ``datetime.now(timezone.utc).isoformat(timespec="microseconds")``."""
    global _second
    sec, ns = divmod(time.time_ns(), 1_000_000_000)
    cached = _second  # one read: another thread may replace it, never half of it
    if cached[0] != sec:
        cached = (sec, dt.datetime.fromtimestamp(sec, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S"))
        _second = cached
    return f"{cached[1]}.{ns // 1000:06d}+00:00"


# one encoder for every event: json.dumps with options builds a new one per call
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False).encode


def _finite(value: Any) -> Any:
    """`value` with each NaN and Infinity as None (a dict key that is one, as its text)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k) if isinstance(k, float) and not math.isfinite(k) else k: _finite(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """`value` as the store's JSON text. NaN and Infinity, which JSON lacks, are written as null (as
    JSON.stringify and pydantic write them): written as Python writes them, one made SQLite's json_extract
    refuse its row ("malformed JSON"), and the tool_calls view with it for the whole store."""
    try:
        return printable(_encode(value))
    except ValueError as e:  # only a value holding one pays for the second pass
        if "Out of range float" not in str(e):
            raise
        return printable(_encode(_finite(value)))


#: Per run and task: its rollouts, how many finished, and of its finished scored samples how many passed, the
#: share that passed (pass@1) and their mean reward. `clawsdk runs`, the TUI and the Datasette query take their
#: per-task figures from this one definition (a mean over tasks, each weighted 1, as `clawsdk bench report`).
PER_TASK_SQL = """SELECT run_id, task_id, COUNT(*) AS rollouts, SUM(status = 'finished') AS finished,
       SUM(status = 'finished' AND scored = 1) AS scored,
       SUM(status = 'finished' AND scored = 1 AND passed = 1) AS passed,
       AVG(CASE WHEN status = 'finished' AND scored = 1 THEN passed = 1 END) AS pass_rate,
       AVG(CASE WHEN status = 'finished' AND scored = 1 THEN reward END) AS mean_reward
    FROM rollouts GROUP BY run_id, task_id"""


def reader_uri(path: Path) -> str:
    """The URI a reader opens a store with: read-only, and immutable in a folder it cannot write (a read-only
    mount, an archive), where SQLite would otherwise make the WAL's shared-memory file beside it, and fail.
    Nobody can be writing there; a write-ahead log left beside it (a copy taken while a run wrote) would be
    ignored, so that is refused."""
    uri = path.resolve().as_uri()
    if os.access(path.parent, os.W_OK):
        return f"{uri}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size:
        raise StoreError(f"its folder cannot be written, and the write-ahead log beside it ({wal.name}) holds "
                         f"part of its data: copy both to a writable folder")
    return f"{uri}?immutable=1"


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    if readonly and not os.access(path.parent, os.W_OK):
        return sqlite3.connect(reader_uri(path), uri=True, check_same_thread=False)
    return sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)


def _journal_wal(conn: sqlite3.Connection) -> None:
    """WAL mode, waiting for the lock as any write does. Switching takes a lock that SQLite does not wait for (no
    busy handler): two processes creating one store at once (two `serve` or `proxy` on one run) had one fail with
    "database is locked"."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class Store:
    """A connection to the store file. Safe for many readers and one writer across processes."""

    def __init__(self, path: str | os.PathLike | None = None, *, readonly: bool = False,
                 wait_s: float = READY_WAIT_S):
        self.path = Path(path) if path is not None else default_db_path()
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise FileNotFoundError(f"no clawsdk store at {self.path} (set --db or CLAWSDK_DB)")
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a folder, not a clawsdk store file (give --db a file)")
        try:
            conn = _connect(self.path, readonly)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if not readonly:
                _journal_wal(conn)
            # In WAL mode NORMAL loses no committed transaction on a process kill, only on power loss.
            conn.execute("PRAGMA synchronous = NORMAL")
            self.db = sqlite_utils.Database(conn)
            if readonly:
                self._wait_until_created(wait_s)
            else:
                migrate(self.db)
        except StoreError as e:  # a database this clawsdk may not use: name the file
            if hasattr(self, "db"):
                self.db.close()
            raise StoreError(f"{self.path}: {e}") from None
        except sqlite3.DatabaseError as e:
            if "not a database" in str(e) or "malformed" in str(e):
                raise StoreError(f"{self.path} is not a SQLite file ({e}); give --db a clawsdk store") from None
            raise StoreError(f"cannot open the store {self.path}: {e}") from None

    def _wait_until_created(self, wait_s: float) -> None:
        """A reader may come while another process is still creating the store: wait a moment for it."""
        deadline = time.monotonic() + wait_s
        while True:
            check_is_store(self.db)
            if "m001_initial" in applied(self.db):  # committed with the tables it made
                return
            if time.monotonic() >= deadline:
                raise StoreError("no tables yet: the store is being created by another process (try again "
                                 "in a moment), or it is an empty file")
            time.sleep(0.1)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One logical write: BEGIN IMMEDIATE so a second writer waits instead of failing later."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ---- writes (call inside a transaction) ---------------------------------------------

    def upsert_run(self, run_id: str, *, status: str, agent: str | None = None, sandbox: str | None = None,
                   samples: int | None = None, config: dict | None = None) -> None:
        ts = now()
        self.db.execute(
            """INSERT INTO runs (id, created_at, updated_at, status, agent, sandbox, samples, config)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT(id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at,
                   samples = COALESCE(excluded.samples, samples),
                   config = CASE WHEN excluded.config = '{}' THEN config ELSE excluded.config END""",
            [run_id, ts, ts, status, agent, sandbox, samples, dumps(config or {})],
        )

    def set_run_status(self, run_id: str, status: str, error: str | None = None) -> None:
        self.db.execute("UPDATE runs SET status = ?, error = ?, updated_at = ? WHERE id = ?",
                        [status, printable(error), now(), run_id])

    def end_run(self, run_id: str, status: str) -> bool:
        """End a run `status` unless a rollout of it is still running or retrying: one that another process
        on the same run id holds (`clawsdk serve` over stdio, one process per agent run; `clawsdk proxy`).
        The last to end its own marks the run; claim_rollout marks it running again. Returns whether it
        ended the run. Two servers on one run id used to have the first to exit mark the run finished while
        the other was still recording into it."""
        return self.db.execute(
            """UPDATE runs SET status = ?, error = NULL, updated_at = ?
               WHERE id = ? AND NOT EXISTS (SELECT 1 FROM rollouts
                                            WHERE run_id = ? AND status IN ('running', 'retrying'))""",
            [status, now(), run_id, run_id],
        ).rowcount == 1

    def settle_run(self, run_id: str, rollout_ids: list[str], status: str, error: str | None = None) -> int:
        """End a run: its status and reason, and each of `rollout_ids` still running ends `cancelled`.

        Cancelled rollouts are unscored and a rerun of the run id starts them again. Returns how many
        rollouts it ended.
        """
        ended = 0
        reason = error or f"run {status}"
        for i in range(0, len(rollout_ids), 500):  # SQLite's host-parameter limit
            chunk = rollout_ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            ended += self.db.execute(
                f"""UPDATE rollouts SET status = 'cancelled', failure_kind = 'cancelled', scored = 0, reward = NULL,
                        passed = NULL, error = ?, finished_at = ?
                    WHERE run_id = ? AND status IN ('running', 'retrying') AND id IN ({marks})""",
                [printable(reason), now(), run_id, *chunk],
            ).rowcount
        self.set_run_status(run_id, status, error)
        return ended

    def upsert_task(self, task: Any, source: str | None = None) -> None:
        from clawsdk.tasks.model import category_label

        self.db.execute(
            """INSERT OR IGNORE INTO tasks (hash, id, category, difficulty, source, instruction, data)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
            # the category as reports show it: an inferred one says so (clawsdk.tasks.categories)
            [task.hash, task.id, category_label(task) or None, task.difficulty,
             source or task.provenance.get("source"), task.instruction, task.model_dump_json()],
        )

    def insert_events(self, rows: list[tuple]) -> None:
        """rows: (rollout_id, attempt, seq, kind, ts, duration_ms, payload_json)."""
        self.db.conn.executemany(
            "INSERT INTO events (rollout_id, attempt, seq, kind, ts, duration_ms, payload) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def start_rollout(self, *, rollout_id: str, run_id: str, task_id: str, task_hash: str, sample: int,
                      attempt: int, agent: str | None, model: str | None) -> None:
        self.db.execute(
            """INSERT INTO rollouts (id, run_id, task_id, task_hash, sample, attempt, status, agent, model,
                                     started_at)
               VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)
               ON CONFLICT(id) DO UPDATE SET attempt = excluded.attempt, status = 'running',
                   failure_kind = NULL, scored = NULL, reward = NULL, passed = NULL, error = NULL,
                   n_tool_calls = 0, n_model_calls = 0, started_at = excluded.started_at,
                   finished_at = NULL, duration_s = NULL""",
            [rollout_id, run_id, task_id, task_hash, sample, attempt, agent, model, now()],
        )

    def claim_rollout(self, *, run_id: str, task_id: str, task_hash: str, agent: str | None,
                      model: str | None, make_id: Callable[[int], str]) -> tuple[int, str]:
        """Start a new rollout of `task_id` in `run_id` at the first sample no rollout holds, in a transaction
        of its own; returns the sample and its rollout id (`make_id(sample)`).

        For processes that share a run id without a runner to hand out samples (`clawsdk serve` over stdio,
        one process per agent run): the row is inserted, never taken over, and a sample another process took
        in between is skipped. start_rollout's upsert made two servers' rollouts one row, and one lost its
        events.
        """
        with self.transaction():
            (top,) = self.db.execute("SELECT MAX(sample) FROM rollouts WHERE run_id = ? AND task_id = ?",
                                     [run_id, task_id]).fetchone()
            sample = 0 if top is None else top + 1
            while True:
                rollout_id = make_id(sample)
                inserted = self.db.execute(
                    """INSERT INTO rollouts (id, run_id, task_id, task_hash, sample, attempt, status, agent,
                                             model, started_at)
                       VALUES (?, ?, ?, ?, ?, 0, 'running', ?, ?, ?)
                       ON CONFLICT DO NOTHING""",
                    [rollout_id, run_id, task_id, task_hash, sample, agent, model, now()],
                ).rowcount
                if inserted:  # the run is running again if another process on it had ended it (end_run)
                    self.db.execute("UPDATE runs SET status = 'running', error = NULL, updated_at = ? "
                                    "WHERE id = ? AND status != 'running'", [now(), run_id])
                    return sample, rollout_id
                sample += 1

    def finish_rollout(self, *, rollout_id: str, attempt: int, status: str, failure_kind: str,
                       scored: bool, reward: float | None, passed: bool | None, error: str | None,
                       n_tool_calls: int, n_model_calls: int, duration_s: float,
                       verdict: dict | None = None) -> None:
        self.db.execute(
            """UPDATE rollouts SET status = ?, failure_kind = ?, scored = ?, reward = ?, passed = ?,
                   error = ?, n_tool_calls = ?, n_model_calls = ?, finished_at = ?, duration_s = ?
               WHERE id = ? AND attempt = ?""",
            [status, failure_kind, int(scored), reward, None if passed is None else int(passed), printable(error),
             n_tool_calls, n_model_calls, now(), duration_s, rollout_id, attempt],
        )
        if verdict is not None:
            self.db.execute(
                """INSERT OR REPLACE INTO verdicts
                   (rollout_id, attempt, verifier, score, passed, detail, duration_s, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                [rollout_id, attempt, verdict["verifier"], verdict["score"], int(verdict["passed"]),
                 printable(verdict.get("detail")), verdict.get("duration_s"), now()],
            )
            self.db.conn.executemany(
                """INSERT OR REPLACE INTO verdict_scores (rollout_id, attempt, name, score, weight, detail)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                [(rollout_id, attempt, printable(s["name"]), s["score"], s.get("weight", 1.0),
                  printable(s.get("detail"))) for s in verdict.get("subscores", [])],
            )

    def record_task_error(self, *, run_id: str | None, path: str, message: str, field: str | None = None,
                          task_id: str | None = None) -> None:
        self.db.execute(
            "INSERT INTO task_errors (run_id, path, field, task_id, message, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [run_id, printable(path), printable(field), printable(task_id), printable(message), now()],
        )

    def record_run_control(self, *, run_id: str, source: str, actor: str, action: str, level: int | None,
                           paused: bool, reason: str | None, detail: dict | None = None) -> None:
        """One decision of the concurrency controller or one operator's change to a live run (run_control)."""
        self.db.execute(
            "INSERT INTO run_control (run_id, ts, source, actor, action, level, paused, reason, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run_id, now(), source, printable(actor), action, level, int(paused), printable(reason),
             dumps(detail) if detail is not None else None],
        )

    # ---- reads ---------------------------------------------------------------------------

    def query(self, sql: str, params: Any = None) -> list[dict]:
        return list(self.db.query(sql, params or []))

    def run(self, run_id: str) -> dict | None:
        rows = self.query("SELECT * FROM runs WHERE id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self) -> list[dict]:
        """Every run with its rollout counts (rollouts, finished, scored, passed) and, per task as `clawsdk bench
        report` gives them, `pass_rate` (pass@1) and `mean_reward` (mean score): the mean over tasks of each
        task's share of passing scored samples and of its mean reward, every task weighted 1. A mean over
        scored rollouts weighed a task by how many of its samples were scored, so one whose samples ended
        unscored (infrastructure failures, often on the hard tasks) counted less. `tasks` / `tasks_scored`:
        tasks with a rollout, and with a scored one."""
        return self.query(
            f"""WITH per_task AS ({PER_TASK_SQL})
               SELECT r.*, COALESCE(SUM(p.rollouts), 0) AS rollouts,
                      SUM(p.finished) AS finished,
                      SUM(p.passed) AS passed,
                      SUM(p.scored) AS scored,
                      COUNT(p.task_id) AS tasks,
                      COUNT(p.pass_rate) AS tasks_scored,
                      AVG(p.pass_rate) AS pass_rate,
                      AVG(p.mean_reward) AS mean_reward
               FROM runs r LEFT JOIN per_task p ON p.run_id = r.id
               GROUP BY r.id ORDER BY r.created_at DESC"""
        )

    def rollouts(self, run_id: str) -> list[dict]:
        return self.query(
            """SELECT o.*, t.category FROM rollouts o LEFT JOIN tasks t ON t.hash = o.task_hash
               WHERE o.run_id = ? ORDER BY o.task_id, o.sample""",
            [run_id],
        )

    def rollout(self, rollout_id: str) -> dict | None:
        """A rollout by id or unique id prefix."""
        rows = self.query("SELECT * FROM rollouts WHERE id = ?", [rollout_id])
        if not rows:
            rows = self.query("SELECT * FROM rollouts WHERE id LIKE ? LIMIT 2", [rollout_id + "%"])
            if len(rows) > 1:
                raise LookupError(f"rollout id prefix {rollout_id!r} is ambiguous; give more characters")
        return rows[0] if rows else None

    def events(self, rollout_id: str, attempt: int | None = None, *, strict: bool = False) -> list[StoredEvent]:
        """The typed events of an attempt (default: the rollout's last), in order. A payload that is not a JSON
        object is an `Unreadable` event, or with `strict` an EventError naming the rollout and seq."""
        if attempt is None:
            attempt_row = self.query("SELECT attempt FROM rollouts WHERE id = ?", [rollout_id])
            attempt = attempt_row[0]["attempt"] if attempt_row else 0
        rows = self.query(
            "SELECT rollout_id, attempt, seq, kind, ts, duration_ms, payload FROM events "
            "WHERE rollout_id = ? AND attempt = ? ORDER BY seq", [rollout_id, attempt]
        )
        return [parse_event(r, strict=strict) for r in rows]

    def verdict(self, rollout_id: str, attempt: int | None = None) -> dict | None:
        if attempt is None:
            attempt_row = self.query("SELECT attempt FROM rollouts WHERE id = ?", [rollout_id])
            attempt = attempt_row[0]["attempt"] if attempt_row else 0
        rows = self.query("SELECT * FROM verdicts WHERE rollout_id = ? AND attempt = ?", [rollout_id, attempt])
        if not rows:
            return None
        verdict = rows[0]
        verdict["subscores"] = self.query(
            "SELECT name, score, weight, detail FROM verdict_scores WHERE rollout_id = ? AND attempt = ? "
            "ORDER BY rowid",
            [rollout_id, attempt],
        )
        return verdict

    def task(self, task_hash: str) -> Any:
        from clawsdk.tasks.model import Task

        rows = self.query("SELECT data FROM tasks WHERE hash = ?", [task_hash])
        return Task.model_validate_json(rows[0]["data"]) if rows else None

    def run_control(self, run_id: str, *, last: int | None = None) -> list[dict]:
        """How run `run_id` was steered, oldest first (the last `last` rows when given)."""
        if last is None:
            return self.query("SELECT * FROM run_control WHERE run_id = ? ORDER BY id", [run_id])
        rows = self.query("SELECT * FROM run_control WHERE run_id = ? ORDER BY id DESC LIMIT ?", [run_id, last])
        return rows[::-1]

    def task_errors(self, run_id: str | None = None) -> list[dict]:
        if run_id is None:
            return self.query("SELECT * FROM task_errors ORDER BY id")
        return self.query("SELECT * FROM task_errors WHERE run_id = ? ORDER BY id", [run_id])
