"""Append-only, named schema migrations. Never edit a shipped one: add a new one that says why.

Each migration runs in the same transaction as the row that records it, so a crash leaves
either the old schema or the new one, never half of each.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import sqlite_utils

Migration = Callable[[sqlite_utils.Database], None]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_initial(db: sqlite_utils.Database) -> None:
    """Runs, tasks, rollouts, their events and verdicts, and tasks that could not be read."""
    db.execute(
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,          -- the run id (--run-id); a rerun with it resumes
            created_at TEXT NOT NULL,
            updated_at TEXT,
            status TEXT NOT NULL,         -- running | finished | interrupted
            agent TEXT,                   -- agent plugin name
            sandbox TEXT,                 -- sandbox plugin name
            samples INTEGER,              -- k samples per task
            config TEXT                   -- JSON: everything needed to rerun it
        )"""
    )
    db.execute(
        """
        CREATE TABLE tasks (
            hash TEXT PRIMARY KEY,        -- Task.hash: sha256 of what defines the task
            id TEXT NOT NULL,
            category TEXT,
            difficulty TEXT,
            source TEXT,                  -- where it was read from
            instruction TEXT NOT NULL,
            data TEXT NOT NULL            -- JSON: the whole Task
        )"""
    )
    db.execute("CREATE INDEX tasks_id ON tasks(id)")
    db.execute(
        """
        CREATE TABLE rollouts (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            task_id TEXT NOT NULL,
            task_hash TEXT NOT NULL REFERENCES tasks(hash),
            sample INTEGER NOT NULL,      -- 0..k-1
            attempt INTEGER NOT NULL DEFAULT 0,  -- bumped by each retry or resume; events keep theirs
            status TEXT NOT NULL,         -- pending | running | finished
            failure_kind TEXT,            -- ok | agent_error | agent_timeout | model_error | sandbox_error
                                          -- | verifier_error | verifier_timeout | cancelled
            scored INTEGER,               -- 1 when the reward counts as the agent's score
            reward REAL,                  -- verdict score in [0, 1], NULL when unscored
            passed INTEGER,
            error TEXT,                   -- what went wrong, for humans
            agent TEXT,
            model TEXT,
            n_tool_calls INTEGER DEFAULT 0,
            n_model_calls INTEGER DEFAULT 0,
            started_at TEXT,
            finished_at TEXT,
            duration_s REAL,
            UNIQUE (run_id, task_id, sample)
        )"""
    )
    db.execute("CREATE INDEX rollouts_run_status ON rollouts(run_id, status)")
    db.execute(
        """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            rollout_id TEXT NOT NULL REFERENCES rollouts(id),
            attempt INTEGER NOT NULL,
            seq INTEGER NOT NULL,         -- order within the rollout attempt, from 0
            kind TEXT NOT NULL,           -- model_request | model_response | tool_call | tool_result
                                          -- | sandbox_exec | verifier | error | note
            ts TEXT NOT NULL,             -- ISO 8601 UTC when it happened
            duration_ms REAL,             -- for results: how long the call took
            payload TEXT NOT NULL,        -- JSON
            UNIQUE (rollout_id, attempt, seq)
        )"""
    )
    db.execute(
        """
        CREATE TABLE verdicts (
            rollout_id TEXT NOT NULL REFERENCES rollouts(id),
            attempt INTEGER NOT NULL,
            verifier TEXT NOT NULL,
            score REAL NOT NULL,
            passed INTEGER NOT NULL,
            detail TEXT,
            duration_s REAL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (rollout_id, attempt)
        )"""
    )
    db.execute(
        """
        CREATE TABLE verdict_scores (
            rollout_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            name TEXT NOT NULL,           -- one sub-score: a check, a rubric rule, a check.py key
            score REAL NOT NULL,
            weight REAL NOT NULL DEFAULT 1,
            detail TEXT,
            PRIMARY KEY (rollout_id, attempt, name)
        )"""
    )
    db.execute(
        """
        CREATE TABLE task_errors (
            id INTEGER PRIMARY KEY,
            run_id TEXT,
            path TEXT NOT NULL,           -- the file that could not be read
            field TEXT,                   -- the field at fault, where known
            task_id TEXT,
            message TEXT NOT NULL,
            created_at TEXT NOT NULL
        )"""
    )


def applied(db: sqlite_utils.Database) -> list[str]:
    if "_migrations" not in db.table_names():
        return []
    return [r[0] for r in db.execute("SELECT name FROM _migrations ORDER BY rowid").fetchall()]


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply the migrations this file knows and the store lacks; return their names."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    done = set(applied(db))
    known = {name for name, _ in MIGRATIONS}
    unknown = done - known
    if unknown:
        raise RuntimeError(
            f"this store was written by a newer clawsdk (migrations {sorted(unknown)}); upgrade clawsdk"
        )
    ran = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                [name, dt.datetime.now(dt.timezone.utc).isoformat()],
            )
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
        ran.append(name)
    return ran
