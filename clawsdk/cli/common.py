"""Options and helpers the command modules share."""

from __future__ import annotations

import functools
import logging
import math
import os
import sqlite3
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from clawsdk._text import rounded
from clawsdk.errors import ClawError

#: the width of output that goes to a file or a pipe: tables fit their content, ids are never cut
PIPE_WIDTH = 1000


class Finite(click.FloatRange):
    """A float option that refuses nan and inf: `--min-reward nan` compared false with every reward, and
    kept or dropped rollouts without a word."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number

    def _describe_range(self) -> str:
        # without bounds click's help said `x<=None`
        return super()._describe_range() if self.min is not None or self.max is not None else "finite"


class FitConsole(Console):
    """A rich Console that, writing to something other than a terminal (a pipe, a file, a CI log),
    is as wide as its content needs instead of 80 columns, so tables keep whole ids that can be
    copied. $COLUMNS still sets the width."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if size.width < 1:  # COLUMNS=0 (or junk rich reads as 0) made every line, errors too, vanish
            return ConsoleDimensions(PIPE_WIDTH if not self.is_terminal else 80, size.height)
        if self._width is None and not self.is_terminal and not os.environ.get("COLUMNS"):
            return ConsoleDimensions(PIPE_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]  # mypy takes a property with a setter for an overload


console = FitConsole(highlight=False)
err_console = FitConsole(stderr=True, highlight=False, soft_wrap=True)


def db_option(fn: Callable) -> Callable:
    return click.option(
        "--db", type=click.Path(dir_okay=False), envvar="CLAWSDK_DB", default=None,
        help="The store file [env CLAWSDK_DB; default .clawsdk/clawsdk.db].",
    )(fn)


#: errors whose message is for users as it stands; anything else is a bug and says so
KNOWN = (ClawError, OSError, LookupError, ValueError, sqlite3.Error)


def one_line(e: BaseException) -> str:
    """What went wrong, on one line: the message of a known error, else its type too (a bug)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:  # anyio task groups wrap what they raise
        e = e.exceptions[0]
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, KNOWN):
        return text
    return f"{type(e).__name__}: {text} (a bug in clawsdk or a plugin; -vv shows the traceback)"


def fail(e: BaseException) -> NoReturn:
    """Report `e` as one red line on stderr and exit 2 (-vv logs the traceback too)."""
    logging.getLogger("clawsdk.cli").debug("the traceback of that error", exc_info=e)
    err_console.print(f"[red]error:[/red] {escape(one_line(e))}")
    sys.exit(2)


def friendly_errors(fn: Callable) -> Callable:
    """Errors become one red line and exit code 2, not a traceback (the entry point does the same for
    every command; this keeps it so where a command is invoked on its own, as in tests)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as e:  # one line for users, whatever it was
            fail(e)

    return wrapper


def fmt_reward(value: float | None) -> str:
    return "-" if value is None else rounded(value, 2)


def announce_sandbox(name: str) -> str:
    """The backend a `--sandbox` option names (`auto` chosen here), after saying on stderr what it
    exposes, if anything (`local` isolates nothing)."""
    from clawsdk.sandbox.capabilities import backend_warning, choose_sandbox

    name = choose_sandbox(name)
    warning = backend_warning(name)
    if warning:
        err_console.print(warning, style="yellow", markup=False, highlight=False)
    return name


def parse_options(pairs: tuple[str, ...], what: str) -> dict[str, Any]:
    """KEY=VALUE pairs; values parsed as YAML scalars (numbers, booleans), else kept as text."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint=what)
        try:
            out[key] = yaml.safe_load(value)
        except Exception:
            out[key] = value
    return out


def load_all(specs: tuple[str, ...]) -> tuple[list, list]:
    """The tasks of every TASKS argument, and the ones that could not be read."""
    from clawsdk.tasks.sources import load_many

    loaded = load_many(specs)  # ids unique across all the arguments
    return loaded.tasks, loaded.errors


def print_task_errors(errors: list) -> None:
    for e in errors:
        err_console.print(f"[yellow]skipped task:[/yellow] {escape(str(e))}")


def exit_if_nothing_scored(rollouts: int, scored: int, outcomes: list) -> None:
    """A run whose every rollout ended unscored (a model that cannot load, a sandbox that cannot start)
    measured nothing: exit 1 with the first reason, so a script or a CI job does not take it for a score
    of 0 (it exited 0)."""
    if rollouts and not scored:
        why = next((o.error for o in outcomes if o.error), None)
        err_console.print("[red]error:[/red] no rollout of this run was scored"
                          + (f"; the first reason: {escape(why)}" if why else ""))
        sys.exit(1)
