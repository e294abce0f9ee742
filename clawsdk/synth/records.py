"""Synthesis records in the store: runs, candidates, and every stage's verdict, output and reason."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from clawsdk.store.store import Store, dumps, now

FINAL = ("accepted", "rejected")  # an "error" (model or sandbox failure) is retried on resume


class SynthRecords:
    """Reads and writes the synth_* tables; each write is its own transaction."""

    def __init__(self, store: Store):
        self.store = store

    # ---- writes -----------------------------------------------------------------------------

    def start_run(self, run_id: str, route: str, out_dir: str | None, config: dict[str, Any]) -> bool:
        """Create the run, or mark an existing one running again; True when it existed (a resume)."""
        existing = self.run(run_id)
        if existing and existing["route"] != route:
            raise ValueError(f"synthesis run {run_id!r} is a {existing['route']} run, not {route}; "
                             "choose another --run-id")
        ts = now()
        with self.store.transaction():
            self.store.db.execute(
                """INSERT INTO synth_runs (id, route, created_at, updated_at, status, out_dir, config)
                   VALUES (?, ?, ?, ?, 'running', ?, ?)
                   ON CONFLICT(id) DO UPDATE SET status = 'running', updated_at = excluded.updated_at""",
                [run_id, route, ts, ts, out_dir, dumps(config)],
            )
        return existing is not None

    def finish_run(self, run_id: str, status: str = "finished") -> None:
        with self.store.transaction():
            self.store.db.execute("UPDATE synth_runs SET status = ?, updated_at = ? WHERE id = ?",
                                  [status, now(), run_id])

    def put_candidate(self, cid: str, *, run_id: str, idx: int, route: str, status: str, stage: str | None = None,
                      category: str | None = None, seed: Any = None, reason: str | None = None,
                      task_id: str | None = None, task_hash: str | None = None, state: Any = None) -> None:
        ts = now()
        with self.store.transaction():
            self.store.db.execute(
                """INSERT INTO synth_candidates (id, run_id, idx, route, category, seed, status, stage, reason,
                                                 task_id, task_hash, state, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(id) DO UPDATE SET status = excluded.status, stage = excluded.stage,
                       reason = excluded.reason, category = COALESCE(excluded.category, category),
                       seed = COALESCE(excluded.seed, seed), task_id = COALESCE(excluded.task_id, task_id),
                       task_hash = COALESCE(excluded.task_hash, task_hash),
                       state = COALESCE(excluded.state, state), updated_at = excluded.updated_at""",
                [cid, run_id, idx, route, category, None if seed is None else dumps(seed), status, stage, reason,
                 task_id, task_hash, None if state is None else dumps(state), ts, ts],
            )

    def stage(self, cid: str, stage: str, verdict: str, detail: str = "", output: Any = None, round: int = 0,
              duration_s: float | None = None) -> None:
        with self.store.transaction():
            self.store.db.execute(
                """INSERT INTO synth_stages (candidate_id, stage, round, verdict, detail, output, duration_s,
                                             created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                [cid, stage, round, verdict, detail[:4000], None if output is None else dumps(output), duration_s,
                 now()],
            )

    def clear_stages(self, cid: str, after_id: int | None = None) -> None:
        """Forget the stages of a candidate that will be redone (resume of an unfinished one)."""
        with self.store.transaction():
            if after_id is None:
                self.store.db.execute("DELETE FROM synth_stages WHERE candidate_id = ?", [cid])
            else:
                self.store.db.execute("DELETE FROM synth_stages WHERE candidate_id = ? AND id > ?", [cid, after_id])

    # ---- reads ------------------------------------------------------------------------------

    def run(self, run_id: str) -> dict | None:
        rows = self.store.query("SELECT * FROM synth_runs WHERE id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self) -> list[dict]:
        return self.store.query(
            """SELECT r.*, COUNT(c.id) AS candidates, SUM(c.status = 'accepted') AS accepted,
                      SUM(c.status = 'rejected') AS rejected, SUM(c.status = 'error') AS errors
               FROM synth_runs r LEFT JOIN synth_candidates c ON c.run_id = r.id
               GROUP BY r.id ORDER BY r.created_at DESC""")

    def candidates(self, run_id: str) -> list[dict]:
        rows = self.store.query("SELECT * FROM synth_candidates WHERE run_id = ? ORDER BY idx", [run_id])
        for r in rows:
            r["seed"] = json.loads(r["seed"]) if r["seed"] else None
            r["state"] = json.loads(r["state"]) if r["state"] else None
        return rows

    def stages(self, cid: str) -> list[dict]:
        rows = self.store.query("SELECT * FROM synth_stages WHERE candidate_id = ? ORDER BY id", [cid])
        for r in rows:
            r["output"] = json.loads(r["output"]) if r["output"] else None
        return rows

    def find(self, query: str) -> list[dict]:
        """Candidates by candidate id, task id, or a prefix of either or of the task hash."""
        rows = self.store.query(
            """SELECT * FROM synth_candidates WHERE id = ? OR task_id = ? ORDER BY created_at DESC""",
            [query, query])
        if not rows:
            like = query.replace("%", r"\%").replace("_", r"\_") + "%"
            rows = self.store.query(
                r"""SELECT * FROM synth_candidates WHERE id LIKE ? ESCAPE '\' OR task_id LIKE ? ESCAPE '\'
                    OR task_hash LIKE ? ESCAPE '\' ORDER BY created_at DESC LIMIT 50""", [like, like, like])
        for r in rows:
            r["seed"] = json.loads(r["seed"]) if r["seed"] else None
        return rows

    def summary(self, run_id: str) -> dict[str, Any]:
        """Counts a report shows: candidates, passes per stage, accepted, per group, rejection reasons."""
        cands = self.candidates(run_id)
        stage_rows = self.store.query(
            """SELECT s.stage, s.verdict, s.candidate_id FROM synth_stages s
               JOIN synth_candidates c ON c.id = s.candidate_id WHERE c.run_id = ? ORDER BY s.id""", [run_id])
        passed: dict[str, set] = defaultdict(set)
        order: list[str] = []
        for r in stage_rows:
            if r["stage"] not in order:
                order.append(r["stage"])
            if r["verdict"] == "pass":
                passed[r["stage"]].add(r["candidate_id"])
        groups: dict[str, Counter] = defaultdict(Counter)
        for c in cands:
            seed = c["seed"] or {}
            group = seed.get("family") or c["category"] or "?"
            groups[group]["generated"] += 1
            groups[group][c["status"]] += 1
        status = Counter(c["status"] for c in cands)
        reasons = Counter((c["stage"], (c["reason"] or "")[:80]) for c in cands if c["status"] in ("rejected", "error"))
        return {
            "run": self.run(run_id),
            "candidates": len(cands),
            "status": dict(status),
            "gates": [(s, len(passed[s])) for s in order],
            "groups": {g: dict(v) for g, v in sorted(groups.items())},
            "reasons": reasons.most_common(),
            "validity": status["accepted"] / len(cands) if cands else 0.0,
        }
