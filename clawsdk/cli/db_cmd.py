"""`clawsdk db serve|metadata`: browse the store in Datasette, with its tables and columns described."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
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
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; one beyond loopback needs --public.")
@click.option("--public", is_flag=True,
              help="Allow a --host other machines can reach (login still required).")
@click.option("--open", "open_browser", is_flag=True, help="Open a browser on it (logged in).")
@friendly_errors
def serve_command(db, port, host, public, open_browser):
    """Serve the store with Datasette as it is now, a run writing it included: table and column
    descriptions, canned queries (pass rate by run, endings, one rollout call by call, failed tool
    calls) and the tool_results view that shows long tool results as text.

    Every page needs a login: Datasette prints a one-time URL that logs the browser in (the store
    holds the tasks' hidden verifier files). Ctrl-C stops it."""
    from clawsdk._http import is_loopback
    from clawsdk.store.datasette import metadata

    if not is_loopback(host) and not public:
        raise click.ClickException(f"--host {host} would serve the store (hidden verifier files included) "
                                   "beyond this machine; pass --public as well if that is what you want")
    path = Path(db) if db else default_db_path()
    Store(path, readonly=True).close()  # missing, not SQLite, still being created: one line, before it starts
    datasette = shutil.which("datasette")
    if datasette is None:
        raise click.ClickException(INSTALL_HINT.format(db=path))
    if not is_loopback(host):
        click.echo(f"warning: --public: other machines can reach the store at {host}:{port}; only the login "
                   "URL below lets them in", err=True)
    meta = metadata(path)
    # only the root actor sees anything; --root prints the URL that logs a browser in as root
    meta["allow"] = {"id": "root"}
    with tempfile.TemporaryDirectory(prefix="clawsdk-datasette-") as folder:
        meta_file = Path(folder) / "metadata.json"
        meta_file.write_text(json.dumps(meta, indent=2))
        args = [datasette, "serve", *_store_args(path), "--metadata", str(meta_file),
                "--port", str(port), "--host", host, "--root", *(["--open"] if open_browser else [])]
        sys.stdout.flush()
        code = _run_forwarding_signals(args)
    if code:
        raise SystemExit(code)


def _store_args(path: Path) -> list[str]:
    """How datasette opens the store: as a live database, so it reads what the write-ahead log holds (a run
    writing it commits there first; --immutable skipped those pages and showed 46 rollouts of 91). Immutable
    only in a folder it cannot write (a read-only mount, an archive), where SQLite could not make the WAL's
    index beside it; a store there with a WAL left beside it is refused (reader_uri says so)."""
    from clawsdk.store.store import reader_uri

    if os.access(path.parent, os.W_OK):
        return [str(path)]
    reader_uri(path)  # StoreError when a non-empty WAL lies beside a store that cannot be opened live
    return ["--immutable", str(path)]


def _run_forwarding_signals(args: list[str]) -> int:
    """Run `args` as a child until it exits, passing on SIGINT, SIGTERM and SIGHUP, so that the caller gets to
    remove what the child used (an exec'd datasette left its metadata folder behind every time)."""
    proc = subprocess.Popen(args)
    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, lambda sig, _frame: proc.send_signal(sig)) for sig in forwarded}
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code  # killed by a signal: the shell's 128 + N


@db_group.command("metadata")
@db_option
@friendly_errors
def metadata_command(db):
    """Print the Datasette metadata (JSON) for the store: `datasette STORE -m metadata.json`."""
    from clawsdk.store.datasette import metadata

    path = Path(db) if db else default_db_path()
    Store(path, readonly=True).close()  # the metadata describes a store: refuse a file that is not one
    click.echo(json.dumps(metadata(path), indent=2))
