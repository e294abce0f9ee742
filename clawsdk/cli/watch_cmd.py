"""`clawsdk watch`: the live terminal view of the store (the optional `tui` extra)."""

from __future__ import annotations

import click

from clawsdk.cli.common import db_option, friendly_errors
from clawsdk.store.store import Store, default_db_path


@click.command("watch")
@db_option
@click.option("--run", "run_id", default=None, help="Open this run's rollouts directly.")
@click.option(
    "--interval",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0.05, 60),
    help="Seconds between looks at the store.",
)
@friendly_errors
def watch_command(db, run_id, interval):
    """Watch runs and rollouts live: progress, failures, and each rollout's events as they happen.

    Reads the store only, so it works on a run another process is writing and on a finished
    store. Press ? inside for the keys.
    """
    try:
        from clawsdk_tui.app import WatchApp  # textual loads here and nowhere else
    except ImportError as e:
        raise click.ClickException(
            f"the watch view needs textual ({e}); install it with: pip install 'clawsdk[tui]'"
        ) from e
    path = db or default_db_path()
    Store(path, readonly=True).close()  # a missing, foreign or half-created store: one line, before the screen
    WatchApp(path, run_id=run_id, interval=interval).run()
