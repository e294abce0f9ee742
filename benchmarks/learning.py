"""The learning experiment: does SFT on clawsdk trajectories make the embedded model better on held-out tasks?

    .venv/bin/python benchmarks/learning.py [--families rename-by-rule,fix-failing-test] [--train 24]
        [--heldout 8] [--epochs 3] [--lr 1e-4] [--out /tmp/clawsdk-learning] [--threads 2]

1. Procedural tasks, split by family parameters: train tasks from --train-seed, held-out tasks
   from --heldout-seed (same families and level, different generated parameters; no hash in
   both sets). Each task offers the tools its family's reference solution uses.
2. Oracle rollouts of the train tasks into the store (and, with --model-train N, embedded-model
   rollouts of N of them, which selection judges like any other).
3. The embedded SmolLM2-135M on the held-out tasks with the tool-loop agent (before).
4. Selection (reward 1.0, held-out tasks excluded) -> SFT export -> `trl-sft` on the CPU.
5. The checkpoint on the same held-out tasks with the same agent settings (after).
Prints both pass rates with 95% confidence intervals, the paired difference, and the cost.
Everything lands in one store (--out/learning.db), so `clawsdk runs`, `clawsdk data list` and
`clawsdk train list` show the lineage afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

from clawsdk.bench.estimators import paired_test
from clawsdk.data.export import export_sft
from clawsdk.data.lineage import checkpoint
from clawsdk.data.select import Selection, select
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from clawsdk.synth.families import get_family
from clawsdk.tasks.model import ToolPolicy


def wilson(passed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def make_tasks(families: list[str], n: int, seed: int, level: int, timeout_s: float | None = None) -> list:
    tasks = []
    for name in families:
        family = get_family(name)
        for i in range(n):
            task = family.task(seed, i, level)
            # the tools its reference solution uses: a shorter prompt for a 135M model, same for every task
            allow = sorted({c.tool for c in task.solution})
            update: dict = {"tool_policy": ToolPolicy(allow=allow)}
            if timeout_s:
                update["limits"] = task.limits.model_copy(update={"timeout_s": timeout_s})
            tasks.append(task.model_copy(update=update))
    return tasks


def evaluate(tasks: list, model: str, run_id: str, db: Path, args: argparse.Namespace) -> tuple[dict, float]:
    opts = {
        "model": model,
        "max_turns": args.max_turns,
        "max_tokens": args.max_tokens,
        "turn_timeout_s": args.turn_timeout_s,
        "temperature": 0.0,
    }
    if args.threads:
        opts["threads"] = args.threads
    t0 = time.perf_counter()
    result = run_sync(
        tasks,
        agent="tool-loop",
        agent_options=opts,
        run_id=run_id,
        db=db,
        concurrency=args.concurrency,
        retries=1,
    )
    elapsed = time.perf_counter() - t0
    with Store(db) as store:
        rows = store.query(
            "SELECT task_id, passed, scored, failure_kind, reward FROM rollouts WHERE run_id = ?", [run_id]
        )
    del result
    return {
        r["task_id"]: (r["passed"] == 1 and r["scored"] == 1, r["failure_kind"], r["reward"] or 0.0)
        for r in rows
    }, elapsed


def summary(label: str, results: dict, tasks: list) -> None:
    by_family: dict[str, list[bool]] = defaultdict(list)
    for t in tasks:
        by_family[t.tags[0]].append(results.get(t.id, (False, None))[0])
    allp = [results.get(t.id, (False, None))[0] for t in tasks]
    lo, hi = wilson(sum(allp), len(allp))
    print(
        f"  {label:<7} pass rate {sum(allp) / len(allp):6.1%}  [{lo:.1%}, {hi:.1%}]  ({sum(allp)}/{len(allp)})  "
        + "  ".join(f"{f} {sum(v)}/{len(v)}" for f, v in sorted(by_family.items()))
    )
    kinds: dict[str, int] = defaultdict(int)
    for t in tasks:
        kinds[str(results.get(t.id, (False, "missing"))[1])] += 1
    rewards = [results.get(t.id, (False, None, 0.0))[2] for t in tasks]
    print(
        f"          mean verifier score {sum(rewards) / len(rewards):.3f} (partial credit); endings: "
        + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    )


def train_sft(held: list, runs: list[str], db: Path, out: Path, args: argparse.Namespace, cost: dict):
    """Selection (reward 1.0, no held-out task) -> SFT export -> trl-sft; (checkpoint id, path, dataset, metrics)."""
    t0 = time.perf_counter()
    with Store(db) as store:
        result = select(
            store,
            Selection(
                runs=runs, min_reward=1.0, max_tool_error_rate=0.0, exclude_tasks=[t.hash for t in held]
            ),
        )
        exp = export_sft(store, result, out / "datasets", name="learning-sft")
    cost["select + export"] = time.perf_counter() - t0
    print(f"selection: {len(result.kept)} kept, dropped {result.reasons() or 'none'} -> {exp.dataset_id}")

    from clawsdk_plugins.trainers import TrlSftTrainer

    trainer = TrlSftTrainer(
        "embedded",
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        max_length=args.max_length,
        lora=args.lora,
        threads=args.threads,
        logging_steps=5,
        scheduler="linear",
        warmup_steps=5,
    )
    ckpt_dir = out / "checkpoint"
    trained = trainer.train(exp.dataset_id, ckpt_dir, db=db)
    cost["sft"] = trained.metrics["wall_s"]
    return trained.checkpoint_id, ckpt_dir, exp.dataset_id, trained.metrics


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--families", default="rename-by-rule,fix-failing-test")
    p.add_argument("--level", type=int, default=1, help="1 easy, 2 medium, 3 hard")
    p.add_argument("--train", type=int, default=24, help="train tasks per family")
    p.add_argument("--heldout", type=int, default=8, help="held-out tasks per family")
    p.add_argument("--train-seed", type=int, default=1)
    p.add_argument("--heldout-seed", type=int, default=2)
    p.add_argument(
        "--model-train", type=int, default=0, help="embedded-model rollouts on this many train tasks"
    )
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--lora", action="store_true")
    p.add_argument("--max-turns", type=int, default=6)
    p.add_argument("--max-tokens", type=int, default=512, help="completion tokens per model turn")
    p.add_argument("--turn-timeout-s", type=float, default=900.0, help="wall clock per model turn")
    p.add_argument(
        "--task-timeout-s", type=float, default=1800.0, help="wall clock per rollout (a CPU model is slow)"
    )
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default="/tmp/clawsdk-learning")
    p.add_argument(
        "--checkpoint", help="evaluate this checkpoint (an id in --out's store) instead of training a new one"
    )
    args = p.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "learning.db"
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    train = make_tasks(families, args.train, args.train_seed, args.level, args.task_timeout_s)
    held = make_tasks(families, args.heldout, args.heldout_seed, args.level, args.task_timeout_s)
    overlap = {t.hash for t in train} & {t.hash for t in held}
    if overlap:
        print(f"error: {len(overlap)} tasks are in both splits; choose other seeds", file=sys.stderr)
        return 2
    print(
        f"families {', '.join(families)} (level {args.level}); train {len(train)} tasks (seed {args.train_seed}), "
        f"held-out {len(held)} tasks (seed {args.heldout_seed}); store {db}"
    )
    reused = None
    if args.checkpoint:  # before any rollout: a wrong id should not cost an evaluation
        with Store(db) as store:
            try:
                reused = checkpoint(store, args.checkpoint)
            except LookupError as e:
                print(f"error: {e} (see `clawsdk train list`)", file=sys.stderr)
                return 2
    cost: dict[str, float] = {}

    t0 = time.perf_counter()
    train_key = hashlib.sha256(json.dumps([t.hash for t in train]).encode()).hexdigest()[:8]
    oracle_run = f"learn-oracle-{train_key}"
    run_sync(train, agent="oracle", run_id=oracle_run, db=db, concurrency=args.concurrency)
    cost["oracle rollouts"] = time.perf_counter() - t0
    with Store(db) as store:  # from the store: a rerun resumes the run and only reports what it ran
        solved = store.query(
            "SELECT count(*) AS n FROM rollouts WHERE run_id = ? AND passed = 1", [oracle_run]
        )
    print(f"oracle: {solved[0]['n']}/{len(train)} train tasks solved ({cost['oracle rollouts']:.0f} s)")
    runs = [oracle_run]
    if args.model_train:
        _, cost["embedded rollouts on train"] = evaluate(
            train[: args.model_train], "embedded", f"learn-model-train-{train_key}", db, args
        )
        runs.append(f"learn-model-train-{train_key}")

    # the same settings give the same run id, so a rerun reuses a finished "before" run
    key = hashlib.sha256(
        json.dumps([t.hash for t in held] + [args.max_turns, args.max_tokens, args.turn_timeout_s]).encode()
    ).hexdigest()
    before, cost["eval before"] = evaluate(held, "embedded", f"learn-before-{key[:8]}", db, args)
    print(
        f"before: {sum(v[0] for v in before.values())}/{len(held)} held-out tasks passed "
        f"({cost['eval before']:.0f} s)"
    )

    if reused:
        ckpt_id, ckpt_dir, dataset_id, m = (
            reused["id"],
            Path(reused["path"]),
            reused["dataset_id"],
            reused["metrics"],
        )
        cost["sft (earlier run)"] = m.get("wall_s", 0.0)
    else:
        ckpt_id, ckpt_dir, dataset_id, m = train_sft(held, runs, db, out, args, cost)
    m_line = (
        f"{m['examples']} examples ({m['skipped']} skipped), {m['steps']} steps, "
        f"{m['tokens']} tokens ({m['assistant_tokens']} in the loss), loss {m['first_loss']:.3f} -> "
        f"{m['last_loss']:.3f}, {m['train_s']:.0f} s training"
    )
    print(f"sft: {ckpt_id}{' (reused)' if args.checkpoint else ''}: {m_line}")

    after, cost["eval after"] = evaluate(
        held, f"transformers:{ckpt_dir}", f"learn-after-{ckpt_id}-{key[:8]}", db, args
    )

    print("\nheld-out pass rate (tool-loop agent, temperature 0, Wilson 95% CI):")
    summary("before", before, held)
    summary("after", after, held)
    a = [float(before.get(t.id, (False,))[0]) for t in held]
    b = [float(after.get(t.id, (False,))[0]) for t in held]
    test = paired_test(a, b)
    print(
        f"  change  {test.diff:+.1%} absolute, paired bootstrap 95% CI [{test.low:+.1%}, {test.high:+.1%}], "
        f"wins {test.wins} losses {test.losses}, p(permutation) {test.p_permutation:.3g}"
    )
    total = sum(cost.values())
    print(
        "\ncost (wall clock on this machine, CPU only; a stage reused from the store shows its rerun time): "
        + ", ".join(f"{k} {v:.0f} s" for k, v in cost.items())
        + f"; total {total / 60:.1f} min"
    )
    (out / "result.json").write_text(
        json.dumps(
            {
                "families": families,
                "train": len(train),
                "heldout": len(held),
                "before": sum(a),
                "after": sum(b),
                "diff": test.diff,
                "ci": [test.low, test.high],
                "cost_s": cost,
                "sft": m,
                "checkpoint": ckpt_id,
                "dataset": dataset_id,
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
