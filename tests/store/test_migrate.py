"""Stores written by older clawsdk versions upgrade with their rows intact (like llm's test_migrate).

For every prefix m001..mK of the migrations, a store is built at that schema, one representative
row goes into every table it has, and opening it with the current Store upgrades it. The rows
must read back unchanged and the upgraded schema must be exactly a fresh store's.
"""

from __future__ import annotations

import sqlite3

import pytest
import sqlite_utils

from clawsdk.errors import StoreError
from clawsdk.store import migrations
from clawsdk.store.store import Store

NAMES = [name for name, _ in migrations.MIGRATIONS]


def _schema(db: sqlite_utils.Database) -> set[tuple[str, str, str]]:
    rows = db.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                      "AND sql IS NOT NULL").fetchall()
    return {(kind, name, " ".join(sql.split())) for kind, name, sql in rows}


def _value(table: str, column: str, kind: str) -> object:
    kind = kind.upper()
    if "INT" in kind:
        return 1
    if any(t in kind for t in ("REAL", "FLOA", "DOUB")):
        return 0.5
    if "BLOB" in kind:
        return b"\x00blob"
    if column.endswith("_at") or column == "ts":
        return "2026-01-01T00:00:00+00:00"
    if column in ("config", "data", "payload", "metrics", "manifest", "detail_json", "spec") or column.endswith("_json"):
        return '{"kept": true}'
    return f"{table}.{column}"


def _fill(db: sqlite_utils.Database) -> dict[str, dict]:
    """One row in every table (every column set), keyed by table."""
    rows = {}
    for table in db.table_names():
        if table == "_migrations" or table.endswith(("_fts", "_fts_data", "_fts_idx", "_fts_docsize", "_fts_config")):
            continue
        cols = db.execute(f"PRAGMA table_info([{table}])").fetchall()
        row = {c[1]: _value(table, c[1], c[2] or "") for c in cols}
        db.execute(f"INSERT INTO [{table}] ({', '.join(f'[{c}]' for c in row)}) "
                   f"VALUES ({', '.join('?' for _ in row)})", list(row.values()))
        rows[table] = row
    db.conn.commit()
    return rows


def _build_at(path, k: int, monkeypatch) -> dict[str, dict]:
    """A store file that older clawsdk (knowing migrations[:k]) wrote, with a row in each table."""
    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:k])
        db = sqlite_utils.Database(sqlite3.connect(str(path)))
        assert migrations.migrate(db) == NAMES[:k]
        rows = _fill(db)
        db.close()
    return rows


def test_there_are_older_schemas_to_upgrade_from():
    assert len(NAMES) >= 6 and NAMES[0] == "m001_initial"


@pytest.mark.parametrize("k", range(1, len(NAMES)), ids=lambda k: f"from-{NAMES[k - 1]}")
def test_an_old_store_upgrades_with_its_rows(tmp_path, monkeypatch, k):
    old = tmp_path / "old.db"
    rows = _build_at(old, k, monkeypatch)
    assert {"runs", "tasks", "rollouts", "events"} <= set(rows)

    with Store(old) as store:  # opening it for writing upgrades it
        assert migrations.applied(store.db) == NAMES
        for table, row in rows.items():
            cols = ", ".join(f"[{c}]" for c in row)
            got = store.db.execute(f"SELECT {cols} FROM [{table}]").fetchall()
            assert got == [tuple(row.values())], f"{table}: the row written at {NAMES[k - 1]} changed"
        upgraded = _schema(store.db)
        # and the store works on it: the old run is listed, a new one can be written beside it
        assert [r["id"] for r in store.runs()] == ["runs.id"]
        store.upsert_run("after-upgrade", status="finished", agent="oracle", sandbox="local", samples=1)
        assert {r["id"] for r in store.runs()} == {"runs.id", "after-upgrade"}

    with Store(tmp_path / "fresh.db") as fresh:
        assert upgraded == _schema(fresh.db)


def test_a_store_from_a_newer_clawsdk_is_refused(tmp_path):
    with Store(tmp_path / "s.db") as store:
        store.db.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_future', 'x')")
        store.db.conn.commit()
    with pytest.raises(StoreError,
                       match=r"s.db: written by a newer clawsdk \(migrations \['m999_future'\]\); upgrade clawsdk"):
        Store(tmp_path / "s.db")
