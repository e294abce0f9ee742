"""Trainer plugins: `trl-sft` (TRL SFTTrainer on exported conversations) and `trl-grpo` (TRL
GRPOTrainer whose rollouts run as clawsdk rollouts in parallel sandboxes, rewarded by the verifier).

Both start from `embedded` (the dequantized SmolLM2-135M copy), `transformers:PATH` or a PATH,
write a checkpoint that `--model transformers:PATH` loads, and record it in the store with the
dataset, runs and base model that made it. torch, transformers, trl and peft are imported only
when a trainer runs.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawsdk.hookspecs import hookimpl

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    checkpoint_id: str
    path: Path
    dataset_id: str | None
    metrics: dict[str, Any] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)


def resolve_base(model: str) -> str:
    """'embedded' -> the dequantized SmolLM2 copy; 'transformers:PATH' or PATH -> PATH."""
    spec = str(model)
    if spec == "embedded" or spec.startswith("embedded:"):
        from clawsdk_plugins.models_embedded import dequantized_copy, embedded_gguf

        return str(dequantized_copy(embedded_gguf()))
    if spec.startswith("transformers:"):
        spec = spec.split(":", 1)[1]
    if not spec:
        raise ValueError("give a base model: embedded, transformers:PATH or PATH")
    return spec


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _load_model(path: str, threads: int | None) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(int(threads))
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = torch.bfloat16 if _device() == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if getattr(model, "hf_quantizer", None) is not None or getattr(model.config, "quantization_config", None):
        raise ValueError(
            f"{path} is still marked quantized; train from a dequantized copy "
            f"(--model embedded does this for SmolLM2)"
        )
    return model, tok


def _lora_config(r: int, alpha: int | None, dropout: float) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=r,
        lora_alpha=alpha or 2 * r,
        lora_dropout=dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def _save(trainer: Any, tok: Any, out: Path, lora: bool) -> None:
    model = trainer.accelerator.unwrap_model(trainer.model)
    if lora:  # one folder that transformers loads as is
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))


def _dataset_ref(store: Any, dataset: str) -> tuple[str | None, Path]:
    """A dataset id or name in the store, or an export folder -> (dataset id, folder)."""
    from clawsdk.data import lineage
    from clawsdk.data.export import read_manifest

    if Path(dataset).is_dir():
        manifest = read_manifest(dataset)
        known = store.query("SELECT id FROM datasets WHERE id = ?", [manifest["id"]])
        return (manifest["id"] if known else None), Path(manifest["path"])
    row = lineage.dataset(store, dataset)
    return row["id"], Path(row["path"])


def _losses(history: list[dict]) -> list[float]:
    return [h["loss"] for h in history if "loss" in h]


class TrlSftTrainer:
    """Supervised fine-tuning on an exported SFT dataset; the loss covers assistant turns only.

    Options: model (embedded | transformers:PATH | PATH), epochs, max_steps, lr, batch_size,
    grad_accum, max_length (longer conversations are skipped, not cut), lora (with lora_r,
    lora_alpha, lora_dropout), warmup_steps, scheduler, seed, threads, tool_format (auto | clawsdk |
    template), checkpointing (activation checkpointing: less memory, about 20% slower; default off).
    """

    name = "trl-sft"

    def __init__(
        self,
        model: str = "embedded",
        *,
        epochs: float = 1.0,
        max_steps: int = -1,
        lr: float = 5e-5,
        batch_size: int = 4,
        grad_accum: int = 1,
        max_length: int = 2048,
        lora: bool = False,
        lora_r: int = 16,
        lora_alpha: int | None = None,
        lora_dropout: float = 0.0,
        warmup_steps: int = 0,
        scheduler: str = "linear",
        seed: int = 0,
        threads: int | None = None,
        tool_format: str = "auto",
        logging_steps: int = 1,
        checkpointing: bool = False,
    ):
        if batch_size < 1 or grad_accum < 1 or max_length < 16:
            raise ValueError("batch_size and grad_accum must be at least 1, max_length at least 16")
        self.model = model
        self.opts = dict(
            epochs=epochs,
            max_steps=max_steps,
            lr=lr,
            batch_size=batch_size,
            grad_accum=grad_accum,
            max_length=max_length,
            lora=lora,
            lora_r=lora_r,
            lora_alpha=lora_alpha,
            lora_dropout=lora_dropout,
            warmup_steps=warmup_steps,
            scheduler=scheduler,
            seed=seed,
            threads=threads,
            tool_format=tool_format,
            logging_steps=logging_steps,
            checkpointing=checkpointing,
        )

    def encode(self, rows: list[dict], tok: Any) -> tuple[dict[str, list], int]:
        from clawsdk.data.tokenize import encode_chat

        cols: dict[str, list] = {"input_ids": [], "assistant_masks": []}
        skipped = 0
        for row in rows:
            if "messages" not in row:
                raise ValueError(
                    "trl-sft trains on SFT exports (rows with 'messages'); this dataset has "
                    f"{sorted(row)} (export with --kind sft)"
                )
            ids, mask = encode_chat(tok, row["messages"], row.get("tools"), self.opts["tool_format"])
            if len(ids) > self.opts["max_length"] or not any(mask):
                skipped += 1
                continue
            cols["input_ids"].append(ids)
            cols["assistant_masks"].append(mask)
        return cols, skipped

    def train(
        self,
        dataset: str,
        out: str | os.PathLike,
        *,
        db: str | os.PathLike | None = None,
        checkpoint_id: str | None = None,
    ) -> TrainResult:
        import datasets
        from trl import SFTConfig, SFTTrainer

        from clawsdk.data.export import load_rows
        from clawsdk.store.store import Store

        o = self.opts
        out = Path(out)
        started = time.perf_counter()
        with Store(db) as store:
            dataset_id, folder = _dataset_ref(store, dataset)
        rows = load_rows(folder)
        base = resolve_base(self.model)
        model, tok = _load_model(base, o["threads"])
        cols, skipped = self.encode(rows, tok)
        if not cols["input_ids"]:
            raise ValueError(
                f"no trainable rows in {folder} ({skipped} longer than max_length={o['max_length']} "
                f"or without an assistant turn)"
            )
        ds = datasets.Dataset.from_dict(cols)
        cuda = _device() == "cuda"
        args = SFTConfig(
            output_dir=str(out / "trainer"),
            per_device_train_batch_size=o["batch_size"],
            gradient_accumulation_steps=o["grad_accum"],
            num_train_epochs=o["epochs"],
            max_steps=o["max_steps"],
            learning_rate=o["lr"],
            lr_scheduler_type=o["scheduler"],
            warmup_steps=o["warmup_steps"],
            logging_steps=o["logging_steps"],
            save_strategy="no",
            report_to=[],
            seed=o["seed"],
            max_length=None,
            use_cpu=not cuda,
            bf16=cuda,
            dataloader_num_workers=0,
            disable_tqdm=True,
            gradient_checkpointing=o["checkpointing"],  # TRL turns it on; a small model trains faster without
        )
        peft_config = _lora_config(o["lora_r"], o["lora_alpha"], o["lora_dropout"]) if o["lora"] else None
        trainer = SFTTrainer(
            model=model, args=args, train_dataset=ds, processing_class=tok, peft_config=peft_config
        )
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        _save(trainer, tok, out, o["lora"])
        history = trainer.state.log_history
        losses = _losses(history)
        n_tokens = sum(len(x) for x in cols["input_ids"])
        metrics = {
            "steps": trainer.state.global_step,
            "examples": len(cols["input_ids"]),
            "skipped": skipped,
            "tokens": n_tokens,
            "assistant_tokens": sum(sum(m) for m in cols["assistant_masks"]),
            "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None,
            "train_s": round(train_s, 2),
            "wall_s": round(time.perf_counter() - started, 2),
            "device": _device(),
        }
        cid = _record_checkpoint(db, self.name, self.model, o, base, out, dataset_id, metrics, checkpoint_id)
        return TrainResult(checkpoint_id=cid, path=out, dataset_id=dataset_id, metrics=metrics)


def _record_checkpoint(db: Any, trainer: str, model: str, options: dict, base: str, out: Path,
                       dataset_id: Any, metrics: dict, checkpoint_id: str | None, runs: list | None = None) -> str:
    """Record the checkpoint in the store with what trained it, and a card beside its weights."""
    from clawsdk.data import lineage
    from clawsdk.store.store import Store

    extra = {"runs": runs} if runs is not None else {}
    with Store(db) as store:
        cid = lineage.record_checkpoint(
            store, trainer=trainer, base_model=base, path=str(out.resolve()), dataset_id=dataset_id,
            config={"model": model, **options}, metrics=metrics, checkpoint_id=checkpoint_id,
            parent_id=_parent(store, base), **extra,
        )
    card = {"id": cid, "trainer": trainer, "base_model": base, "dataset_id": dataset_id, **extra, "metrics": metrics}
    (out / "clawsdk-checkpoint.json").write_text(json.dumps(card, indent=2) + "\n")
    return cid


def _parent(store: Any, base: str) -> str | None:
    rows = store.query("SELECT id FROM checkpoints WHERE path = ?", [str(Path(base).resolve())])
    return rows[0]["id"] if rows else None


# ---- GRPO ----------------------------------------------------------------------------------------


def _policy_model(trainer: Any, **options: Any) -> Any:
    """A clawsdk Model that generates with the trainer's current weights: its vLLM engine on a GPU,
    else the model being trained (transformers generate)."""
    from clawsdk_plugins.models_transformers import TransformersModel
    from clawsdk_plugins.models_vllm import VLLMModel

    if getattr(trainer, "use_vllm", False):

        class VLLMPolicy(VLLMModel):
            def _load(self) -> None:
                gen = trainer.vllm_generation
                if getattr(gen, "llm", None) is None:
                    raise ValueError("trl-grpo drives vLLM in colocate mode only (vllm_mode=colocate)")
                self.llm = gen.llm
                self.tokenizer = self.llm.get_tokenizer()
                self.context_window = self.context_window or int(
                    self.llm.llm_engine.model_config.max_model_len
                )

        return VLLMPolicy("policy", **options)

    class TrainedPolicy(TransformersModel):
        def _load(self) -> None:
            self.hf_model = trainer.accelerator.unwrap_model(trainer.model)
            self.tokenizer = trainer.processing_class
            self._setup_tokens()

    model = TrainedPolicy("policy", device=str(trainer.accelerator.device), **options)
    model.name = "policy"
    return model


class TrlGrpoTrainer:
    """GRPO where each completion is a whole clawsdk rollout: the tool-loop agent, driven by the policy
    being trained, works the task in a fresh sandbox through the task's MCP tools, and the verifier's
    score is the reward. Each task gets G rollouts (a group); tool results are masked out of the loss.

    Options: model, num_generations (G), tasks_per_step, max_steps, lr, beta, temperature, sandbox,
    concurrency, max_turns, max_tokens (per model turn), turn_timeout_s, use_vllm (auto: on a GPU
    with vllm installed), lora (+ lora_r, lora_alpha), seed, threads, agent (extra tool-loop options).
    """

    name = "trl-grpo"

    def __init__(
        self,
        model: str = "embedded",
        *,
        num_generations: int = 4,
        tasks_per_step: int = 1,
        max_steps: int = 10,
        lr: float = 1e-6,
        beta: float = 0.0,
        temperature: float = 1.0,
        sandbox: str = "local",
        concurrency: int = 8,
        max_turns: int = 6,
        max_tokens: int = 256,
        turn_timeout_s: float = 120.0,
        use_vllm: bool | str = "auto",
        lora: bool = False,
        lora_r: int = 16,
        lora_alpha: int | None = None,
        seed: int = 0,
        threads: int | None = None,
        agent: dict | None = None,
        logging_steps: int = 1,
        checkpointing: bool = False,
    ):
        if num_generations < 2:
            raise ValueError("num_generations must be at least 2: GRPO compares rollouts within a group")
        self.model = model
        self.opts = dict(
            num_generations=num_generations,
            tasks_per_step=tasks_per_step,
            max_steps=max_steps,
            lr=lr,
            beta=beta,
            temperature=temperature,
            sandbox=sandbox,
            concurrency=concurrency,
            max_turns=max_turns,
            max_tokens=max_tokens,
            turn_timeout_s=turn_timeout_s,
            use_vllm=use_vllm,
            lora=lora,
            lora_r=lora_r,
            lora_alpha=lora_alpha,
            seed=seed,
            threads=threads,
            agent=agent or {},
            logging_steps=logging_steps,
            checkpointing=checkpointing,
        )
        self.runs: list[str] = []
        self.episodes: list[dict[str, Any]] = []

    def _use_vllm(self) -> bool:
        flag = self.opts["use_vllm"]
        if flag != "auto":
            return bool(flag)
        import importlib.util

        return _device() == "cuda" and importlib.util.find_spec("vllm") is not None

    def rollout_func(self, db: str | os.PathLike | None, run_prefix: str):
        """The GRPOTrainer rollout_func: one clawsdk run per generation round, G samples per task."""
        from clawsdk.data.tokenize import assemble_episode
        from clawsdk.runtime.runner import rollout_id, run_sync
        from clawsdk.store.store import Store
        from clawsdk_plugins.agent_toolloop import ToolLoopAgent

        o = self.opts
        policy_holder: dict[str, Any] = {}
        tasks_cache: dict[str, Any] = {}

        def rollout(prompts: list, trainer: Any) -> dict[str, list]:
            inputs = trainer._clawsdk_inputs
            if len(inputs) != len(prompts):
                raise RuntimeError(
                    "trl-grpo: the prompts do not line up with the batch (TRL changed its API?)"
                )
            if "policy" not in policy_holder:
                policy_holder["policy"] = _policy_model(
                    trainer, timeout_s=o["turn_timeout_s"], max_batch=max(8, len(prompts))
                )
            policy = policy_holder["policy"]
            slots: list[tuple[str, int]] = []
            seen: dict[str, int] = {}
            for x in inputs:
                h = x["task_hash"]
                slots.append((h, seen.get(h, 0)))
                seen[h] = seen.get(h, 0) + 1
            with Store(db) as store:
                for h in seen:
                    if h not in tasks_cache:
                        task = store.task(h)
                        if task is None:
                            raise LookupError(
                                f"task {h[:12]} of the prompt set is not in {store.path}; "
                                f"export the prompt set from this store"
                            )
                        tasks_cache[h] = task
            tasks = [tasks_cache[h] for h in seen]
            ids = [t.id for t in tasks]
            if len(set(ids)) != len(ids):
                raise ValueError(
                    "two different tasks with the same id in one GRPO batch; give tasks unique ids"
                )
            run_id = f"{run_prefix}-g{len(self.runs):05d}"
            agent = ToolLoopAgent(
                model=policy,
                max_turns=o["max_turns"],
                max_tokens=o["max_tokens"],
                temperature=o["temperature"],
                turn_timeout_s=o["turn_timeout_s"],
                max_context_chars=10**9,
                **o["agent"],
            )  # no elision: prompts must extend
            run_sync(
                tasks,
                agent=agent,
                samples=max(seen.values()),
                run_id=run_id,
                db=db,
                sandbox=o["sandbox"],
                concurrency=o["concurrency"],
                retries=1,
            )
            self.runs.append(run_id)
            eos = trainer.processing_class.eos_token_id
            out: dict[str, list] = {
                "prompt_ids": [],
                "completion_ids": [],
                "logprobs": [],
                "env_mask": [],
                "clawsdk_reward": [],
                "clawsdk_rollout": [],
            }
            with Store(db) as store:
                for h, k in slots:
                    rid = rollout_id(run_id, tasks_cache[h].id, k)
                    row = store.rollout(rid)
                    responses = [e["payload"] for e in store.events(rid) if e["kind"] == "model_response"]
                    ep = assemble_episode(responses, eos)
                    if ep is None or not ep.completion_ids:
                        out["prompt_ids"].append([eos])
                        out["completion_ids"].append([eos])
                        out["logprobs"].append([0.0])
                        out["env_mask"].append([0])
                    else:
                        out["prompt_ids"].append(ep.prompt_ids)
                        out["completion_ids"].append(ep.completion_ids)
                        out["logprobs"].append(ep.logprobs)
                        out["env_mask"].append(ep.env_mask)
                    scored = row is not None and row["scored"]
                    out["clawsdk_reward"].append(
                        float(row["reward"]) if scored and row["reward"] is not None else None
                    )
                    out["clawsdk_rollout"].append(rid)
                    self.episodes.append(
                        {
                            "run_id": run_id,
                            "rollout_id": rid,
                            "reward": out["clawsdk_reward"][-1],
                            "turns": ep.turns if ep else 0,
                            "cut_turns": ep.cut_turns if ep else 0,
                        }
                    )
            return out

        return rollout

    def train(
        self,
        prompts: str,
        out: str | os.PathLike,
        *,
        db: str | os.PathLike | None = None,
        checkpoint_id: str | None = None,
        run_prefix: str | None = None,
    ) -> TrainResult:
        import datasets
        from trl import GRPOConfig, GRPOTrainer

        from clawsdk.data.export import load_rows
        from clawsdk.store.store import Store, default_db_path

        o = self.opts
        out = Path(out)
        db = Path(db) if db is not None else default_db_path()
        started = time.perf_counter()
        with Store(db) as store:
            dataset_id, folder = _dataset_ref(store, prompts)
        rows = load_rows(folder)
        if not rows or "task_hash" not in rows[0] or "prompt" not in rows[0]:
            raise ValueError(
                f"{folder} is not an RL prompt set (rows with 'prompt' and 'task_hash'); "
                f"export one with `clawsdk data export --kind rl`"
            )
        ds = datasets.Dataset.from_list([{"prompt": r["prompt"], "task_hash": r["task_hash"]} for r in rows])
        base = resolve_base(self.model)
        model, tok = _load_model(base, o["threads"])
        cuda = _device() == "cuda"
        use_vllm = self._use_vllm()
        g = o["num_generations"]
        args = GRPOConfig(
            output_dir=str(out / "trainer"),
            per_device_train_batch_size=g * o["tasks_per_step"],
            num_generations=g,
            max_steps=o["max_steps"],
            learning_rate=o["lr"],
            beta=o["beta"],
            temperature=o["temperature"],
            logging_steps=o["logging_steps"],
            save_strategy="no",
            report_to=[],
            seed=o["seed"],
            use_cpu=not cuda,
            bf16=cuda,
            use_vllm=use_vllm,
            vllm_mode="colocate",
            dataloader_num_workers=0,
            disable_tqdm=True,
            max_completion_length=o["max_tokens"] * o["max_turns"],
            gradient_checkpointing=o["checkpointing"],
        )
        prefix = run_prefix or f"grpo-{time.strftime('%Y%m%d-%H%M%S')}"

        class ClawsdkGRPOTrainer(GRPOTrainer):
            # TRL hands rollout_func only the prompts; the batch rows carry the task references
            def _generate_and_score_completions(self, inputs):
                self._clawsdk_inputs = inputs
                return super()._generate_and_score_completions(inputs)

        def clawsdk_verifier(prompts: list, completions: list, clawsdk_reward: list, **_: Any) -> list:
            return list(clawsdk_reward)

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        peft_config = _lora_config(o["lora_r"], o["lora_alpha"], 0.0) if o["lora"] else None
        trainer = ClawsdkGRPOTrainer(
            model=model,
            reward_funcs=[clawsdk_verifier],
            args=args,
            train_dataset=ds,
            processing_class=tok,
            peft_config=peft_config,
            rollout_func=self.rollout_func(db, prefix),
        )
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        _save(trainer, tok, out, o["lora"])
        history = trainer.state.log_history
        rewards = [h["reward"] for h in history if "reward" in h]
        metrics = {
            "steps": trainer.state.global_step,
            "rollouts": len(self.episodes),
            "mean_reward_first": rewards[0] if rewards else None,
            "mean_reward_last": rewards[-1] if rewards else None,
            "cut_turns": sum(e["cut_turns"] for e in self.episodes),
            "train_s": round(train_s, 2),
            "wall_s": round(time.perf_counter() - started, 2),
            "device": _device(),
            "vllm": use_vllm,
        }
        cid = _record_checkpoint(db, self.name, self.model, o, base, out, dataset_id, metrics, checkpoint_id,
                                 runs=self.runs)
        return TrainResult(
            checkpoint_id=cid, path=out, dataset_id=dataset_id, metrics=metrics, runs=self.runs
        )


@hookimpl
def register_trainers(register):
    register("trl-sft", TrlSftTrainer)
    register("trl-grpo", TrlGrpoTrainer)


@hookimpl
def register_commands(register):
    from clawsdk.data.commands import data_group, train_group

    register(data_group)
    register(train_group)
