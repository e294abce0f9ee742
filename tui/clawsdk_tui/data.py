"""Read-only, incremental reads of the store for the watch view.

Nothing here imports textual: the benchmark and the tests use it directly. Every method runs on
a worker thread; the app thread only ever sees the plain values returned.

How a live view stays cheap on a big store:
- ``PRAGMA data_version`` changes only when another connection commits, so an idle tick costs
  one pragma and nothing else.
- Events are append-only with an integer primary key: new activity is ``WHERE id > last``.
- A rollout changes state only while it is not finished, so a refresh re-reads the rows that were
  unfinished last time and those unfinished now, not the whole run; a full re-read every few
  seconds catches the rare resume that finishes between two ticks.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawsdk.errors import StoreError
from clawsdk.store.store import PER_TASK_SQL, reader_uri

ROLLOUT_COLUMNS = (
    "id",
    "run_id",
    "task_id",
    "sample",
    "attempt",
    "status",
    "failure_kind",
    "scored",
    "reward",
    "passed",
    "error",
    "n_tool_calls",
    "n_model_calls",
    "started_at",
    "finished_at",
    "duration_s",
    "category",
)
_ROLLOUT_SELECT = (
    "SELECT " + ", ".join(f"o.{c}" for c in ROLLOUT_COLUMNS[:-1]) + ", t.category "
    "FROM rollouts o LEFT JOIN tasks t ON t.hash = o.task_hash"
)
UNFINISHED = ("running", "retrying", "pending")


def parse_ts(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class RunSummary:
    """A run as the runs screen shows it. `scored` and `passed` count rollouts; `pass_rate` (pass@1) and
    `mean_reward` are per task, as `Store.runs`, `clawsdk runs` and `clawsdk bench report` give them: the mean
    over the `tasks_scored` tasks with a scored sample of each task's share of passing scored samples (of its
    mean reward), every task weighted 1."""

    id: str
    status: str
    agent: str | None
    sandbox: str | None
    samples: int | None
    created_at: str
    total: int
    finished: int
    running: int
    scored: int
    passed: int
    tasks: int
    tasks_scored: int
    pass_rate: float | None
    mean_reward: float | None
    failures: dict[str, int]
    first_started: str | None
    last_finished: str | None

    def throughput(self, now: float) -> float | None:
        """Finished rollouts per second, from the first start to the last finish (or now, while running)."""
        start = parse_ts(self.first_started)
        end = now if self.status == "running" else parse_ts(self.last_finished)
        if start is None or end is None or end <= start or not self.finished:
            return None
        return self.finished / (end - start)


@dataclass
class RolloutsDelta:
    """What changed in one run since the last poll: rows keyed by rollout id."""

    changed: list[dict]
    full: bool  # the whole run was re-read (first poll or periodic resync)


@dataclass
class EventsChunk:
    rollout_id: str
    attempt: int
    events: list[dict]
    reset: bool  # a new attempt started: throw away what is shown
    total: int  # events of this attempt in the store
    skipped: int = 0  # earliest events left out of a first load


@dataclass(frozen=True)
class RunControl:
    """The last row of run_control for a run: the level in force, paused or not, and why."""

    level: int | None
    paused: bool
    reason: str
    actor: str
    action: str
    source: str  # controller | operator
    ts: str


class StoreReader:
    """A read-only connection to a store file, safe to share between worker threads."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"no clawsdk store at {self.path} (give --db PATH or set CLAWSDK_DB)")
        # read-only (immutable in a folder that cannot be written): the viewer can never write, whatever the
        # code below does
        try:
            uri = reader_uri(self.path)
        except StoreError as e:
            raise ValueError(f"{self.path}: {e}") from None
        self.conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA busy_timeout = 30000")
        self.conn.execute("PRAGMA query_only = 1")
        self._lock = threading.Lock()
        self._has_control: bool | None = None  # the run_control table (stores from before it lack it)
        names = {r[0] for r in self._all("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "rollouts" not in names or "events" not in names:
            raise ValueError(f"{self.path} is not a clawsdk store (no rollouts/events tables)")

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def _all(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self.conn.execute(sql, tuple(params)).fetchall()

    # ---- cheap change detection ----------------------------------------------------------

    def data_version(self) -> int:
        return self._all("PRAGMA data_version")[0][0]

    def max_event_id(self) -> int:
        return self._all("SELECT COALESCE(MAX(id), 0) FROM events")[0][0]

    # ---- runs ----------------------------------------------------------------------------

    def runs(self) -> list[RunSummary]:
        rows = self._all(
            f"""WITH per_task AS ({PER_TASK_SQL}),
               per_run AS (
                   SELECT run_id, COUNT(*) AS tasks, COUNT(pass_rate) AS tasks_scored,
                          AVG(pass_rate) AS pass_rate, AVG(mean_reward) AS mean_reward
                   FROM per_task GROUP BY run_id)
               SELECT r.id, r.status, r.agent, r.sandbox, r.samples, r.created_at,
                      MAX(COUNT(o.id), COALESCE(json_extract(r.config, '$.planned'), 0)) AS total,
                      COALESCE(SUM(o.status = 'finished'), 0) AS finished,
                      COALESCE(SUM(o.status IN ('running', 'retrying')), 0) AS running,
                      COALESCE(SUM(o.scored = 1 AND o.status = 'finished'), 0) AS scored,
                      COALESCE(SUM(o.passed = 1 AND o.scored = 1 AND o.status = 'finished'), 0) AS passed,
                      COALESCE(t.tasks, 0) AS tasks, COALESCE(t.tasks_scored, 0) AS tasks_scored,
                      t.pass_rate, t.mean_reward,
                      MIN(o.started_at) AS first_started, MAX(o.finished_at) AS last_finished
               FROM runs r LEFT JOIN rollouts o ON o.run_id = r.id LEFT JOIN per_run t ON t.run_id = r.id
               GROUP BY r.id ORDER BY r.created_at DESC, r.id"""
        )
        kinds: dict[str, dict[str, int]] = {}
        for r in self._all(
            "SELECT run_id, failure_kind, COUNT(*) FROM rollouts WHERE status = 'finished' "
            "AND failure_kind IS NOT NULL AND failure_kind != 'ok' GROUP BY run_id, failure_kind"
        ):
            kinds.setdefault(r[0], {})[r[1]] = r[2]
        return [
            RunSummary(
                id=r["id"],
                status=r["status"],
                agent=r["agent"],
                sandbox=r["sandbox"],
                samples=r["samples"],
                created_at=r["created_at"],
                total=r["total"],
                finished=r["finished"],
                running=r["running"],
                scored=r["scored"],
                passed=r["passed"],
                tasks=r["tasks"],
                tasks_scored=r["tasks_scored"],
                pass_rate=r["pass_rate"],
                mean_reward=r["mean_reward"],
                failures=dict(sorted(kinds.get(r["id"], {}).items(), key=lambda kv: -kv[1])),
                first_started=r["first_started"],
                last_finished=r["last_finished"],
            )
            for r in rows
        ]

    def control(self, run_id: str) -> RunControl | None:
        """How the run is steered now: its concurrency, whether it is paused, and the last word on why (the
        controller's decision or an operator's change); None for a run nobody steered, or an older store."""
        if self._has_control is None:
            self._has_control = bool(self._all("SELECT 1 FROM sqlite_master WHERE name = 'run_control'"))
        if not self._has_control:
            return None
        rows = self._all("SELECT source, actor, action, level, paused, reason, ts FROM run_control "
                         "WHERE run_id = ? ORDER BY id DESC LIMIT 1", [run_id])
        if not rows:
            return None
        r = rows[0]
        return RunControl(level=r["level"], paused=bool(r["paused"]), reason=r["reason"] or "", actor=r["actor"],
                          action=r["action"], source=r["source"], ts=r["ts"])

    # ---- rollouts ------------------------------------------------------------------------

    def rollouts(self, run_id: str) -> list[dict]:
        return [dict(r) for r in self._all(_ROLLOUT_SELECT + " WHERE o.run_id = ?", [run_id])]

    def unfinished_rollouts(self, run_id: str, also: Iterable[str] = ()) -> list[dict]:
        """Rows not finished now, plus the rows with the given ids (unfinished at the last poll)."""
        rows = [
            dict(r)
            for r in self._all(_ROLLOUT_SELECT + " WHERE o.run_id = ? AND o.status != 'finished'", [run_id])
        ]
        seen = {r["id"] for r in rows}
        ids = [i for i in also if i not in seen]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows += [
                dict(r)
                for r in self._all(_ROLLOUT_SELECT + f" WHERE o.id IN ({','.join('?' * len(chunk))})", chunk)
            ]
        return rows

    def rollout(self, rollout_id: str) -> dict | None:
        rows = self._all(_ROLLOUT_SELECT + " WHERE o.id = ?", [rollout_id])
        return dict(rows[0]) if rows else None

    def instruction(self, rollout_id: str) -> str | None:
        rows = self._all(
            "SELECT t.instruction FROM rollouts o JOIN tasks t ON t.hash = o.task_hash WHERE o.id = ?",
            [rollout_id],
        )
        return rows[0][0] if rows else None

    # ---- events --------------------------------------------------------------------------

    def events(
        self, rollout_id: str, attempt: int, after_seq: int = -1, limit: int | None = None
    ) -> list[dict]:
        """Events of one attempt after `after_seq`, in order; with `limit`, only the last `limit`."""
        if limit is None:
            rows = self._all(
                "SELECT id, seq, kind, ts, duration_ms, payload FROM events "
                "WHERE rollout_id = ? AND attempt = ? AND seq > ? ORDER BY seq",
                [rollout_id, attempt, after_seq],
            )
        else:
            rows = self._all(
                "SELECT id, seq, kind, ts, duration_ms, payload FROM events "
                "WHERE rollout_id = ? AND attempt = ? AND seq > ? ORDER BY seq DESC LIMIT ?",
                [rollout_id, attempt, after_seq, limit],
            )[::-1]
        return [_event(r) for r in rows]

    def count_events(self, rollout_id: str, attempt: int) -> int:
        return self._all(
            "SELECT COUNT(*) FROM events WHERE rollout_id = ? AND attempt = ?", [rollout_id, attempt]
        )[0][0]

    def new_tool_calls(self, after_id: int, upto_id: int, run_id: str | None) -> int:
        """Tool calls recorded with after_id < id <= upto_id (in one run, when given)."""
        if upto_id <= after_id:
            return 0
        if run_id is None:
            return self._all(
                "SELECT COUNT(*) FROM events WHERE id > ? AND id <= ? AND kind = 'tool_call'",
                [after_id, upto_id],
            )[0][0]
        # CROSS JOIN keeps events as the outer loop: a rowid range of a few new rows, each looked up
        # in rollouts. Left to itself the planner walks the run's rollouts and every one of their events.
        return self._all(
            "SELECT COUNT(*) FROM events e CROSS JOIN rollouts o ON o.id = e.rollout_id "
            "WHERE e.id > ? AND e.id <= ? AND e.kind = 'tool_call' AND o.run_id = ?",
            [after_id, upto_id, run_id],
        )[0][0]

    def verdict(self, rollout_id: str, attempt: int) -> dict | None:
        rows = self._all("SELECT * FROM verdicts WHERE rollout_id = ? AND attempt = ?", [rollout_id, attempt])
        if not rows:
            return None
        verdict = dict(rows[0])
        verdict["subscores"] = [
            dict(r)
            for r in self._all(
                "SELECT name, score, weight, detail FROM verdict_scores WHERE rollout_id = ? AND attempt = ? "
                "ORDER BY rowid",
                [rollout_id, attempt],
            )
        ]
        return verdict

    def rollout_json(self, rollout_id: str) -> dict:
        """Everything about one rollout, as `clawsdk show --json` gives it: row, events, verdict."""
        rows = self._all("SELECT * FROM rollouts WHERE id = ?", [rollout_id])
        if not rows:
            raise LookupError(f"no rollout {rollout_id!r} in {self.path}")
        ro = dict(rows[0])
        events = self.events(rollout_id, ro["attempt"])
        for e in events:
            e.pop("id", None)
        return {"rollout": ro, "events": events, "verdict": self.verdict(rollout_id, ro["attempt"])}


def _event(row: sqlite3.Row) -> dict:
    e = dict(row)
    try:
        e["payload"] = json.loads(e["payload"])
    except ValueError:
        e["payload"] = {"raw": e["payload"]}
    return e


# ---- incremental state, one object per thing being watched ------------------------------


class RunWatch:
    """The rollouts of one run, kept up to date by re-reading only what can have changed."""

    RESYNC_S = 5.0

    def __init__(self, reader: StoreReader, run_id: str, *, clock: Callable[[], float] = time.monotonic):
        self.reader = reader
        self.run_id = run_id
        self.rows: dict[str, dict] = {}
        self._unfinished: set[str] = set()
        self._last_full = -1e9
        self._clock = clock

    def poll(self) -> RolloutsDelta:
        full = self._clock() - self._last_full >= self.RESYNC_S
        if full:
            fresh = self.reader.rollouts(self.run_id)
            self._last_full = self._clock()
        else:
            fresh = self.reader.unfinished_rollouts(self.run_id, self._unfinished)
        changed = []
        for row in fresh:
            if self.rows.get(row["id"]) != row:
                self.rows[row["id"]] = row
                changed.append(row)
            if row["status"] in UNFINISHED:
                self._unfinished.add(row["id"])
            else:
                self._unfinished.discard(row["id"])
        return RolloutsDelta(changed=changed, full=full)

    def pass_rate_series(self, buckets: int = 40) -> list[float]:
        """The per-task pass rate (see pass_rate) as it evolved: the scored rollouts in finishing order, cut
        into up to `buckets` equal slices, and the rate over every rollout finished by the end of each slice.
        Cumulative, so the last point is the pass rate so far; a slice's own rate would weigh the tasks that
        happened to finish in it, and a task's samples by how many landed there."""
        done = sorted(
            (
                (r["finished_at"] or "", r["task_id"], r["passed"] == 1)
                for r in self.rows.values()
                if r["status"] == "finished" and r["scored"] == 1
            ),
            key=lambda d: d[0],
        )
        size = max(1, -(-len(done) // buckets))
        tasks: dict[str, list[int]] = {}  # task -> [passed, scored]
        series = []
        for i, (_, task, passed) in enumerate(done):
            counts = tasks.setdefault(task, [0, 0])
            counts[0] += passed
            counts[1] += 1
            if (i + 1) % size == 0 or i == len(done) - 1:
                series.append(sum(p / n for p, n in tasks.values()) / len(tasks))
        return series

    def pass_rate(self) -> float | None:
        """pass@1 per task, as Store.runs gives it: the mean over tasks with a scored sample of each task's
        share of passing scored samples, every task weighted 1."""
        series = self.pass_rate_series(buckets=1)
        return series[-1] if series else None

    def counts(self) -> Counter:
        c: Counter = Counter()
        for r in self.rows.values():
            if r["status"] == "finished":
                c["finished"] += 1
                if r["failure_kind"] not in (None, "ok"):
                    c["errors"] += 1
            elif r["status"] in UNFINISHED:
                c["running"] += 1
        return c


class EventFollower:
    """The events of one rollout's current attempt, read from where the last read stopped."""

    FIRST_LOAD = 400  # a first look at a huge rollout shows its last events; the rest load on demand

    def __init__(self, reader: StoreReader, rollout_id: str):
        self.reader = reader
        self.rollout_id = rollout_id
        self.attempt: int | None = None
        self.last_seq = -1
        self.verdict_seen = False

    def poll(self, *, load_all: bool = False) -> tuple[dict | None, EventsChunk | None, dict | None]:
        """(the rollout row, new events, the verdict when it first appears)."""
        ro = self.reader.rollout(self.rollout_id)
        if ro is None:
            return None, None, None
        reset = ro["attempt"] != self.attempt or load_all
        if reset:
            self.attempt, self.last_seq, self.verdict_seen = ro["attempt"], -1, False
        total = self.reader.count_events(self.rollout_id, ro["attempt"]) if reset else 0
        limit = None if load_all or not reset else self.FIRST_LOAD
        events = self.reader.events(self.rollout_id, ro["attempt"], self.last_seq, limit)
        if events:
            self.last_seq = events[-1]["seq"]
        skipped = max(0, total - len(events)) if reset else 0
        chunk = EventsChunk(self.rollout_id, ro["attempt"], events, reset, total, skipped)
        verdict = None
        if not self.verdict_seen and ro["status"] != "running":
            verdict = self.reader.verdict(self.rollout_id, ro["attempt"])
            self.verdict_seen = verdict is not None
        return ro, chunk, verdict


@dataclass
class Rates:
    """Rollouts/s and tool calls/s over a sliding window of poll samples."""

    window_s: float = 10.0
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (time, finished, tool calls)

    def add(self, t: float, finished: int, tool_calls: int) -> None:
        self.samples.append((t, finished, tool_calls))
        while len(self.samples) > 2 and t - self.samples[1][0] >= self.window_s:
            self.samples.pop(0)

    def reset(self) -> None:
        self.samples.clear()

    @property
    def rollouts_per_s(self) -> float:
        return self._rate(1)

    @property
    def tool_calls_per_s(self) -> float:
        return self._rate(2)

    def _rate(self, i: int) -> float:
        if len(self.samples) < 2:
            return 0.0
        first, last = self.samples[0], self.samples[-1]
        span = last[0] - first[0]
        return max(0.0, (last[i] - first[i]) / span) if span > 0 else 0.0
