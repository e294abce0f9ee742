"""Datasette metadata for a store: what each table and column holds, and a few canned queries.

    clawsdk db serve                                   # runs datasette with it (pip install datasette)
    clawsdk db metadata > metadata.json && datasette .clawsdk/store.db -m metadata.json

Column descriptions come from the comments in the migrations' CREATE statements, so they are the
same words docs/schema.md shows and cannot drift; tables and queries are described here.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import sqlite_utils

from clawsdk.store.store import PER_TASK_SQL

__all__ = ["COLUMNS", "QUERIES", "TABLES", "column_comments", "metadata"]

TABLES = {
    "_migrations": "The schema migrations applied to this store, in order.",
    "runs": "One row per run (`clawsdk run`, `clawsdk bench run`): its agent, sandbox, samples and settings.",
    "tasks": "Every task a run used, by content hash; `data` is the whole Task as JSON.",
    "rollouts": "One agent attempt at one task sample: how it ended (failure_kind), its reward and counts.",
    "events": "Everything that happened in a rollout, in order: model requests and responses, tool calls and "
              "results, sandbox commands, verifier output. `payload` is JSON; see the tool_calls and "
              "tool_results views for tool traffic as plain columns.",
    "verdicts": "The verifier's verdict on a rollout attempt: its score in [0, 1] and whether it passed.",
    "verdict_scores": "The sub-scores behind a verdict: one row per check, rubric rule or check.py key.",
    "task_errors": "Task files that could not be read, with the field at fault and what to do.",
    "benchmarks": "Frozen benchmark manifests (tasks, weights, judge), by hash.",
    "bench_runs": "Which run scored which benchmark, and whether every task has its k scored samples.",
    "synth_runs": "Task-synthesis runs: route, options, where accepted tasks were written.",
    "synth_candidates": "Every candidate task a synthesis run made, and why it was accepted or dropped.",
    "synth_stages": "Each gate a synthesis candidate went through, with its verdict and output.",
    "judge_cache": "Rubric-judge answers by judge model and prompt hash, so re-scoring costs no model call.",
    "datasets": "Exported training datasets (NAME@vN), with the selection rules that made them.",
    "dataset_rows": "Which rollout (or task) each row of a dataset was built from.",
    "checkpoints": "Trained checkpoints, with their trainer, base model, dataset and metrics.",
    "run_control": "How a live run was steered: the adaptive concurrency controller's decisions and each "
                   "operator's pause, resume, cancel, requeue or setting (`clawsdk ctl`, the TUI), with who and why.",
    "tool_calls": "View: every tool call, its tool name and JSON arguments.",
    "tool_results": "View: every tool result as text (unescaped), with the tool name and whether it failed.",
}

#: columns whose CREATE statement has no comment, described here
COLUMNS = {
    "rollouts": {"run_id": "the run it belongs to", "task_id": "the task's id", "task_hash": "the task's content hash",
                 "passed": "1 when the verdict passed", "agent": "agent plugin name", "model": "the model it used"},
    "events": {"rollout_id": "the rollout it belongs to", "attempt": "the rollout attempt it belongs to"},
    "verdicts": {"verifier": "the verifier that scored it", "score": "in [0, 1]", "passed": "1 when it passed",
                 "detail": "JSON: the verifier's details"},
    "verdict_scores": {"score": "in [0, 1]", "weight": "its weight in the verdict's score",
                       "detail": "what the check found, for humans"},
}

QUERIES = {
    "pass_rate_by_run": {
        "title": "Pass rate by run",
        "description": "Per run, as `clawsdk runs` and `clawsdk bench report`: pass@1 and the mean score are "
                       "means over tasks of each task's scored samples (each task weighted 1); rollouts, "
                       "scored and passed count rollouts; unscored ones (infrastructure failures) are counted "
                       "apart, never as zeros.",
        "sql": f"WITH per_task AS ({PER_TASK_SQL}),\n"
               "per_run AS (\n"
               "  SELECT run_id, COUNT(pass_rate) AS tasks_scored, ROUND(AVG(pass_rate), 3) AS pass_at_1,\n"
               "         ROUND(AVG(mean_reward), 3) AS mean_score FROM per_task GROUP BY run_id)\n"
               "SELECT o.run_id, GROUP_CONCAT(DISTINCT o.agent) AS agent, COUNT(DISTINCT o.task_id) AS tasks,\n"
               "       p.tasks_scored, p.pass_at_1, p.mean_score, COUNT(*) AS rollouts,\n"
               "       SUM(o.scored = 1) AS scored, SUM(o.passed = 1) AS passed, SUM(o.scored = 0) AS unscored\n"
               "FROM rollouts o LEFT JOIN per_run p ON p.run_id = o.run_id\n"
               "WHERE o.status = 'finished' GROUP BY o.run_id ORDER BY o.run_id",
    },
    "endings": {
        "title": "How rollouts ended",
        "description": "Rollouts per run and failure kind.",
        "sql": "SELECT run_id, failure_kind, COUNT(*) AS rollouts FROM rollouts WHERE status = 'finished'\n"
               "GROUP BY run_id, failure_kind ORDER BY run_id, rollouts DESC",
    },
    "rollout_timeline": {
        "title": "One rollout, call by call",
        "description": "The events of a rollout attempt in order, tool results as text.",
        "sql": "SELECT e.seq, e.kind, e.ts, e.duration_ms,\n"
               "       COALESCE(json_extract(e.payload, '$.tool'), json_extract(e.payload, '$.check')) AS what,\n"
               "       CASE e.kind WHEN 'tool_result' THEN json_extract(e.payload, '$.content')\n"
               "                   WHEN 'tool_call' THEN json_extract(e.payload, '$.args')\n"
               "                   ELSE e.payload END AS detail\n"
               "FROM events e WHERE e.rollout_id = :rollout_id\n"
               "  AND e.attempt = (SELECT attempt FROM rollouts WHERE id = :rollout_id) ORDER BY e.seq",
    },
    "failed_tool_calls": {
        "title": "Tool calls that failed",
        "description": "Every tool result marked as an error, with the rollout and task it belongs to.",
        "sql": "SELECT r.run_id, r.task_id, t.rollout_id, t.seq, t.tool, t.content\n"
               "FROM tool_results t JOIN rollouts r ON r.id = t.rollout_id\n"
               "WHERE t.is_error = 1 ORDER BY r.run_id, r.task_id, t.seq",
    },
}

_COLUMN = re.compile(r"^\s*\"?(\w+)\"?\s+[A-Z][^\n]*?(?:--\s*(?P<dash>.+)|/\*\s*(?P<block>.+?)\s*\*/)", re.M)


def column_comments(sql: str) -> dict[str, str]:
    """{column: its comment} from a CREATE TABLE or CREATE VIEW statement's `--` and `/* */` comments."""
    out: dict[str, str] = {}
    for line in sql.splitlines():
        # a view's column is named after AS; a table's column is the line's first word
        m = re.search(r"\bAS\s+(\w+)\b[^-]*--\s*(.+)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
            continue
        m = _COLUMN.match(line)
        if m and m.group(1).upper() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CREATE", "SELECT", "FROM"):
            out[m.group(1)] = (m.group("dash") or m.group("block")).strip()
    for m in re.finditer(r",\s*(\w+)\s+[A-Z]+[^,/]*/\*\s*(.+?)\s*\*/", sql):  # ALTER TABLE ... ADD COLUMN x /* */
        out.setdefault(m.group(1), m.group(2))
    return out


def metadata(db_path: str | Path | None = None) -> dict[str, Any]:
    """Datasette metadata for the store at `db_path` (its database name is the file's stem)."""
    from clawsdk.store.migrations import migrate

    db = sqlite_utils.Database(sqlite3.connect(":memory:"))
    migrate(db)
    tables: dict[str, Any] = {}
    for _kind, name, sql in db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') AND sql IS NOT NULL"
    ).fetchall():
        entry: dict[str, Any] = {"description": TABLES.get(name, "")}
        columns = {**COLUMNS.get(name, {}), **column_comments(sql)}
        if columns:
            entry["columns"] = columns
        if name == "events":
            entry["sort"] = "id"
        tables[name] = entry
    name = Path(db_path).stem if db_path else "store"
    return {
        "title": "clawsdk store",
        "description": "Runs, rollouts, every model and tool call, verdicts, datasets and checkpoints. "
                       "Schema: docs/schema.md.",
        "databases": {name: {"tables": tables, "queries": QUERIES}},
    }
