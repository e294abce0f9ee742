"""A synthetic store for demos, tests and the benchmark: runs, rollouts and events written directly.

Rows go in with executemany in one transaction (a million events take seconds), through the
real schema (Store applies the migrations). Deterministic for a given seed and base time, so
screenshots of it are stable.

    python -m clawsdk_tui.synthetic demo.db --rollouts 2000 --events 40 --running 6
    clawsdk watch --db demo.db
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clawsdk.store.store import Store

BASE = dt.datetime(2025, 1, 6, 9, 0, 0, tzinfo=dt.UTC)
CATEGORIES = (
    "systems & automation",
    "content & domain",
    "productivity & communication",
    "analysis & reasoning",
    "planning & knowledge",
)
VERBS = ("summarise", "rename", "dedupe", "schedule", "extract", "report", "convert", "audit")
NOUNS = ("access-log", "invoices", "meeting-notes", "photos", "contacts", "changelog", "subtitles", "budget")
FAILURES = (
    ("agent_error", 4),
    ("agent_timeout", 3),
    ("model_error", 2),
    ("sandbox_error", 1),
    ("verifier_error", 1),
)


def ts(seconds: float) -> str:
    return (BASE + dt.timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def task_ids(n: int) -> list[str]:
    return [f"{VERBS[i % len(VERBS)]}-{NOUNS[(i // len(VERBS)) % len(NOUNS)]}-{i:04d}" for i in range(n)]


def _events(
    rng: random.Random, rollout_id: str, n: int, start: float, task: str, checks: bool = True
) -> Iterator[tuple]:
    """n events shaped like a tool-calling rollout: model turn, tool call, tool result, ..., checks."""
    t = start
    seq = 0
    body = n - 3 if n > 6 and checks else n
    while seq < body:
        step = seq % 4
        payload: dict[str, Any]
        if step == 0:
            payload = {"messages": [{"role": "user", "content": f"Please {task.replace('-', ' ')}."}]}
            kind, dur = "model_request", None
        elif step == 1:
            path = f"data/{rng.choice(NOUNS)}.json"
            payload = {
                "message": {
                    "role": "assistant",
                    "content": f"Reading {path} first.",
                    "tool_calls": [{"function": {"name": "read", "arguments": json.dumps({"path": path})}}],
                },
                "usage": {"prompt_tokens": 400 + seq * 30, "completion_tokens": 40},
            }
            kind, dur = "model_response", rng.uniform(200, 900)
        elif step == 2:
            payload = {
                "tool": rng.choice(("read", "exec", "write", "grep")),
                "args": {"path": f"data/{rng.choice(NOUNS)}.json", "limit": 50},
            }
            kind, dur = "tool_call", None
        else:
            lines = rng.randint(1, 30)
            payload = {
                "tool": "read",
                "is_error": rng.random() < 0.03,
                "content": "\n".join(f'{{"id": {i}, "amount": {rng.randint(1, 999)}}}' for i in range(lines)),
            }
            kind, dur = "tool_result", rng.uniform(1, 40)
        t += rng.uniform(0.05, 0.6)
        yield (rollout_id, 0, seq, kind, ts(t), dur, json.dumps(payload, separators=(",", ":")))
        seq += 1
    while seq < n:
        t += 0.05
        payload = {
            "check": f"check {seq - body + 1}",
            "score": rng.choice((0.0, 0.5, 1.0, 1.0)),
            "detail": "compared report.json with the expected totals",
        }
        yield (rollout_id, 0, seq, "verifier", ts(t), None, json.dumps(payload, separators=(",", ":")))
        seq += 1


def fill_store(
    path: str | Path,
    *,
    rollouts: int = 200,
    events_per_rollout: int = 20,
    running: int = 3,
    tasks: int | None = None,
    run_id: str = "demo-run",
    seed: int = 0,
    run_status: str | None = None,
    batch: int = 50_000,
) -> dict:
    """Write one run with `rollouts` rollouts (the last `running` still running) and their events."""
    rng = random.Random(seed)
    n_tasks = tasks or max(1, min(rollouts, rollouts // 4 or 1))
    ids = task_ids(n_tasks)
    samples = -(-rollouts // n_tasks)
    hashes = {t: hashlib.sha256(t.encode()).hexdigest() for t in ids}
    with Store(path) as store:
        conn = store.db.conn
        with store.transaction():
            conn.execute(
                "INSERT OR REPLACE INTO runs (id, created_at, updated_at, status, agent, sandbox, samples, config) "
                "VALUES (?, ?, ?, ?, 'tool-loop', 'bwrap', ?, '{}')",
                [run_id, ts(0), ts(0), run_status or ("running" if running else "finished"), samples],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO tasks (hash, id, category, difficulty, source, instruction, data) "
                "VALUES (?, ?, ?, 'medium', 'synthetic', ?, '{}')",
                [
                    (
                        hashes[t],
                        t,
                        CATEGORIES[i % len(CATEGORIES)],
                        f"Please {t.rsplit('-', 1)[0].replace('-', ' ')} in the workspace and write report.json.",
                    )
                    for i, t in enumerate(ids)
                ],
            )
            rows: list[tuple] = []
            events: list[tuple] = []
            n_events = 0
            for i in range(rollouts):
                task = ids[i % n_tasks]
                sample = i // n_tasks
                rid = "r" + hashlib.sha256(f"{run_id}:{task}:{sample}".encode()).hexdigest()[:15]
                start = i * 0.8 + rng.uniform(0, 0.5)
                live = i >= rollouts - running
                n_ev = events_per_rollout
                if live:
                    rows.append(
                        (
                            rid,
                            run_id,
                            task,
                            hashes[task],
                            sample,
                            0,
                            "running",
                            None,
                            None,
                            None,
                            None,
                            None,
                            n_ev // 4,
                            n_ev // 4,
                            ts(start),
                            None,
                            None,
                        )
                    )
                else:
                    kind = (
                        "ok"
                        if rng.random() > 0.08
                        else rng.choices([k for k, _ in FAILURES], [w for _, w in FAILURES])[0]
                    )
                    scored = kind in ("ok", "agent_error", "agent_timeout")
                    reward = (
                        rng.choice((0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0))
                        if kind == "ok"
                        else (0.0 if scored else None)
                    )
                    passed = None if reward is None else int(reward >= 1.0)
                    duration = rng.uniform(2, 90)
                    error = None if kind == "ok" else f"{kind.replace('_', ' ')} in step {rng.randint(1, 9)}"
                    rows.append(
                        (
                            rid,
                            run_id,
                            task,
                            hashes[task],
                            sample,
                            0,
                            "finished",
                            kind,
                            int(scored),
                            reward,
                            passed,
                            error,
                            n_ev // 4,
                            n_ev // 4,
                            ts(start),
                            ts(start + duration),
                            duration,
                        )
                    )
                events.extend(_events(rng, rid, n_ev, start, task, checks=not live))
                if len(events) >= batch:
                    store.insert_events(events)
                    n_events += len(events)
                    events = []
            conn.executemany(
                "INSERT OR REPLACE INTO rollouts (id, run_id, task_id, task_hash, sample, attempt, status, "
                "failure_kind, scored, reward, passed, error, n_tool_calls, n_model_calls, started_at, finished_at, "
                "duration_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            store.insert_events(events)
            n_events += len(events)
            conn.executemany(
                "INSERT OR REPLACE INTO verdicts (rollout_id, attempt, verifier, score, passed, detail, duration_s, "
                "created_at) VALUES (?, 0, 'checks', ?, ?, NULL, 0.1, ?)",
                [(r[0], r[9], r[10], r[15]) for r in rows if r[9] is not None],
            )
    return {"rollouts": rollouts, "events": n_events, "tasks": n_tasks, "run_id": run_id}


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic clawsdk store to try `clawsdk watch` on.")
    parser.add_argument("db")
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--events", type=int, default=20, help="events per rollout")
    parser.add_argument("--running", type=int, default=3)
    parser.add_argument("--run-id", default="demo-run")
    args = parser.parse_args()
    print(
        fill_store(
            args.db,
            rollouts=args.rollouts,
            events_per_rollout=args.events,
            running=args.running,
            run_id=args.run_id,
        )
    )


if __name__ == "__main__":
    main()
