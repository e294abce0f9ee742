"""The learning experiment: does training on clawsdk trajectories generalize, or only recall?

    .venv/bin/python benchmarks/learning.py [--tiny] [--out /tmp/clawsdk-learning] [--threads 2] ...
    .venv/bin/python benchmarks/learning.py --splits unseen_templates --conditions lookup,base,sft,format  # a part

Splits (`clawsdk.synth.splits.make_splits`, seed --seed, level --level): training tasks of some
templates of --train-families; held out, with no hash, literal solution or near-duplicate shared
with training: (a) seen_params, new parameters of the training templates; (b) unseen_templates,
the held-out templates of the training families; (c) unseen_families, --heldout-families; and, on
request (--splits train), the first --heldout training tasks themselves: recall, not generalization. Every
task offers the same full core tool set. Conditions, all on the same held-out tasks with the
tool-loop agent at temperature 0:

  base       the base model (--base: embedded SmolLM2-135M)
  few-shot   the base model with one worked training example (instruction + reference calls) in its system prompt
  format     SFT on oracle trajectories of --format-families only (other families: learns the tool-call
             format, not the task)
  lookup     no model: replays the reference solution of the training task whose instruction is most similar
  sft        SFT on oracle trajectories of the training tasks
  grpo       GRPO from the sft checkpoint on the training tasks, verifier score as reward

Prints, per split and condition, the pass rate (Wilson 95% CI) and mean verifier score (bootstrap
95% CI), how the rollouts ended (passed, failed the verifier, out of turns, ...; turns cut at the
token cap, malformed calls), paired differences (sft against each control, grpo against sft) and the
cost of every stage. Everything lands in one store (--out/learning.db); runs are named by their
content, so a rerun resumes finished rollouts, and a checkpoint folder that already holds a trained
model is reused (delete it to train again). --tiny runs every condition on a few tasks with a tiny
random model built offline: it proves the script works, its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

from clawsdk.bench.estimators import bootstrap_mean, mean_ci, paired_test
from clawsdk.data import lineage
from clawsdk.data.export import export_rl, export_sft
from clawsdk.data.select import Selection, select
from clawsdk.models import toolcalls
from clawsdk.models.prompt import SYSTEM_PROMPT
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from clawsdk.synth.dedup import MinHasher
from clawsdk.synth.families import resolve_families
from clawsdk.synth.procedural import generate
from clawsdk.synth.splits import SPLITS, make_splits

ROOT = Path(__file__).resolve().parents[1]
CONDITIONS = ("base", "few-shot", "format", "lookup", "sft", "grpo")
# "train" (opt-in) is not held out: recall, the ceiling the held-out splits are read against
EVAL_SPLITS = ("train", *SPLITS)
COMPARE = (("base", "sft"), ("few-shot", "sft"), ("format", "sft"), ("lookup", "sft"), ("sft", "grpo"))


def key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:8]


def with_timeout(tasks: list, timeout_s: float) -> list:
    return [t.model_copy(update={"limits": t.limits.model_copy(update={"timeout_s": timeout_s})}) for t in tasks]


def worked_example(task) -> str:
    """One training task and its reference calls, in the tool-call format the model writes."""
    calls = "\n".join(toolcalls.format_tool_call(c.tool, c.args) for c in task.solution)
    finish = toolcalls.format_tool_call("finish", {"summary": "done"})
    return (f"{SYSTEM_PROMPT}\n\nA worked example of a different task, one tool call per turn:\n"
            f"Task: {task.instruction.strip()}\nCalls, in order:\n{calls}\n{finish}")


def nearest_solutions(held: list, train: list) -> list:
    """Each held-out task with the reference solution of the most similar training instruction (a training
    task's own, where the task is one: two tasks can share an instruction and differ in their files)."""
    hasher = MinHasher()
    vectors = [hasher.vector(t.instruction) for t in train]
    own = {t.hash for t in train}
    out = []
    for t in held:
        if t.hash in own:
            out.append(t)
            continue
        v = hasher.vector(t.instruction)
        best = max(range(len(train)), key=lambda i: hasher.similarity(v, vectors[i]))
        out.append(t.model_copy(update={"solution": train[best].solution}))
    return out


def endings(db: Path, run_id: str) -> dict:
    """How a run's rollouts ended and what its model turns did: what a pass rate alone hides."""
    with Store(db) as store:
        rows = store.query("SELECT failure_kind, passed, error, n_tool_calls FROM rollouts WHERE run_id = ?",
                           [run_id])
        events = store.query(
            """SELECT e.kind, json_extract(e.payload, '$.finish_reason') AS finish,
                      json_extract(e.payload, '$.kind') AS error_kind
               FROM events e JOIN rollouts r ON r.id = e.rollout_id AND r.attempt = e.attempt
               WHERE r.run_id = ? AND e.kind IN ('model_response', 'error')""", [run_id])
    ended: Counter = Counter()
    for r in rows:
        if r["passed"] == 1:
            ended["passed"] += 1
        elif r["failure_kind"] == "ok":
            ended["ended by itself, failed its verifier"] += 1
        elif "max_turns" in (r["error"] or ""):
            ended["out of turns"] += 1
        else:
            ended[r["failure_kind"] or "unfinished"] += 1
    turns = [e for e in events if e["kind"] == "model_response"]
    return {"ended": dict(ended.most_common()), "model_turns": len(turns),
            "turns_at_token_cap": sum(e["finish"] == "length" for e in turns),
            "malformed_calls": sum(e["error_kind"] == "malformed_tool_call" for e in events),
            "tool_calls": sum(r["n_tool_calls"] or 0 for r in rows)}


def same_export(store: Store, name: str, kept) -> str | None:
    """The latest export of `name` if it holds exactly the kept rollouts and is still on disk: a rerun reuses
    it instead of writing the same rows again as a new version."""
    try:
        prev = lineage.dataset(store, name)
    except LookupError:
        return None
    rows = {(r["rollout_id"], r["attempt"]) for r in lineage.dataset_rows(store, prev["id"])}
    want = {(c.rollout_id, c.rollout["attempt"]) for c in kept.kept}
    return prev["id"] if rows == want and Path(prev["path"]).is_dir() else None


def card(folder: Path) -> dict | None:
    """The checkpoint card a trainer leaves beside its weights, if the folder holds a trained model."""
    path = Path(folder) / "clawsdk-checkpoint.json"
    return json.loads(path.read_text()) if path.exists() else None


def reused(folder: Path) -> dict | None:
    c = card(folder)
    if c is not None:
        print(f"  {folder.name}: reusing {c['id']} in {folder} (delete the folder to train again)")
    return c


class Experiment:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.db = self.out / "learning.db"
        self.cost: dict[str, float] = {}

    def timed(self, stage: str, fn, *a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            self.cost[stage] = self.cost.get(stage, 0.0) + time.perf_counter() - t0

    def evaluate(self, tasks: list, model: str, run_id: str, system_prompt: str | None = None) -> dict:
        a = self.args
        if model == "oracle":
            run_sync(tasks, agent="oracle", run_id=run_id, db=self.db, concurrency=a.concurrency)
        else:
            opts = {"model": model, "max_turns": a.max_turns, "max_tokens": a.max_tokens,
                    "turn_timeout_s": a.turn_timeout_s, "temperature": 0.0}
            if a.threads:
                opts["threads"] = a.threads
            if system_prompt:
                opts["system_prompt"] = system_prompt
            run_sync(tasks, agent="tool-loop", agent_options=opts, run_id=run_id, db=self.db,
                     concurrency=a.concurrency, retries=1)
        with Store(self.db) as store:
            rows = store.query("SELECT task_id, passed, reward FROM rollouts WHERE run_id = ? AND scored = 1",
                               [run_id])
        # an infrastructure failure (model server, sandbox, verifier: unscored) is left out, not counted as
        # the model's failure; what the model did (an error, a timeout, out of turns) is scored
        return {r["task_id"]: (r["passed"] == 1, float(r["reward"])) for r in rows}

    def oracle_dataset(self, tasks: list, name: str) -> str:
        run_id = f"learn-oracle-{key([t.hash for t in tasks])}"
        self.timed("oracle rollouts", self.evaluate, tasks, "oracle", run_id)
        with Store(self.db) as store:
            kept = select(store, Selection(runs=[run_id], min_reward=1.0, max_tool_error_rate=0.0))
            dataset_id = same_export(store, name, kept) or export_sft(
                store, kept, self.out / "datasets", name=name).dataset_id
        print(f"  {name}: {len(kept.kept)}/{len(tasks)} oracle trajectories kept -> {dataset_id}")
        return dataset_id

    def sft(self, dataset_id: str, folder: str, base: str) -> tuple[str, dict]:
        ckpt = self.out / folder
        if (c := reused(ckpt)) is not None:
            return str(ckpt), c["metrics"]
        from clawsdk_plugins.trainers.trl import TrlSftTrainer

        a = self.args
        trainer = TrlSftTrainer(base, epochs=a.epochs, max_steps=a.sft_max_steps, lr=a.lr, batch_size=a.batch_size,
                                max_length=a.max_length, threads=a.threads, logging_steps=1,
                                scheduler="linear",
                                warmup_steps=min(5, max(0, a.sft_max_steps - 1)) if a.sft_max_steps > 0 else 5)
        result = self.timed(f"train {folder}", trainer.train, dataset_id, ckpt, db=self.db)
        m = result.metrics
        print(f"  {folder}: {result.checkpoint_id}: {m['examples']} examples, {m['steps']} steps, loss "
              f"{m['first_loss']} -> {m['last_loss']}, {m['train_s']:.0f} s, weights sha256 {m['weights_sha256'][:16]}")
        return str(ckpt), m

    def grpo(self, train: list, sft_ckpt: str) -> tuple[str, dict]:
        ckpt = self.out / "grpo"
        if (c := reused(ckpt)) is not None:
            return str(ckpt), c["metrics"]
        from clawsdk_plugins.trainers.trl import TrlGrpoTrainer

        a = self.args
        with Store(self.db) as store:
            prompts = export_rl(store, train, self.out / "datasets", name="learning-grpo-prompts", formats=["jsonl"])
        trainer = TrlGrpoTrainer(f"transformers:{sft_ckpt}", num_generations=a.group, max_steps=a.grpo_steps,
                                 lr=a.grpo_lr, temperature=1.0, concurrency=a.concurrency, max_turns=a.max_turns,
                                 max_tokens=a.max_tokens, turn_timeout_s=a.turn_timeout_s, threads=a.threads)
        result = self.timed("train grpo", trainer.train, prompts.dataset_id, ckpt, db=self.db,
                            run_prefix=f"learn-grpo-{key(sft_ckpt, a.grpo_steps, a.group)}")
        groups: dict[tuple, set] = {}
        with Store(self.db) as store:
            for run in trainer.runs:
                for r in store.rollouts(run):
                    groups.setdefault((run, r["task_id"]), set()).add(r["reward"])
        differ = sum(len(r) > 1 for r in groups.values())
        m = {**result.metrics, "groups": len(groups), "groups_with_different_rewards": differ}
        print(f"  grpo: {result.checkpoint_id}: {m['steps']} steps, {m['rollouts']} rollouts, "
              f"{differ}/{len(groups)} groups with different rewards (the others give no gradient), "
              f"mean reward {m.get('mean_reward')} (first half of the steps {m.get('mean_reward_halves', [None])[0]}, "
              f"second half {m.get('mean_reward_halves', [None, None])[-1]}; each step draws other tasks)")
        return str(ckpt), m


def report(results: dict, held: dict, conditions: list[str], ends: dict) -> dict:
    table: dict = {}
    print("\n| split | condition | pass rate [95% CI] | mean score [95% CI] |\n| --- | --- | --- | --- |")
    for split, tasks in held.items():
        for cond in conditions:
            r = results[cond][split]
            ids = [t.id for t in tasks if t.id in r]  # scored: an infrastructure failure is left out
            passed = [float(r[i][0]) for i in ids]
            scores = [r[i][1] for i in ids]
            p, s = mean_ci(passed), bootstrap_mean(scores)
            table.setdefault(split, {})[cond] = {"passed": int(sum(passed)), "n": len(ids),
                                                 "unscored": len(tasks) - len(ids), "pass_ci": [p.low, p.high],
                                                 "score": s.value, "score_ci": [s.low, s.high],
                                                 "per_task": dict(zip(ids, passed, strict=True)),
                                                 "scores": dict(zip(ids, scores, strict=True))}
            unscored = f" ({len(tasks) - len(ids)} unscored)" if len(ids) < len(tasks) else ""
            print(f"| {split} | {cond} | {int(sum(passed))}/{len(ids)}{unscored} {_pct(p.value)} "
                  f"[{_pct(p.low)}, {_pct(p.high)}] | {_num(s.value)} [{_num(s.low)}, {_num(s.high)}] |")
    print("\nhow the rollouts ended, and what the model turns did (\"at the cap\": cut at --max-tokens):")
    for (split, cond), e in ends.items():
        print(f"  {split:<17} {cond:<9} {', '.join(f'{k} {v}' for k, v in e['ended'].items())}; "
              f"{e['tool_calls']} tool calls; {e['model_turns']} model turns, {e['turns_at_token_cap']} at the cap; "
              f"{e['malformed_calls']} malformed calls")
    print("\npaired differences in pass rate (B - A on the tasks both scored, 95% CI: the sign-flip test inverted and "
          "Newcombe's, whichever is wider; permutation p):")
    diffs: dict = {}
    for split in held:
        for a, b in COMPARE:
            if a not in conditions or b not in conditions:
                continue
            pa, pb = table[split][a]["per_task"], table[split][b]["per_task"]
            both = [i for i in pa if i in pb]
            if not both:
                continue
            t = paired_test([pa[i] for i in both], [pb[i] for i in both])
            diffs[f"{split}: {b} - {a}"] = t.as_dict()
            print(f"  {split:<17} {b} - {a:<9} {t.diff:+.1%} [{t.low:+.1%}, {t.high:+.1%}] wins {t.wins} "
                  f"losses {t.losses} p {t.p_permutation:.3g} ({t.n} tasks)")
    return {"table": table, "paired": diffs, "endings": {f"{s}: {c}": e for (s, c), e in ends.items()}}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def tiny_base(out: Path) -> str:
    """The tiny random chat model the training tests use (built offline, no download)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_conftest", ROOT / "tests" / "train" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder = out / "tiny-base"
    if not (folder / "config.json").exists():
        module.build_tiny(folder)
    return str(folder)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="every condition on a few tasks with a tiny random model")
    p.add_argument("--train-families", default="fix-failing-test,rename-by-rule")
    p.add_argument("--heldout-families", default="log-summary,config-convert")
    p.add_argument("--format-families", default="srt-shift,bibliography-format,csv-reconcile,meeting-actions")
    p.add_argument("--level", type=int, default=1, help="1 easy, 2 medium, 3 hard")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train", type=int, default=96, help="training tasks (and format-control tasks)")
    p.add_argument("--heldout", type=int, default=64, help="held-out tasks per split")
    p.add_argument("--base", default="embedded", help="embedded, transformers:PATH or PATH")
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--sft-max-steps", type=int, default=-1)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=4096)
    p.add_argument("--group", type=int, default=4, help="GRPO rollouts per task")
    p.add_argument("--grpo-steps", type=int, default=24)
    p.add_argument("--grpo-lr", type=float, default=5e-6)
    p.add_argument("--max-turns", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=512, help="completion tokens per model turn")
    p.add_argument("--turn-timeout-s", type=float, default=900.0, help="wall clock per model turn")
    p.add_argument("--task-timeout-s", type=float, default=None,
                   help="wall clock per rollout; default max-turns x turn-timeout-s + 10 min, so that on a slow "
                        "machine the turn limit ends a rollout, not the clock (1,800 s cut every rollout of a "
                        "16-at-a-time CPU run after 4-5 of its 8 turns)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default="/tmp/clawsdk-learning")
    p.add_argument("--splits", default=",".join(SPLITS),
                   help="held-out splits to evaluate, in this order; 'train' adds the first --heldout training "
                        "tasks themselves (recall, not generalization)")
    p.add_argument("--conditions", default=",".join(CONDITIONS),
                   help="conditions to train and evaluate, in this order (a subset costs less; what it leaves "
                        "out is not in the table)")
    args = p.parse_args()
    # clawsdk's own notes (the trainers' memory plans) at INFO; the rest, failed tool calls among it, at WARNING
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("clawsdk", "clawsdk_plugins"):
        logging.getLogger(name).setLevel(logging.INFO)
    splits = [x.strip() for x in args.splits.split(",") if x.strip()]
    conditions = [x.strip() for x in args.conditions.split(",") if x.strip()]
    unknown = sorted(set(splits) - set(EVAL_SPLITS)) + sorted(set(conditions) - set(CONDITIONS))
    if unknown or not splits or not conditions:
        print(f"error: --splits takes {', '.join(EVAL_SPLITS)} and --conditions {', '.join(CONDITIONS)}; "
              f"got {', '.join(unknown) or 'none'}", file=sys.stderr)
        return 2
    if args.tiny:
        args.train, args.heldout, args.epochs, args.sft_max_steps = 4, 2, 1.0, 2
        args.group, args.grpo_steps, args.max_turns, args.max_tokens = 2, 1, 2, 24
        args.lr, args.grpo_lr, args.turn_timeout_s, args.task_timeout_s = 1e-3, 1e-4, 120.0, 300.0
        args.concurrency, args.batch_size, args.max_length = 2, 1, 8192  # its byte-level tokens: longer sequences

    if args.task_timeout_s is None:
        args.task_timeout_s = args.max_turns * args.turn_timeout_s + 600.0
    started = time.perf_counter()
    exp = Experiment(args)
    if args.tiny and args.base == "embedded":
        args.base = tiny_base(exp.out)
    train_f, held_f = resolve_families(args.train_families), resolve_families(args.heldout_families)
    format_f = resolve_families(args.format_families)
    clash = {f.name for f in format_f} & {f.name for f in train_f + held_f}
    if clash:
        print(f"error: --format-families must be other families; {', '.join(sorted(clash))} is trained or held out",
              file=sys.stderr)
        return 2
    s = exp.timed("splits", make_splits, train_f, held_f, n_train=args.train, n_heldout=args.heldout,
                  seed=args.seed, level=args.level)
    problems = s.problems()
    if problems:
        print("error: the splits leak:\n  " + "\n  ".join(problems[:10]), file=sys.stderr)
        return 2
    train = with_timeout(s.train, args.task_timeout_s)
    held = {name: with_timeout(s.train[:args.heldout] if name == "train" else s.heldout()[name], args.task_timeout_s)
            for name in splits}
    fmt_tasks = with_timeout(list(generate(format_f, args.train, args.seed, {1: "easy", 2: "medium", 3: "hard"}
                                           [args.level])), args.task_timeout_s)
    print(f"train: {len(train)} tasks of {len(s.train_templates)} templates ({args.train_families}); held out "
          f"per split: {', '.join(f'{k} {len(v)}' for k, v in held.items())} ({len(s.heldout_templates)} held-out "
          f"templates; candidates dropped as too close to training: {s.dropped}); format control: "
          f"{len(fmt_tasks)} tasks of {args.format_families}; base {args.base}; up to {args.max_turns} turns "
          f"and {args.task_timeout_s:.0f} s a rollout; store {exp.db}")

    print("training:")
    sft_ckpt = fmt_ckpt = grpo_ckpt = ""
    sft_m = fmt_m = grpo_m = None
    if "sft" in conditions or "grpo" in conditions:
        sft_ckpt, sft_m = exp.sft(exp.oracle_dataset(train, "learning-sft"), "sft", args.base)
    if "format" in conditions:
        fmt_ckpt, fmt_m = exp.sft(exp.oracle_dataset(fmt_tasks, "learning-format"), "format", args.base)
    if "grpo" in conditions:
        grpo_ckpt, grpo_m = exp.grpo(train, sft_ckpt)

    base_model = args.base if args.base == "embedded" else f"transformers:{args.base}"
    models = {"base": (base_model, None), "few-shot": (base_model, worked_example(train[0])),
              "format": (f"transformers:{fmt_ckpt}", None), "sft": (f"transformers:{sft_ckpt}", None),
              "grpo": (f"transformers:{grpo_ckpt}", None)}
    models = {c: models[c] for c in conditions if c in models}
    settings = [args.max_turns, args.max_tokens, args.turn_timeout_s]
    results: dict = {c: {} for c in CONDITIONS}
    ends: dict = {}
    print("evaluation:")
    for split, tasks in held.items():
        hashes = [t.hash for t in tasks]
        if "lookup" in conditions:
            run_id = f"learn-lookup-{split}-{key(hashes, [t.hash for t in train])}"
            results["lookup"][split] = exp.timed(
                "eval lookup", exp.evaluate, nearest_solutions(tasks, train), "oracle", run_id)
            ends[split, "lookup"] = endings(exp.db, run_id)
        for cond, (model, prompt) in models.items():
            weights = model if cond in ("base", "few-shot") else card(Path(model.split(":", 1)[1]))["id"]
            run_id = f"learn-{cond}-{split}-{key(hashes, weights, prompt, settings)}"
            results[cond][split] = exp.timed(f"eval {cond}", exp.evaluate, tasks, model, run_id, prompt)
            ends[split, cond] = endings(exp.db, run_id)
            r = results[cond][split]
            unscored = f" ({len(tasks) - len(r)} unscored, left out)" if len(r) < len(tasks) else ""
            print(f"  {split} {cond}: {sum(v[0] for v in r.values())}/{len(r)} passed{unscored}")

    summary = report(results, held, conditions, ends)
    total = time.perf_counter() - started
    print("\ncost (wall clock, this machine; a stage reused from the store shows its rerun time): "
          + ", ".join(f"{k} {v:.0f} s" for k, v in exp.cost.items()) + f"; total {total / 60:.1f} min")
    (exp.out / "result.json").write_text(json.dumps({
        "args": vars(args), "train_templates": s.train_templates, "heldout_templates": s.heldout_templates,
        "sft": sft_m, "format": fmt_m, "grpo": grpo_m, "cost_s": exp.cost, "total_s": total, **summary},
        indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
