"""The `trl-sft` trainer: TRL SFTTrainer on an exported conversation dataset, assistant-only loss.

It starts from `embedded` (the dequantized SmolLM2-135M copy), `transformers:PATH` or a PATH, writes a
checkpoint that `--model transformers:PATH` loads and records it in the store with the dataset and
base model that made it. torch, transformers, trl and peft are imported only when it trains.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from clawsdk.train import TrainResult
from clawsdk_plugins.trainers.common import (
    _dataset_ref,
    _device,
    _load_model,
    _lora_config,
    _losses,
    _record_checkpoint,
    _save,
    _stage_out,
    checkpointing_arg,
    plan_step,
    resolve_weights,
    state_bytes,
)

log = logging.getLogger(__name__)


class TrlSftTrainer:
    """Supervised fine-tuning on an exported SFT dataset; the loss covers assistant turns only.

    Options: model (embedded | transformers:PATH | PATH), epochs, max_steps, lr, batch_size,
    grad_accum, max_length (longer conversations are skipped, not cut), lora (with lora_r,
    lora_alpha, lora_dropout), warmup_steps, scheduler, seed, threads, tool_format (auto | clawsdk |
    template), checkpointing (auto, true or false). batch_size is the optimizer's batch: it runs as
    micro-batches that fit in half the free memory, with gradient accumulation (the same step), and
    auto checkpoints activations only when one sequence alone does not fit.
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
        max_length: int = 4096,
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
        checkpointing: bool | str = "auto",
    ):
        if batch_size < 1 or grad_accum < 1 or max_length < 16:
            raise ValueError("batch_size and grad_accum must be at least 1, max_length at least 16")
        self.model = model
        self.opts: dict[str, Any] = dict(
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
        from clawsdk.data.tokenize import control_tokens, encode_chat, find_control_token

        cols: dict[str, list] = {"input_ids": [], "assistant_masks": []}
        skipped = 0
        tokens = control_tokens(tok)
        for row in rows:
            if "messages" not in row:
                raise ValueError(
                    "trl-sft trains on SFT exports (rows with 'messages'); this dataset has "
                    f"{sorted(row)} (export with --kind sft)"
                )
            found = find_control_token(row, tokens)
            if found:  # the tokenizer would read the text as its special token: a turn marker nobody wrote
                log.warning("trl-sft: skipped a row: %s holds %r, a special token of the tokenizer", found[1],
                            found[0])
                skipped += 1
                continue
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
        rows = load_rows(folder)  # checked, tool calls too, before the model loads
        base = resolve_weights(self.model)
        stage = _stage_out(out, base)  # refuses a used -o or the base's folder before training
        model, tok = _load_model(base, o["threads"], lora=o["lora"])
        cols, skipped = self.encode(rows, tok)
        if not cols["input_ids"]:
            raise ValueError(
                f"no trainable rows in {folder} ({skipped} longer than max_length={o['max_length']}, "
                f"without an assistant turn or holding a special token of the tokenizer as text)"
            )
        ds = datasets.Dataset.from_dict(cols)
        cuda = _device() == "cuda"
        longest = max(len(x) for x in cols["input_ids"])
        micro, checkpointing, why = plan_step(o["checkpointing"], model.config, o["batch_size"], longest,
                                              reserved=state_bytes(model, o["lora"]))
        log.info("trl-sft: batch %d as micro-batches of %d, activation checkpointing %s (%s)", o["batch_size"],
                 micro, "on" if checkpointing else "off", why)
        args = SFTConfig(
            output_dir=str(stage / "trainer"),
            per_device_train_batch_size=micro,
            gradient_accumulation_steps=o["grad_accum"] * (o["batch_size"] // micro),
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
            **checkpointing_arg(SFTConfig, checkpointing),
        )
        peft_config = _lora_config(o["lora_r"], o["lora_alpha"], o["lora_dropout"]) if o["lora"] else None
        seen = {"examples": 0, "tokens": 0}

        class CountingSFTTrainer(SFTTrainer):
            # what was trained on, not the dataset's size: --max-steps or part of an epoch sees fewer rows
            def training_step(self, model, inputs, *args, **kwargs):
                mask = inputs.get("attention_mask")
                seen["examples"] += len(inputs["input_ids"])
                seen["tokens"] += int(mask.sum()) if mask is not None else inputs["input_ids"].numel()
                return super().training_step(model, inputs, *args, **kwargs)

        trainer = CountingSFTTrainer(
            model=model, args=args, train_dataset=ds, processing_class=tok, peft_config=peft_config
        )
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        weights = _save(trainer, tok, stage, o["lora"])
        history = trainer.state.log_history
        losses = _losses(history)
        n_tokens = sum(len(x) for x in cols["input_ids"])
        metrics = {
            "steps": trainer.state.global_step,
            "examples_seen": seen["examples"],  # repeats counted: two epochs see each example twice
            "tokens_seen": seen["tokens"],
            "examples": len(cols["input_ids"]),  # the dataset's trainable rows
            "skipped": skipped,
            "tokens": n_tokens,
            "assistant_tokens": sum(sum(m) for m in cols["assistant_masks"]),
            "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None,
            "train_s": round(train_s, 2),
            "wall_s": round(time.perf_counter() - started, 2),
            "device": _device(),
            "micro_batch": micro,
            "checkpointing": checkpointing,
            "memory_plan": why,
            "weights_sha256": weights,
        }
        cid = _record_checkpoint(db, self.name, self.model, o, base, out, dataset_id, metrics, checkpoint_id,
                                 stage=stage)
        return TrainResult(checkpoint_id=cid, path=out, dataset_id=dataset_id, metrics=metrics)


__all__ = ["TrlSftTrainer"]
