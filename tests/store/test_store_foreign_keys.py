"""m007: every relation in the store is a declared foreign key; a store from before keeps its rows."""

from __future__ import annotations

import sqlite3

from clawsdk.store import migrations
from clawsdk.store.store import Store

ROWS = {
    "runs": "INSERT INTO runs (id, created_at, status) VALUES ('run1', 't', 'finished')",
    "tasks": "INSERT INTO tasks (hash, id, instruction, data) VALUES ('h1', 'task1', 'do it', '{}')",
    "rollouts": "INSERT INTO rollouts (id, run_id, task_id, task_hash, sample, status) "
                "VALUES ('r1', 'run1', 'task1', 'h1', 0, 'finished')",
    "verdicts": "INSERT INTO verdicts (rollout_id, attempt, verifier, score, passed, created_at) "
                "VALUES ('r1', 0, 'checks', 0.5, 0, 't')",
    "verdict_scores": "INSERT INTO verdict_scores (rollout_id, attempt, name, score, weight, detail) "
                      "VALUES ('r1', 0, 'check 1', 1.0, 2.0, 'ok'), ('r1', 0, 'check 2', 0.0, 1.0, NULL)",
    "task_errors": "INSERT INTO task_errors (run_id, path, message, created_at) VALUES ('run1', 'x/task.yaml', 'bad', 't')",
    "datasets": "INSERT INTO datasets (id, name, version, kind, format_version, n_rows, content_hash, created_at) "
                "VALUES ('d@v1', 'd', 1, 'sft', 1, 1, 'c', 't')",
    "dataset_rows": "INSERT INTO dataset_rows (dataset_id, row, role, rollout_id, attempt, task_hash) "
                    "VALUES ('d@v1', 0, 'example', 'r1', 0, 'h1')",
    "checkpoints": "INSERT INTO checkpoints (id, created_at, trainer, base_model, parent_id, dataset_id, path) "
                   "VALUES ('c1', 't', 'trl-sft', 'embedded', NULL, 'd@v1', '/ckpt/1'), "
                   "('c2', 't', 'trl-grpo', '/ckpt/1', 'c1', NULL, '/ckpt/2')",
}
REBUILT = ("verdict_scores", "task_errors", "dataset_rows", "checkpoints")


def _links(con: sqlite3.Connection, table: str) -> set[tuple[str, str, str]]:
    return {(r[3], r[2], r[4]) for r in con.execute(f"PRAGMA foreign_key_list({table})")}


def test_an_older_store_gains_the_foreign_keys_and_keeps_its_rows(tmp_path, monkeypatch):
    db = tmp_path / "old.db"
    before = [m for m in migrations.MIGRATIONS if m[0] < "m007"]
    monkeypatch.setattr(migrations, "MIGRATIONS", before)
    Store(db).close()  # a store as the release before m007 made it
    con = sqlite3.connect(db)
    for sql in ROWS.values():
        con.execute(sql)
    con.commit()
    old = {t: con.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in REBUILT}
    assert not _links(con, "verdict_scores")
    con.close()

    monkeypatch.undo()
    with Store(db) as store:
        assert "m007_foreign_keys" in {r["name"] for r in store.query("SELECT name FROM _migrations")}
    con = sqlite3.connect(db)
    assert {t: con.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in REBUILT} == old
    assert _links(con, "verdict_scores") == {("rollout_id", "verdicts", "rollout_id"), ("attempt", "verdicts", "attempt"),
                                             ("rollout_id", "rollouts", "id")}
    assert _links(con, "task_errors") == {("run_id", "runs", "id")}
    assert _links(con, "dataset_rows") == {("dataset_id", "datasets", "id"), ("rollout_id", "rollouts", "id"),
                                           ("task_hash", "tasks", "hash")}
    assert _links(con, "checkpoints") == {("dataset_id", "datasets", "id"), ("parent_id", "checkpoints", "id")}
    indexes = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
    assert {"dataset_rows_rollout", "checkpoints_dataset"} <= indexes
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_store_the_pipeline_wrote_satisfies_every_foreign_key(tmp_path):
    from clawsdk.data.export import export_sft
    from clawsdk.data.lineage import record_checkpoint
    from clawsdk.data.select import Selection, select
    from clawsdk.runtime.runner import run_sync
    from clawsdk.tasks.model import Task, VerifierSpec

    db = tmp_path / "store.db"
    tasks = [Task(id=f"t{i}", instruction="Write ok into a.txt.", tools=["core"],
                  verifier=VerifierSpec(checks=[{"type": "file_exists", "path": "a.txt"},
                                                {"type": "text_equals", "path": "a.txt", "text": "ok"}]),
                  solution=[{"tool": "write", "args": {"path": "a.txt", "content": "ok"}}]) for i in range(2)]
    run_sync(tasks, agent="oracle", sandbox="local", run_id="fk", db=db)
    with Store(db) as store:
        exp = export_sft(store, select(store, Selection(runs=["fk"])), tmp_path / "out", name="fk", formats=["jsonl"])
        first = record_checkpoint(store, trainer="trl-sft", base_model="embedded", path="/c1",
                                  dataset_id=exp.dataset_id)
        record_checkpoint(store, trainer="trl-grpo", base_model="/c1", path="/c2", dataset_id=None, parent_id=first)
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM verdict_scores").fetchone()[0] == 4
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
