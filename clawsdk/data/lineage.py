"""Lineage rows: which rollouts (or tasks) each dataset holds, which dataset and runs trained each checkpoint."""

from __future__ import annotations

import json
import secrets
from typing import Any

from clawsdk.store.store import Store, dumps, now

__all__ = [
    "checkpoint",
    "checkpoints",
    "dataset",
    "dataset_rows",
    "new_checkpoint_id",
    "next_version",
    "record_checkpoint",
    "record_dataset",
    "rollouts_behind",
]


def next_version(store: Store, name: str) -> int:
    rows = store.query("SELECT MAX(version) AS v FROM datasets WHERE name = ?", [name])
    return int(rows[0]["v"] or 0) + 1


def record_dataset(
    store: Store,
    *,
    name: str,
    version: int,
    kind: str,
    format_version: int,
    path: str,
    n_rows: int,
    content_hash: str,
    selection: dict | None,
    rows: list[tuple[int, str, str | None, int | None, str]],
) -> str:
    """rows: (row, role, rollout_id, attempt, task_hash). Returns the dataset id NAME@vVERSION."""
    dataset_id = f"{name}@v{version}"
    with store.transaction():
        store.db.execute(
            "INSERT INTO datasets (id, name, version, kind, format_version, path, n_rows, content_hash, selection, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                dataset_id,
                name,
                version,
                kind,
                format_version,
                path,
                n_rows,
                content_hash,
                dumps(selection) if selection is not None else None,
                now(),
            ],
        )
        store.db.conn.executemany(
            "INSERT INTO dataset_rows (dataset_id, row, role, rollout_id, attempt, task_hash) VALUES (?, ?, ?, ?, ?, ?)",
            [(dataset_id, *r) for r in rows],
        )
    return dataset_id


def new_checkpoint_id() -> str:
    """A fresh checkpoint id (`ckpt-` and 8 hex digits)."""
    return f"ckpt-{secrets.token_hex(4)}"


def record_checkpoint(
    store: Store,
    *,
    trainer: str,
    base_model: str,
    path: str,
    dataset_id: str | None,
    parent_id: str | None = None,
    runs: list[str] | None = None,
    config: dict | None = None,
    metrics: dict | None = None,
    checkpoint_id: str | None = None,
) -> str:
    cid = checkpoint_id or new_checkpoint_id()
    with store.transaction():
        store.db.execute(
            "INSERT INTO checkpoints (id, created_at, trainer, base_model, parent_id, dataset_id, path, runs, config, "
            "metrics) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                cid,
                now(),
                trainer,
                base_model,
                parent_id,
                dataset_id,
                path,
                dumps(runs or []),
                dumps(config or {}),
                dumps(metrics or {}),
            ],
        )
    return cid


def _decode(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    for k in keys:
        if row.get(k):
            row[k] = json.loads(row[k])
    return row


def dataset(store: Store, ref: str) -> dict[str, Any]:
    """A dataset by id (NAME@vN), or by name (its latest version)."""
    rows = store.query("SELECT * FROM datasets WHERE id = ?", [ref])
    if not rows:
        rows = store.query("SELECT * FROM datasets WHERE name = ? ORDER BY version DESC LIMIT 1", [ref])
    if not rows:
        known = [r["id"] for r in store.query("SELECT id FROM datasets ORDER BY created_at DESC LIMIT 10")]
        raise LookupError(
            f"no dataset {ref!r} in {store.path}"
            + (f" (latest: {', '.join(known)})" if known else " (export one with `clawsdk data export`)")
        )
    return _decode(rows[0], "selection")


def dataset_rows(store: Store, dataset_id: str) -> list[dict[str, Any]]:
    return store.query("SELECT * FROM dataset_rows WHERE dataset_id = ? ORDER BY row, role", [dataset_id])


def checkpoint(store: Store, ref: str) -> dict[str, Any]:
    rows = store.query("SELECT * FROM checkpoints WHERE id = ? OR path = ?", [ref, ref])
    if not rows:
        raise LookupError(f"no checkpoint {ref!r} in {store.path}")
    return _decode(rows[0], "runs", "config", "metrics")


def checkpoints(store: Store) -> list[dict[str, Any]]:
    return [
        _decode(r, "runs", "config", "metrics")
        for r in store.query("SELECT * FROM checkpoints ORDER BY created_at")
    ]


def rollouts_behind(store: Store, checkpoint_id: str) -> list[str]:
    """Every rollout that trained a checkpoint: through its dataset, its RL runs, and its parents."""
    out: list[str] = []
    seen: set[str] = set()
    ref: str | None = checkpoint_id
    while ref and ref not in seen:
        seen.add(ref)
        c = checkpoint(store, ref)
        if c["dataset_id"]:
            out += [r["rollout_id"] for r in dataset_rows(store, c["dataset_id"]) if r["rollout_id"]]
        for run_id in c.get("runs") or []:
            out += [r["id"] for r in store.query("SELECT id FROM rollouts WHERE run_id = ?", [run_id])]
        ref = c["parent_id"]
    return list(dict.fromkeys(out))
