"""A training step is planned to fit memory: a batch runs as micro-batches with gradient accumulation
(the same optimizer step), and activation checkpointing comes on only when one sequence does not fit.
Before this, `batch_size=4` over 2.5k-token conversations got SmolLM2-135M killed on a 24 GB machine."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from clawsdk_plugins.trainers import common as train_common
from clawsdk_plugins.trainers.common import activation_bytes, plan_step
from test_train_sft_grpo import sft_export

SMOLLM2 = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, hidden_size=576, vocab_size=49152)
GB = 1 << 30


def test_the_estimate_matches_what_smollm2_took():
    # measured: one 2,500-token conversation peaked at 9.6 GB with 2.2 GB of weights and Adam state
    assert 6 * GB < activation_bytes(SMOLLM2, 1, 2500) < 10 * GB
    assert activation_bytes(SMOLLM2, 4, 2500) == 4 * activation_bytes(SMOLLM2, 1, 2500)
    assert activation_bytes(SMOLLM2, 1, 5000) > 3 * activation_bytes(SMOLLM2, 1, 2500)  # attention is quadratic


@pytest.mark.parametrize(
    "free_gb, setting, want",
    [
        (200, "auto", (4, False)),  # a large GPU: the batch stays whole
        (24, "auto", (1, False)),  # this machine: one conversation at a time, accumulated
        (8, "auto", (1, True)),  # one conversation alone does not fit: checkpoint it
        (200, True, (4, True)),
        (8, "false", (1, False)),  # asked: off, even if it may not fit
    ],
)
def test_plan_step_splits_the_batch_before_it_checkpoints(monkeypatch, free_gb, setting, want):
    monkeypatch.setattr(train_common, "free_memory", lambda: free_gb * GB)
    micro, checkpointing, why = plan_step(setting, SMOLLM2, 4, 2500)
    assert (micro, checkpointing) == want
    assert f"{micro} x 2500 tokens" in why


def test_a_batch_that_must_stay_whole_is_checkpointed(monkeypatch):
    monkeypatch.setattr(train_common, "free_memory", lambda: 24 * GB)
    assert plan_step("auto", SMOLLM2, 4, 2500, split=False)[:2] == (4, True)


@pytest.mark.timeout(300)
def test_micro_batches_make_the_same_optimizer_steps(tiny_model, tmp_path, monkeypatch):
    """batch_size 2 run as two micro-batches of 1 trains the same model as one batch of 2."""
    import torch
    from clawsdk_plugins.trainers.trl import TrlSftTrainer
    from transformers import AutoModelForCausalLM

    db, dataset_id = sft_export(tmp_path, n=4)
    monkeypatch.setattr(train_common, "activation_bytes", lambda config, rows, length: rows * GB)
    results = {}
    for free in (100, 3):  # half of it allows 2 rows, then 1
        monkeypatch.setattr(train_common, "free_memory", lambda free=free: free * GB)
        trainer = TrlSftTrainer(str(tiny_model), max_steps=2, batch_size=2, lr=1e-2, threads=1, seed=0)
        results[free] = trainer.train(dataset_id, tmp_path / f"ckpt-{free}", db=db)
    whole, split = results[100].metrics, results[3].metrics
    assert (whole["micro_batch"], split["micro_batch"]) == (2, 1)
    assert whole["steps"] == split["steps"] == 2 and not whole["checkpointing"] and not split["checkpointing"]
    before = AutoModelForCausalLM.from_pretrained(str(tiny_model)).state_dict()
    a = AutoModelForCausalLM.from_pretrained(str(tmp_path / "ckpt-100")).state_dict()
    b = AutoModelForCausalLM.from_pretrained(str(tmp_path / "ckpt-3")).state_dict()
    moved = max(float((a[k] - before[k]).abs().max()) for k in a)
    apart = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert moved > 1e-3 and apart < moved / 20, (moved, apart)
    assert torch.isfinite(torch.tensor([whole["last_loss"], split["last_loss"]])).all()


def test_on_cuda_the_weights_that_train_stay_float32_and_a_frozen_lora_base_is_bfloat16(tiny_model, monkeypatch):
    """Weights held in bfloat16 lose every AdamW update below half a unit in their last place: on an H200 the
    micro-batch test above failed, two runs that should train the same weights differing by 65% of what they
    moved. Training keeps float32 weights and computes in bfloat16 under the trainer's autocast (`bf16=True`)."""
    import torch

    monkeypatch.setattr(train_common, "_device", lambda: "cuda")
    full, _ = train_common._load_model(str(tiny_model), 1)
    lora, _ = train_common._load_model(str(tiny_model), 1, lora=True)
    assert {p.dtype for p in full.parameters()} == {torch.float32}
    assert {p.dtype for p in lora.parameters()} == {torch.bfloat16}


def test_on_cuda_the_plan_leaves_room_for_the_weights_and_optimizer_state_it_does_not_see_yet(tiny_model, monkeypatch):
    """Free GPU memory is read while the model is still on the CPU: its float32 weights, gradients and AdamW
    moments (16 bytes a parameter; a 7B model's 112 GB) were counted as room for activations."""
    monkeypatch.setattr(train_common, "_device", lambda: "cuda")
    model, _ = train_common._load_model(str(tiny_model), 1)
    n = sum(p.numel() for p in model.parameters())
    assert train_common.state_bytes(model, lora=False) == 16 * n
    lora, _ = train_common._load_model(str(tiny_model), 1, lora=True)
    assert train_common.state_bytes(lora, lora=True) == 2 * n
    monkeypatch.setattr(train_common, "free_memory", lambda: 100 * GB)
    monkeypatch.setattr(train_common, "activation_bytes", lambda config, rows, length: rows * 10 * GB)
    assert plan_step("auto", SMOLLM2, 4, 2500)[0] == 4  # 4 x 10 GB fits half of 100 GB
    assert plan_step("auto", SMOLLM2, 4, 2500, reserved=40 * GB)[0] == 2  # half of the 60 GB left: 2 x 10 GB
    monkeypatch.setattr(train_common, "_device", lambda: "cpu")
    assert train_common.state_bytes(model, lora=False) == 0  # RAM already holds it
