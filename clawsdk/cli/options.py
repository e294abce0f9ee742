"""Option lists that several commands take, defined once (core commands and plugin commands alike)."""

from __future__ import annotations

from collections.abc import Callable

import click

Decorator = Callable[[Callable], Callable]


def stack(*options: Decorator) -> Decorator:
    """Apply options so they show in --help in the order given."""

    def apply(fn: Callable) -> Callable:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


def json_option(help: str = "Print the result as JSON.") -> Decorator:  # click's own name
    return click.option("--json", "as_json", is_flag=True, help=help)


def opts_option(flag: str, dest: str, what: str) -> Decorator:
    """A repeated KEY=VALUE option (values parsed by clawsdk.cli.common.parse_options)."""
    return click.option(flag, dest, multiple=True, metavar="KEY=VALUE", help=f"Option for the {what} (repeat).")


def sandbox_option(default: str = "auto", help: str | None = None) -> Decorator:
    return click.option("--sandbox", "-s", default=default, show_default=True,
                        help=help or "Sandbox plugin; auto is bwrap where bubblewrap works, else local.")


def concurrency_option(default: int = 8, help: str | None = "Rollouts at once.") -> Decorator:
    return click.option("--concurrency", "-c", default=default, show_default=True, type=click.IntRange(1), help=help)


class ConcurrencyType(click.ParamType):
    """`auto` or a whole number of at least 1."""

    name = "auto|N"

    def convert(self, value, param, ctx):
        from clawsdk.runtime.concurrency import parse_concurrency

        try:
            return parse_concurrency(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


def auto_concurrency_option() -> Decorator:
    return click.option("--concurrency", "-c", default="auto", show_default=True, type=ConcurrencyType(),
                        help="Rollouts at once: auto finds the level (it raises it while throughput grows and "
                             "backs off when the host or the model is under pressure), a number fixes it.")


def agent_options(default_agent: str = "oracle") -> Decorator:
    """Which agent works the tasks, and the model it drives (run, bench run)."""
    return stack(
        click.option("--agent", "-a", default=default_agent, show_default=True, help="Agent plugin."),
        opts_option("--agent-opt", "agent_opts", "agent"),
        click.option("--model", "-m", default=None, help="Model for agents that use one (e.g. embedded, openai:NAME)."),
        click.option("--base-url", default=None, help="Base URL for an OpenAI-compatible model server."),
    )


def rollout_options(sandbox_default: str = "auto") -> Decorator:
    """Where and how many rollouts run at once, and how often an infrastructure failure is retried."""
    return stack(
        sandbox_option(sandbox_default),
        click.option("--sandbox-root", default=None, help="Where workspaces live (default: /dev/shm if it has room)."),
        auto_concurrency_option(),
        click.option("--retries", default=2, show_default=True, type=click.IntRange(0),
                     help="Retries of infrastructure failures before a rollout is reported unscored."),
    )


def trainer_options(default_trainer: str) -> Decorator:
    """What every `clawsdk train` command takes: the base model, the checkpoint folder, the trainer plugin."""
    return stack(
        click.option("--model", "-m", default="embedded", show_default=True,
                     help="Base model: embedded, transformers:PATH or PATH."),
        click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Checkpoint folder."),
        click.option("--trainer", default=default_trainer, show_default=True, help="Trainer plugin."),
    )


__all__ = ["ConcurrencyType", "agent_options", "auto_concurrency_option", "concurrency_option", "json_option",
           "opts_option", "rollout_options",
           "sandbox_option", "stack", "trainer_options"]
