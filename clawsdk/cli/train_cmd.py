"""`clawsdk train sft|grpo|list`: train through a trainer plugin, and the checkpoints the store knows."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from clawsdk.cli.common import (
    Finite,
    announce_sandbox,
    console,
    db_option,
    err_console,
    friendly_errors,
    parse_options,
)
from clawsdk.cli.options import concurrency_option, opts_option, sandbox_option, trainer_options
from clawsdk.store.store import Store


@click.group("train")
def train_group():
    """Train a model on exported data (TRL SFT) or on live sandbox rollouts (TRL GRPO)."""


def _trainer(name: str, options: dict):
    from clawsdk.plugins import get_registry

    factory = get_registry().get("trainers", name)
    try:
        return factory(**options)
    except TypeError as e:
        raise ValueError(f"trainer {name!r} does not take these options ({sorted(options)}): {e}") from e


def _steps(value: int, param: click.Parameter) -> int:
    """-1 (train by epochs) or a positive count: 0 took a step at a learning rate of 0 and printed `trained`."""
    if value == 0 or value < -1:
        raise click.BadParameter(f"{value} is not -1 (train by --epochs) or a number of steps of at least 1",
                                 param=param)
    return value


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _report(result, what: str) -> None:
    m = result.metrics
    shown: set[str] = set()
    flat = bool(m.get("groups")) and m.get("groups_equal_reward") == m["groups"]
    head = "[yellow]did not learn[/yellow]" if flat else "[green]trained[/green]"
    console.print(f"{head} {result.checkpoint_id} ({what}) -> {escape(str(result.path))}")
    if "examples_seen" in m:  # what was trained on, beside the dataset's size: --max-steps may stop short
        line = (f"  trained on: {_n(m['steps'], 'step')}, {_n(m['examples_seen'], 'example')}, "
                f"{_n(m['tokens_seen'], 'token')} (the dataset: {_n(m['examples'], 'example')}, "
                f"{_n(m['tokens'], 'token')})")
        if m["examples_seen"] < m["examples"]:
            line += f"; {m['examples'] - m['examples_seen']} of its examples were not trained on"
        console.print(line)
        shown |= {"steps", "examples_seen", "tokens_seen", "examples", "tokens"}
    if m.get("groups") and not flat:
        equal = m["groups_equal_reward"]
        others = f" ({equal} without one had no gradient)" if equal else ""
        console.print(f"  reward spread in {m['groups'] - equal} of {m['groups']} groups{others}")
    console.print("  " + ", ".join(f"{k} {v}" for k, v in m.items() if k not in shown))
    if flat:  # all advantages 0: the checkpoint is the starting weights, and exit 1 says so to scripts
        group = f"{m.get('rollouts', 0) // m['groups']} rollouts of one task"
        err_console.print(
            f"[red]warning:[/red] no group had a reward spread: in each of the {_n(m['groups'], 'group')} "
            f"({group}) every rollout scored the same (mean reward {m.get('mean_reward')}), so every "
            f"advantage was 0 and the policy did not move: {escape(str(result.path))} holds the starting "
            f"model's weights. To give GRPO a reward to learn from, use more rollouts per task (-G), a "
            f"harder or easier mix of tasks (ones the model passes sometimes, not always or never), or "
            f"more varied samples (--opt temperature=1.2)."
        )
        sys.exit(1)
    console.print(
        f"  evaluate it: clawsdk run TASKS --agent tool-loop --model transformers:{escape(str(result.path))}"
    )


@train_group.command("sft")
@click.option(
    "--dataset", "-d", required=True, help="Dataset id (NAME@vN), name (latest version) or export folder."
)
@trainer_options("trl-sft")
@click.option("--epochs", type=Finite(0, min_open=True), default=1.0, show_default=True)
@click.option(
    "--max-steps", type=int, default=-1, show_default=True, callback=lambda ctx, param, v: _steps(v, param),
    help="Stop after this many steps (-1: epochs).",
)
@click.option("--lr", type=Finite(0, min_open=True), default=5e-5, show_default=True)
@click.option("--batch-size", type=click.IntRange(1), default=4, show_default=True)
@click.option("--grad-accum", type=click.IntRange(1), default=1, show_default=True)
@click.option(
    "--max-length",
    type=click.IntRange(16),
    default=4096,
    show_default=True,
    help="Longer conversations are skipped (never cut); a tool-using conversation is often 2-4k tokens.",
)
@click.option("--lora", is_flag=True, help="Train LoRA adapters (peft) and merge them into the checkpoint.")
@click.option("--lora-r", type=click.IntRange(1), default=16, show_default=True)
@opts_option("--opt", "opts", "trainer")
@db_option
@friendly_errors
def sft_command(
    dataset,
    model,
    out,
    trainer,
    epochs,
    max_steps,
    lr,
    batch_size,
    grad_accum,
    max_length,
    lora,
    lora_r,
    opts,
    db,
):
    """Supervised fine-tuning; the loss covers assistant turns only."""
    options = dict(
        model=model,
        epochs=epochs,
        max_steps=max_steps,
        lr=lr,
        batch_size=batch_size,
        grad_accum=grad_accum,
        max_length=max_length,
        lora=lora,
        lora_r=lora_r,
        **parse_options(opts, "--opt"),
    )
    result = _trainer(trainer, options).train(dataset, out, db=db)
    _report(result, f"from {result.dataset_id or dataset}")


@train_group.command("grpo")
@click.option("--prompts", "-p", required=True, help="RL prompt set: dataset id, name or export folder.")
@trainer_options("trl-grpo")
@click.option(
    "--num-generations",
    "-G",
    type=click.IntRange(2),
    default=4,
    show_default=True,
    help="Rollouts per task (the group).",
)
@click.option("--tasks-per-step", type=click.IntRange(1), default=1, show_default=True)
@click.option("--max-steps", type=click.IntRange(1), default=10, show_default=True)
@click.option("--lr", type=Finite(0, min_open=True), default=1e-6, show_default=True)
@sandbox_option("auto", "Sandbox of the training rollouts, where the policy's commands run; auto is bwrap where "
                        "bubblewrap works, else local (which isolates nothing).")
@concurrency_option(8)
@click.option("--max-turns", type=click.IntRange(1), default=6, show_default=True)
@click.option("--max-tokens", type=click.IntRange(1), default=256, show_default=True, help="Per model turn.")
@click.option(
    "--vllm/--no-vllm", "use_vllm", default=None, help="Generate with vLLM (default: on a GPU with vllm)."
)
@click.option("--run-prefix", default=None, help="Prefix of the run ids of the training rollouts.")
@opts_option("--opt", "opts", "trainer")
@db_option
@friendly_errors
def grpo_command(
    prompts,
    model,
    out,
    trainer,
    num_generations,
    tasks_per_step,
    max_steps,
    lr,
    sandbox,
    concurrency,
    max_turns,
    max_tokens,
    use_vllm,
    run_prefix,
    opts,
    db,
):
    """GRPO with whole sandbox rollouts as completions and the verifier's score as reward."""
    options = dict(
        model=model,
        num_generations=num_generations,
        tasks_per_step=tasks_per_step,
        max_steps=max_steps,
        lr=lr,
        sandbox=announce_sandbox(sandbox),
        concurrency=concurrency,
        max_turns=max_turns,
        max_tokens=max_tokens,
        use_vllm="auto" if use_vllm is None else use_vllm,
        **parse_options(opts, "--opt"),
    )
    result = _trainer(trainer, options).train(prompts, out, db=db, run_prefix=run_prefix)
    _report(result, f"{len(result.runs)} rollout rounds")


@train_group.command("list")
@db_option
@friendly_errors
def checkpoints_command(db):
    """Checkpoints recorded in this store, with what trained them."""
    from clawsdk.data.lineage import checkpoints

    with Store(db) as store:
        rows = checkpoints(store)
    table = Table(title="checkpoints")
    for col in ("id", "trainer", "dataset", "runs", "base", "path", "metrics"):
        table.add_column(col)
    for r in rows:
        m = r.get("metrics") or {}
        table.add_row(
            r["id"],
            r["trainer"],
            str(r["dataset_id"] or "-"),
            str(len(r.get("runs") or [])),
            escape(Path(r["base_model"]).name),
            escape(r["path"]),
            f"steps {m.get('steps')} loss {m.get('last_loss')} reward {m.get('mean_reward_last')}",
        )
    console.print(table)
