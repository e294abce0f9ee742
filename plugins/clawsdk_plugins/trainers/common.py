"""What the TRL trainers share: loading a base model, LoRA, saving, the dataset a run names, and
recording the checkpoint with its lineage. torch, transformers and peft load inside these functions."""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from clawsdk.train import TrainResult, resolve_weights
from clawsdk_plugins.models.local_engine import hub_kernels

log = logging.getLogger(__name__)

_STAGED: set[Path] = set()  # hidden folders of this process's runs not yet renamed into place


@atexit.register
def _remove_staged() -> None:
    """A run that failed or was interrupted leaves no half-written sibling behind."""
    for stage in list(_STAGED):
        shutil.rmtree(stage, ignore_errors=True)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _load_model(path: str, threads: int | None, *, lora: bool = False) -> tuple[Any, Any]:
    """The base to train. Weights that train stay float32, with their optimizer state; on CUDA the
    trainer's `bf16=True` computes in bfloat16 under autocast. Weights held in bfloat16 lose every update
    below half a unit in their last place (a weight of 0.5 moves by 0.002 or not at all; AdamW at lr 5e-5
    moves it by about 5e-5), and a step that changes nothing rounds the checkpoint anyway: on an H200, two
    runs that should train the same weights differed by 65% of what they moved. LoRA's base is frozen
    and loads in bfloat16 on CUDA (its adapters are kept in float32 by peft)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(int(threads))
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = torch.bfloat16 if lora and _device() == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, use_kernels=hub_kernels())
    if getattr(model, "hf_quantizer", None) is not None or getattr(model.config, "quantization_config", None):
        raise ValueError(
            f"{path} is still marked quantized; train from a dequantized copy "
            f"(--model embedded does this for SmolLM2)"
        )
    return model, tok


def activation_bytes(config: Any, rows: int, length: int) -> int:
    """About what one optimizer step's saved activations take for `rows` sequences of `length`
    tokens: attention weights (heads x length^2 per layer, which CPU attention keeps), the hidden
    states, and the logits with their gradient. Measured for SmolLM2-135M at 1 x 2,500 tokens: it
    says 9.1 GB where the process peaked at 9.6 GB with the weights and optimizer state."""
    layers = int(getattr(config, "num_hidden_layers", 0) or 12)
    heads = int(getattr(config, "num_attention_heads", 0) or 12)
    hidden = int(getattr(config, "hidden_size", 0) or 768)
    vocab = int(getattr(config, "vocab_size", 0) or 32000)
    per_row = layers * length * (heads * length + 8 * hidden) * 4 + length * vocab * 8
    return rows * per_row


def free_memory() -> int:
    """Bytes the training step may use: free GPU memory on CUDA, MemAvailable otherwise."""
    import torch

    if torch.cuda.is_available():
        return int(torch.cuda.mem_get_info()[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def state_bytes(model: Any, lora: bool) -> int:
    """What the model takes on the GPU once the trainer moves it there, which free GPU memory read before then
    still counts as free: float32 weights, their gradients and AdamW's two moments (16 bytes a parameter),
    or a frozen bfloat16 LoRA base (its adapters are small). Nothing on the CPU, whose RAM already holds it."""
    if _device() != "cuda" or next(model.parameters()).is_cuda:
        return 0
    n = sum(p.numel() for p in model.parameters())
    return n * (2 if lora else 16)


def plan_step(setting: Any, config: Any, rows: int, length: int, split: bool = True,
              reserved: int = 0) -> tuple[int, bool, str]:
    """How to run one optimizer step of `rows` sequences of up to `length` tokens: (micro-batch, activation
    checkpointing, why). The micro-batch is the largest divisor of `rows` whose activations fit in half
    the free memory (gradient accumulation makes up the rest, the same step), and checkpointing
    (about 20% slower, far less memory) comes on, with `auto`, only when one micro-batch still does
    not fit; `split=False` keeps the whole batch together. True or false decides checkpointing. Without
    this, 4 x 2.5k-token conversations got SmolLM2-135M killed for memory on a 24 GB machine. `reserved`:
    bytes the model will take that the free memory still counts (`state_bytes`)."""
    if isinstance(setting, str) and setting.lower() != "auto":
        setting = setting.lower() in ("1", "true", "yes", "on")
    budget, gb = max(0, free_memory() - reserved) // 2, 1 << 30
    fits = [m for m in range(rows, 0, -1) if rows % m == 0 and activation_bytes(config, m, length) <= budget]
    micro = (fits[0] if fits else 1) if split else rows
    need = activation_bytes(config, micro, length)
    what = f"{micro} x {length} tokens a micro-batch, about {need / gb:.1f} GB of activations, {budget / gb:.1f} GB allowed"
    if isinstance(setting, bool):
        return micro, setting, f"{'on' if setting else 'off'} as asked; {what}"
    return micro, need > budget, f"auto; {what}"


def checkpointing_arg(config_class: Any, on: bool) -> dict[str, bool]:
    """The training argument that turns activation checkpointing on: `activation_checkpointing` where
    transformers has it (5.x deprecates `gradient_checkpointing`, warning on every run), else the old name."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(config_class)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": on}


def _lora_config(r: int, alpha: int | None, dropout: float) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=r,
        lora_alpha=alpha or 2 * r,
        lora_dropout=dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def _stage_out(out: Path, base: str) -> Path:
    """Check `out` before anything trains, and make the hidden sibling the run writes into (TRL's
    working folder, then the checkpoint and its card); `_record_checkpoint` renames it into place.

    Refuses an `out` that exists and is not an empty folder (a second run into it would replace
    the weights an earlier store record describes) and one that is, or is inside, the base model's
    folder. The sibling is removed when the process exits without having renamed it."""
    out = Path(out)
    target = out.resolve()
    base_dir = Path(base).resolve()
    if base_dir.is_dir() and (target == base_dir or base_dir in target.parents):
        raise ValueError(
            f"-o/--out {out} is the base model's folder {base_dir} (or inside it): training would overwrite "
            f"the model it starts from; choose another -o/--out"
        )
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        raise FileExistsError(
            f"{out} exists and is not empty: choose a new -o/--out for this checkpoint, or remove {out} first"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = target.parent / f".{target.name}.partial-{secrets.token_hex(4)}"
    stage.mkdir()
    _STAGED.add(stage)
    return stage


def _save(trainer: Any, tok: Any, out: Path, lora: bool) -> str:
    """Save the trained model where transformers loads it (the folder `_stage_out` made); returns the
    digest of its weights."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if lora:  # one folder that transformers loads as is
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    return weights_digest(out)


def weights_digest(folder: Path) -> str:
    """sha256 of a checkpoint's weight files, read in name order as one stream (`sha256sum model.safetensors`
    where there is one): a retrained checkpoint can be told equal to one trained before (the same data and
    settings on the CPU give the same bytes), and a card names its weights."""
    h = hashlib.sha256()
    for f in sorted(Path(folder).glob("*.safetensors")):
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 24), b""):
                h.update(chunk)
    return h.hexdigest()


def _dataset_ref(store: Any, dataset: str) -> tuple[str | None, Path]:
    """A dataset id or name in the store, or an export folder -> (dataset id, folder)."""
    from clawsdk.data import lineage
    from clawsdk.data.export import read_manifest

    path = Path(dataset)
    if path.is_dir() or (path.name == "dataset.json" and path.is_file()):
        manifest = read_manifest(dataset)  # checks it, naming the file and the field
        known = store.query("SELECT id FROM datasets WHERE id = ?", [manifest["id"]])
        return (manifest["id"] if known else None), Path(manifest["path"])
    row = lineage.dataset(store, dataset)
    return row["id"], Path(row["path"])


def _losses(history: list[dict]) -> list[float]:
    return [h["loss"] for h in history if "loss" in h]


def _record_checkpoint(db: Any, trainer: str, model: str, options: dict, base: str, out: Path,
                       dataset_id: Any, metrics: dict, checkpoint_id: str | None, runs: list | None = None,
                       stage: Path | None = None) -> str:
    """Write the card beside the weights in `stage` (what `_stage_out` made and `_save` filled), rename it
    to `out`, then record the checkpoint in the store with what trained it: the store never names a
    folder that is not a whole checkpoint, and `out` never holds new weights mixed with old files."""
    from clawsdk.data import lineage
    from clawsdk.store.store import Store

    out = Path(out)
    stage = Path(stage) if stage is not None else out
    extra = {"runs": runs} if runs is not None else {}
    cid = checkpoint_id or lineage.new_checkpoint_id()  # known before the card is written
    with Store(db) as store:
        parent = _parent(store, base)
    card = {"id": cid, "trainer": trainer, "base_model": base, "dataset_id": dataset_id, **extra, "metrics": metrics}
    (stage / "clawsdk-checkpoint.json").write_text(json.dumps(card, indent=2) + "\n")
    if stage != out:
        try:
            os.rename(stage, out)  # fails, rather than replaces, if something non-empty appeared meanwhile
        except OSError as e:
            _STAGED.discard(stage)  # trained weights: kept for the user to move
            raise FileExistsError(
                f"{out} was filled while this run trained: its checkpoint is left in {stage}; "
                f"rename that to a new folder"
            ) from e
        _STAGED.discard(stage)
    try:
        with Store(db) as store:
            lineage.record_checkpoint(
                store, trainer=trainer, base_model=base, path=str(out.resolve()), dataset_id=dataset_id,
                config={"model": model, **options}, metrics=metrics, checkpoint_id=cid,
                parent_id=parent, **extra,
            )
    except BaseException:
        log.error("%s is a whole checkpoint (card %s) but the store did not record it", out, cid)
        raise
    return cid


def _parent(store: Any, base: str) -> str | None:
    rows = store.query("SELECT id FROM checkpoints WHERE path = ?", [str(Path(base).resolve())])
    return rows[0]["id"] if rows else None


__all__ = ["TrainResult", "resolve_weights"]
