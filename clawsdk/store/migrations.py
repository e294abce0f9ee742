"""Append-only, named schema migrations. Never edit a shipped one: add a new one that says why.

Each migration runs in the same transaction as the row that records it, so a crash leaves
either the old schema or the new one, never half of each.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import sqlite_utils

from clawsdk.errors import StoreError

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


def check_is_store(db: sqlite_utils.Database) -> None:
    """Refuse a SQLite file with tables but no `_migrations`: someone else's database, which clawsdk
    would otherwise fill with its own tables. (A store makes `_migrations` before any other table.)"""
    names = [n for n in db.table_names() if not n.startswith("sqlite_")]  # SQLite's own (ANALYZE's stats)
    if names and "_migrations" not in names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise StoreError(f"not a clawsdk store but a SQLite database with other tables ({shown}); "
                         "give --db a clawsdk store, or a new file")


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply the migrations this file knows and the store lacks; return their names.

    StoreError (no path in it: the caller names the file) for a database that is not a store or that a
    newer clawsdk wrote."""
    check_is_store(db)
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    done = set(applied(db))
    known = {name for name, _ in MIGRATIONS}
    unknown = done - known
    if unknown:
        raise StoreError(f"written by a newer clawsdk (migrations {sorted(unknown)}); upgrade clawsdk")
    ran = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            if name in applied(db):  # another process creating the same store applied it while this one waited
                db.conn.execute("COMMIT")
                continue
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                [name, dt.datetime.now(dt.UTC).isoformat()],
            )
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
        ran.append(name)
    return ran


@migration
def m002_benchmarks(db: sqlite_utils.Database) -> None:
    """Benchmarks: the frozen manifests built or run, and which run scored which manifest
    (a run stays 'partial' until every task has its k scored samples)."""
    db.execute(
        """
        CREATE TABLE benchmarks (
            hash TEXT PRIMARY KEY,        -- Manifest.hash: tasks, weights, judge model
            name TEXT NOT NULL,
            version TEXT NOT NULL,
            n_tasks INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            data TEXT NOT NULL            -- JSON: the whole manifest, build log included
        )"""
    )
    db.execute(
        """
        CREATE TABLE bench_runs (
            run_id TEXT PRIMARY KEY REFERENCES runs(id),
            benchmark_hash TEXT NOT NULL REFERENCES benchmarks(hash),
            samples INTEGER NOT NULL,     -- k samples per task asked for
            status TEXT NOT NULL,         -- partial | complete
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )"""
    )


@migration
def m003_synthesis(db: sqlite_utils.Database) -> None:
    """Task synthesis: every candidate task, each gate's verdict and output, and why a candidate was
    dropped, so a user can ask why and an interrupted synthesis can resume."""
    db.execute(
        """
        CREATE TABLE synth_runs (
            id TEXT PRIMARY KEY,          -- the synthesis run id (--run-id); a rerun with it resumes
            route TEXT NOT NULL,          -- procedural | persona | skill
            created_at TEXT NOT NULL,
            updated_at TEXT,
            status TEXT NOT NULL,         -- running | finished | interrupted
            out_dir TEXT,                 -- where accepted tasks are written
            config TEXT                   -- JSON: the options it ran with
        )"""
    )
    db.execute(
        """
        CREATE TABLE synth_candidates (
            id TEXT PRIMARY KEY,          -- <run id>/<index>
            run_id TEXT NOT NULL REFERENCES synth_runs(id),
            idx INTEGER NOT NULL,
            route TEXT NOT NULL,
            category TEXT,
            seed TEXT,                    -- JSON: what it was made from (family/level, persona/operations, skills)
            status TEXT NOT NULL,         -- pending | accepted | rejected | error
            stage TEXT,                   -- the last stage it reached (where it was dropped, if it was)
            reason TEXT,                  -- why it was dropped or failed, for humans
            task_id TEXT,
            task_hash TEXT,
            state TEXT,                   -- JSON: the candidate after its last finished stage (resume)
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (run_id, idx)
        )"""
    )
    db.execute("CREATE INDEX synth_candidates_status ON synth_candidates(run_id, status)")
    db.execute("CREATE INDEX synth_candidates_task ON synth_candidates(task_id)")
    db.execute(
        """
        CREATE TABLE synth_stages (
            id INTEGER PRIMARY KEY,
            candidate_id TEXT NOT NULL REFERENCES synth_candidates(id),
            stage TEXT NOT NULL,          -- draft | leak_judge | workspace | verifier | rubric | dedup | assemble
                                          -- | generate | distinct | untouched_fails | reference_passes
            round INTEGER NOT NULL DEFAULT 0,  -- repair round within a stage
            verdict TEXT NOT NULL,        -- pass | fail | repair | error
            detail TEXT,                  -- the reason, for humans
            output TEXT,                  -- JSON: what the stage produced (model text, scores)
            duration_s REAL,
            created_at TEXT NOT NULL
        )"""
    )
    db.execute("CREATE INDEX synth_stages_candidate ON synth_stages(candidate_id, id)")


@migration
def m004_judge_cache(db: sqlite_utils.Database) -> None:
    """Rubric-judge answers by (judge model, prompt hash): re-scoring the same workspace costs no model call."""
    db.execute(
        """
        CREATE TABLE judge_cache (
            model TEXT NOT NULL,          -- the judge: its Model.name, else BACKEND[:MODEL]
            prompt_hash TEXT NOT NULL,    -- sha256 of the judge's messages and max_tokens
            response TEXT NOT NULL,       -- the judge's answer text, parsed again on a hit
            created_at TEXT NOT NULL,
            PRIMARY KEY (model, prompt_hash)
        )"""
    )


@migration
def m005_training_lineage(db: sqlite_utils.Database) -> None:
    """Training lineage: each exported dataset (versioned by name) with the rollouts or tasks it holds,
    and each checkpoint with the dataset, runs and base model that trained it."""
    db.execute(
        """
        CREATE TABLE datasets (
            id TEXT PRIMARY KEY,          -- NAME@vVERSION
            name TEXT NOT NULL,
            version INTEGER NOT NULL,     -- 1, 2, ... per name: every export of a name is a new version
            kind TEXT NOT NULL,           -- sft | preference | rl
            format_version INTEGER NOT NULL,  -- the export layout's version (clawsdk.data.export.FORMAT_VERSION)
            path TEXT,                    -- the export folder
            n_rows INTEGER NOT NULL,
            content_hash TEXT NOT NULL,   -- sha256 of the rows as written
            selection TEXT,               -- JSON: the selection rules and the runs they were applied to
            created_at TEXT NOT NULL,
            UNIQUE (name, version)
        )"""
    )
    db.execute(
        """
        CREATE TABLE dataset_rows (
            dataset_id TEXT NOT NULL REFERENCES datasets(id),
            row INTEGER NOT NULL,         -- the row index in the export
            role TEXT NOT NULL,           -- example | chosen | rejected | task
            rollout_id TEXT,              -- the rollout it was built from (NULL for an RL task row)
            attempt INTEGER,
            task_hash TEXT NOT NULL,
            PRIMARY KEY (dataset_id, row, role)
        )"""
    )
    db.execute("CREATE INDEX dataset_rows_rollout ON dataset_rows(rollout_id)")
    db.execute(
        """
        CREATE TABLE checkpoints (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            trainer TEXT NOT NULL,        -- trainer plugin name: trl-sft | trl-grpo | ...
            base_model TEXT NOT NULL,     -- what it started from: a path, a hub id, or another checkpoint's path
            parent_id TEXT,               -- the checkpoint it continued from, if it was one
            dataset_id TEXT REFERENCES datasets(id),  -- the data it trained on
            path TEXT NOT NULL,           -- where the weights are (evaluate with --model transformers:PATH)
            runs TEXT,                    -- JSON: run ids of the rollouts generated while training (RL)
            config TEXT,                  -- JSON: the trainer options
            metrics TEXT                  -- JSON: steps, loss, reward, wall time
        )"""
    )
    db.execute("CREATE INDEX checkpoints_dataset ON checkpoints(dataset_id)")


@migration
def m006_run_error(db: sqlite_utils.Database) -> None:
    """A run the runner could not finish ends `failed` (a status m001 did not have), and says why."""
    db.execute("ALTER TABLE runs ADD COLUMN error TEXT /* why the run ended failed or interrupted */")


# m007 rebuilds these tables with the same columns and their relations declared (SQLite adds a
# foreign key only by rebuilding a table). Column lists stay in m001/m005's order, so rows copy as is.
_M007_TABLES = {
    "verdict_scores": """
        CREATE TABLE verdict_scores (
            rollout_id TEXT NOT NULL REFERENCES rollouts(id),
            attempt INTEGER NOT NULL,
            name TEXT NOT NULL,           -- one sub-score: a check, a rubric rule, a check.py key
            score REAL NOT NULL,
            weight REAL NOT NULL DEFAULT 1,
            detail TEXT,
            PRIMARY KEY (rollout_id, attempt, name),
            FOREIGN KEY (rollout_id, attempt) REFERENCES verdicts(rollout_id, attempt)
        )""",
    "task_errors": """
        CREATE TABLE task_errors (
            id INTEGER PRIMARY KEY,
            run_id TEXT REFERENCES runs(id),  -- NULL when no run read the file (e.g. tasks validate)
            path TEXT NOT NULL,           -- the file that could not be read
            field TEXT,                   -- the field at fault, where known
            task_id TEXT,
            message TEXT NOT NULL,
            created_at TEXT NOT NULL
        )""",
    "dataset_rows": """
        CREATE TABLE dataset_rows (
            dataset_id TEXT NOT NULL REFERENCES datasets(id),
            row INTEGER NOT NULL,         -- the row index in the export
            role TEXT NOT NULL,           -- example | chosen | rejected | task
            rollout_id TEXT REFERENCES rollouts(id),  -- the rollout it was built from (NULL for an RL task row)
            attempt INTEGER,
            task_hash TEXT NOT NULL REFERENCES tasks(hash),
            PRIMARY KEY (dataset_id, row, role)
        )""",
    "checkpoints": """
        CREATE TABLE checkpoints (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            trainer TEXT NOT NULL,        -- trainer plugin name: trl-sft | trl-grpo | ...
            base_model TEXT NOT NULL,     -- what it started from: a path, a hub id, or another checkpoint's path
            parent_id TEXT REFERENCES checkpoints(id),  -- the checkpoint it continued from, if it was one
            dataset_id TEXT REFERENCES datasets(id),  -- the data it trained on
            path TEXT NOT NULL,           -- where the weights are (evaluate with --model transformers:PATH)
            runs TEXT,                    -- JSON: run ids of the rollouts generated while training (RL)
            config TEXT,                  -- JSON: the trainer options
            metrics TEXT                  -- JSON: steps, loss, reward, wall time
        )""",
}


@migration
def m007_foreign_keys(db: sqlite_utils.Database) -> None:
    """Declare every relation as a foreign key, so Datasette links the tables and
    `PRAGMA foreign_key_check` can vouch for a store: verdict_scores -> verdicts (and rollouts),
    task_errors -> runs, dataset_rows -> rollouts and tasks, checkpoints -> their parent checkpoint.
    The keys are declared, not enforced (the store leaves PRAGMA foreign_keys off, so a write never
    fails on one). synth_candidates.task_hash stays without one: accepted tasks are written to the
    synthesis out_dir, not to the tasks table. Each table is rebuilt keeping its rows and indexes."""
    for table, create in _M007_TABLES.items():
        indexes = [r[0] for r in db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", [table]
        ).fetchall()]
        columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()]
        db.execute(create.replace(f"CREATE TABLE {table} (", f"CREATE TABLE _m007_{table} (", 1))
        names = ", ".join(columns)
        db.execute(f"INSERT INTO _m007_{table} ({names}) SELECT {names} FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE _m007_{table} RENAME TO {table}")
        for sql in indexes:
            db.execute(sql)


@migration
def m008_readable_views(db: sqlite_utils.Database) -> None:
    """Tool calls and results as plain columns: in `events` they are one JSON payload, which SQLite
    tools and Datasette show as a line of escaped JSON; here a long tool result reads as its text."""
    db.execute(
        """
        CREATE VIEW tool_calls AS
        SELECT e.id, e.rollout_id, e.attempt, e.seq, e.ts,
               json_extract(e.payload, '$.tool') AS tool,
               json_extract(e.payload, '$.args') AS args     -- JSON: the arguments
        FROM events e WHERE e.kind = 'tool_call'"""
    )
    db.execute(
        """
        CREATE VIEW tool_results AS
        SELECT e.id, e.rollout_id, e.attempt, e.seq, e.ts, e.duration_ms,
               json_extract(e.payload, '$.tool') AS tool,
               json_extract(e.payload, '$.is_error') AS is_error,
               json_extract(e.payload, '$.content') AS content   -- the result's text, unescaped
        FROM events e WHERE e.kind = 'tool_result'"""
    )


@migration
def m009_run_control(db: sqlite_utils.Database) -> None:
    """How a live run was steered: each decision of the adaptive concurrency controller (`-c auto`) and each
    change an operator made through the run's control channel (`clawsdk ctl`, the TUI), with who and when."""
    db.execute(
        """
        CREATE TABLE run_control (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            ts TEXT NOT NULL,
            source TEXT NOT NULL,         -- controller | operator
            actor TEXT NOT NULL,          -- who: auto (the controller), or the operator's user, pid and client
            action TEXT NOT NULL,         -- controller: start | raise | lower | hold | revert;
                                          -- operator: pause | resume | cancel | requeue_unscored | set
            level INTEGER,                -- the concurrency in force after it
            paused INTEGER,               -- 1 while the run is paused
            reason TEXT,                  -- why, for humans: the signals behind a decision, what was set
            detail TEXT                   -- JSON: the figures (throughput, latencies, host) or the values set
        )"""
    )
    db.execute("CREATE INDEX run_control_run ON run_control(run_id, id)")
