"""What the TRL trainers share: loading a base model, LoRA, saving, the dataset a run names, and
recording the checkpoint with its lineage. torch, transformers and peft load inside these functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawsdk.train import TrainResult, resolve_weights

resolve_base = resolve_weights  # the name older code imports


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


__all__ = ["TrainResult", "resolve_base"]
