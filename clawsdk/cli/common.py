"""Options and helpers the command modules share."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from clawsdk.errors import ClawError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def db_option(fn: Callable) -> Callable:
    return click.option(
        "--db", type=click.Path(dir_okay=False), envvar="CLAWSDK_DB", default=None,
        help="The store file [env CLAWSDK_DB; default .clawsdk/clawsdk.db].",
    )(fn)


def friendly_errors(fn: Callable) -> Callable:
    """Known errors become one red line and exit code 2, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ClawError, FileNotFoundError, LookupError, ValueError) as e:
            err_console.print(f"[red]error:[/red] {escape(str(e))}")
            sys.exit(2)

    return wrapper


def fmt_reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


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
