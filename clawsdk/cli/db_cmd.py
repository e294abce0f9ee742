"""`clawsdk db serve|metadata`: browse the store in Datasette, with its tables and columns described."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import click

from clawsdk.cli.common import db_option, friendly_errors
from clawsdk.store.store import Store, default_db_path

INSTALL_HINT = ("datasette is not installed; install it with `pip install datasette` (or `pipx install "
                "datasette`) and run this again. Any SQLite tool opens the store too: sqlite3 {db}")


@click.group("db")
def db_group():
    """The store as a database: browse it in Datasette, or get its Datasette metadata."""


@db_group.command("serve")
@db_option
@click.option("--port", "-p", type=int, default=8001, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--open", "open_browser", is_flag=True, help="Open a browser on it.")
@friendly_errors
def serve_command(db, port, host, open_browser):
    """Serve the store read-only with Datasette: table and column descriptions, canned queries
    (pass rate by run, endings, one rollout call by call, failed tool calls) and the tool_results
    view that shows long tool results as text."""
    from clawsdk.store.datasette import metadata

    path = Path(db) if db else default_db_path()
    Store(path, readonly=True).close()  # missing, not SQLite, still being created: one line, before the exec
    datasette = shutil.which("datasette")
    if datasette is None:
        raise click.ClickException(INSTALL_HINT.format(db=path))
    meta = Path(tempfile.mkdtemp(prefix="clawsdk-datasette-")) / "metadata.json"
    meta.write_text(json.dumps(metadata(path), indent=2))
    args = [datasette, "serve", "--immutable", str(path), "--metadata", str(meta), "--port", str(port),
            "--host", host, *(["--open"] if open_browser else [])]
    sys.stdout.flush()
    os.execv(datasette, args)  # datasette owns the terminal from here (Ctrl-C stops it)


@db_group.command("metadata")
@db_option
@friendly_errors
def metadata_command(db):
    """Print the Datasette metadata (JSON) for the store: `datasette STORE -m metadata.json`."""
    from clawsdk.store.datasette import metadata

    path = Path(db) if db else default_db_path()
    Store(path, readonly=True).close()  # the metadata describes a store: refuse a file that is not one
    click.echo(json.dumps(metadata(path), indent=2))
