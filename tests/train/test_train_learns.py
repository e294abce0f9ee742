"""Training changes the model in the direction it should: SFT lowers the loss and raises the likelihood of the
reference tool calls; a GRPO step on a group whose rewards differ raises the rewarded completion's
log-probability. On the tiny random model, so each test is quick on a CPU; lr=0 turns each red."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from test_train_sft_grpo import hello_task, sft_export

from clawsdk.data import lineage
from clawsdk.data.export import export_rl, load_rows
from clawsdk.data.tokenize import encode_chat
from clawsdk.models import toolcalls
from clawsdk.store.store import Store


def _load(path: str | Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(str(path)), AutoTokenizer.from_pretrained(str(path))


def _logprob(model, ids: list[int], mask: list[int]) -> tuple[float, int]:
    """Sum of log p(token | prefix) over the tokens where mask is 1, and how many there are."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    target = torch.tensor(ids[1:])
    picked = logp[torch.arange(len(target)), target]
    m = torch.tensor(mask[1:], dtype=torch.bool)
    return float(picked[m].sum()), int(m.sum())


def _reference_likelihood(model_path, rows) -> float:
    """Mean log-likelihood per token of the assistant turns (the reference tool calls) of the rows."""
    model, tok = _load(model_path)
    total, n = 0.0, 0
    for row in rows:
        ids, mask = encode_chat(tok, row["messages"], row["tools"])
        s, k = _logprob(model, ids, mask)
        total, n = total + s, n + k
    return total / n


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("lr", [1e-2])
def test_sft_lowers_the_loss_and_raises_the_likelihood_of_the_reference_calls(tiny_model, tmp_path, lr):
    from clawsdk_plugins.trainers.trl import TrlSftTrainer

    db, dataset_id = sft_export(tmp_path, n=2)
    with Store(db) as store:
        rows = load_rows(lineage.dataset(store, dataset_id)["path"])
    assert any('"name": "write"' in toolcalls.assistant_text(m) for m in rows[0]["messages"] if m["role"] == "assistant")
    before = _reference_likelihood(tiny_model, rows)
    result = TrlSftTrainer(str(tiny_model), max_steps=12, batch_size=2, lr=lr, threads=2).train(
        dataset_id, tmp_path / "ckpt", db=db)
    after = _reference_likelihood(tmp_path / "ckpt", rows)
    m = result.metrics
    assert math.isfinite(m["first_loss"]) and m["last_loss"] < 0.8 * m["first_loss"]
    # the same examples, scored outside the trainer: the reference calls became much more likely
    assert after > before + 0.5, (before, after)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_same_data_and_settings_train_the_same_weights_and_the_card_names_them(tiny_model, tmp_path):
    """What lets a later session tell its retrained checkpoint from the one a table was measured with."""

    db, dataset_id = sft_export(tmp_path, n=2)

    def train(folder: str, lr: float) -> str:
        from clawsdk_plugins.trainers.trl import TrlSftTrainer
        result = TrlSftTrainer(str(tiny_model), max_steps=3, batch_size=2, lr=lr, threads=2).train(
            dataset_id, tmp_path / folder, db=db)
        card = json.loads((tmp_path / folder / "clawsdk-checkpoint.json").read_text())
        assert card["metrics"]["weights_sha256"] == result.metrics["weights_sha256"] == hashlib.sha256(
            (tmp_path / folder / "model.safetensors").read_bytes()).hexdigest()  # what sha256sum prints
        with Store(db) as store:
            assert lineage.checkpoint(store, result.checkpoint_id)["metrics"]["weights_sha256"] == card["metrics"][
                "weights_sha256"]
        return card["metrics"]["weights_sha256"]

    first = train("a", 1e-3)
    assert len(first) == 64 and first == train("b", 1e-3)
    assert train("c", 2e-3) != first  # the digest is of the weights, not of the settings


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("lr", [1e-2])
def test_a_grpo_step_on_a_group_with_different_rewards_raises_the_rewarded_completion(tiny_model, tmp_path, lr):
    from clawsdk_plugins.trainers.trl import TrlGrpoTrainer

    task = hello_task()
    db = tmp_path / "store.db"
    with Store(db) as store:
        store.upsert_task(task, source="test")
        prompts = export_rl(store, [task], tmp_path / "data", name="prompts", formats=["jsonl"])
    _, tok = _load(tiny_model)
    prompt = list(tok(task.instruction, add_special_tokens=False)["input_ids"])
    good = list(tok(toolcalls.format_tool_call("write", {"path": "hello.txt", "content": "hello world"})
                    + "<|im_end|>", add_special_tokens=False)["input_ids"])
    bad = list(tok("finish summary done read the budget sheet<|im_end|>", add_special_tokens=False)["input_ids"])

    class ScriptedGroup(TrlGrpoTrainer):
        """The group's two rollouts are fixed: the right call (reward 1) and a wrong answer (reward 0),
        so the step's advantages are known; everything after the rollouts is the trainer's own."""

        def rollout_func(self, db, run_prefix):
            def rollout(batch, trainer):
                completions = [(good, 1.0), (bad, 0.0)] * (len(batch) // 2)
                return {"prompt_ids": [prompt] * len(batch), "completion_ids": [c for c, _ in completions],
                        "logprobs": [[0.0] * len(c) for c, _ in completions],
                        "env_mask": [[1] * len(c) for c, _ in completions],
                        "clawsdk_reward": [r for _, r in completions],
                        "clawsdk_rollout": [f"scripted-{i}" for i in range(len(batch))]}

            return rollout

    def logp(path, completion):
        model, _ = _load(path)
        return _logprob(model, prompt + completion, [0] * len(prompt) + [1] * len(completion))[0]

    before_good, before_bad = logp(tiny_model, good), logp(tiny_model, bad)
    trainer = ScriptedGroup(str(tiny_model), num_generations=2, max_steps=1, lr=lr, threads=2, max_tokens=64,
                            max_turns=1, use_vllm=False)
    result = trainer.train(prompts.dataset_id, tmp_path / "grpo", db=db, run_prefix="scripted")
    assert result.metrics["steps"] == 1
    after_good, after_bad = logp(tmp_path / "grpo", good), logp(tmp_path / "grpo", bad)
    assert after_good > before_good + 1.0, (before_good, after_good)
    assert after_bad < before_bad, (before_bad, after_bad)
