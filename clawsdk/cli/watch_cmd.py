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
@click.option("--follow", is_flag=True, help="Follow each new run as it starts (else a new run is announced; n "
              "follows it).")
@click.option("--wait-for-run", is_flag=True, hidden=True,
              help="Wait for --run to appear (`run --watch` opens the view while its child starts the run).")
@friendly_errors
def watch_command(db, run_id, interval, follow=False, wait_for_run=False):
    """Watch runs and rollouts live: progress, failures, and each rollout's events as they happen.

    Reads the store only, so it works on a run another process is writing and on a finished
    store. Press ? inside for the keys.
    """
    path = db or default_db_path()
    # a missing, foreign or half-created store: one line, before the screen
    with Store(path, readonly=True) as store:
        # a mistyped run id would otherwise open a view that waits for it forever
        if run_id and not wait_for_run and store.run(run_id) is None:
            raise LookupError(f"no run {run_id!r} in {path} (see `clawsdk runs`)")
    try:
        from clawsdk_tui.app import WatchApp  # textual loads here and nowhere else
    except ImportError as e:
        raise click.ClickException(
            f"the watch view needs textual ({e}); install it with: pip install 'clawsdk[tui]'"
        ) from e
    WatchApp(path, run_id=run_id, interval=interval, follow=follow).run()
