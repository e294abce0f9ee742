"""The store's schema as Markdown, generated from the migrations (docs/schema.md is this output).

    python -m clawsdk.store.schema > docs/schema.md
"""

from __future__ import annotations

import sqlite3

import sqlite_utils

from clawsdk.store.migrations import MIGRATIONS, migrate


def schema_markdown() -> str:
    db = sqlite_utils.Database(sqlite3.connect(":memory:"))
    migrate(db)
    lines = [
        "# The store schema",
        "",
        "Generated from `clawsdk/store/migrations.py` by `python -m clawsdk.store.schema`; a test",
        "checks that this file matches, so it cannot drift. The store is one SQLite file (WAL mode);",
        "open it with `sqlite3`, Datasette or any SQLite tool. JSON columns hold JSON text.",
        "",
        "Every relation is a declared foreign key (`PRAGMA foreign_key_list`, and Datasette links",
        "them); the store does not turn on `PRAGMA foreign_keys`, so they are checked with",
        "`PRAGMA foreign_key_check`, never by a write failing. The `tool_calls` and `tool_results`",
        "views show tool traffic as plain columns, a long tool result as its text.",
        "",
        "To browse a store in Datasette, with every table and column described and canned queries",
        "(pass rate by run, endings, one rollout call by call, failed tool calls). The store holds the tasks'",
        "hidden verifier files, so every page needs a login: `clawsdk db serve` prints a one-time URL that logs",
        "the browser in as root (`--open` opens it). It binds 127.0.0.1; another `--host` needs `--public`.",
        "It shows the store as it is, a run writing it included (what the write-ahead log holds); only a store in",
        "a folder it cannot write is opened immutable.",
        "",
        "```bash",
        "pip install 'clawsdk[db]'                 # datasette (make venv installs it)",
        "clawsdk db serve                          # the default store; --db PATH for another; prints a login URL",
        "clawsdk db metadata > metadata.json        # or run datasette yourself: datasette STORE -m metadata.json",
        "```",
        "",
        "Migrations applied, in order: " + ", ".join(f"`{name}`" for name, _ in MIGRATIONS) + ".",
        "",
    ]
    rows = db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
        "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid"
    ).fetchall()
    for kind, name, sql in rows:
        if kind == "table":
            lines += [f"## `{name}`", "", "```sql", _dedent(sql), "```", ""]
    views = [(name, sql) for kind, name, sql in rows if kind == "view"]
    if views:
        lines += ["## Views", ""]
        for name, sql in views:
            lines += [f"### `{name}`", "", "```sql", _dedent(sql), "```", ""]
    indexes = [(name, sql) for kind, name, sql in rows if kind == "index"]
    if indexes:
        lines += ["## Indexes", "", "```sql"] + [sql + ";" for _, sql in indexes] + ["```", ""]
    return "\n".join(lines)


def _dedent(sql: str) -> str:
    body = sql.splitlines()
    indents = [len(line) - len(line.lstrip()) for line in body[1:] if line.strip()]
    cut = min(indents) if indents else 0
    return "\n".join([body[0]] + [line[cut:] if cut > 0 else line for line in body[1:]])


if __name__ == "__main__":
    print(schema_markdown(), end="")
