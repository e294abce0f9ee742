"""What `clawsdk train` says it did is what it did: the examples and tokens an SFT run trained on (not only
the dataset's size), and a GRPO run whose groups all scored equal (no gradient: the policy did not move) is
not reported as trained."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.data.export import export_rl
from clawsdk.store.store import Store
from tests.train.test_train_sft_grpo import hello_task, sft_export


def _text(res) -> str:
    return " ".join(res.output.split())


@pytest.mark.timeout(300)
def test_train_sft_says_how_much_it_trained_on_next_to_the_dataset_size(tiny_model, tmp_path):
    db, _ = sft_export(tmp_path, n=3)
    argv = ["train", "sft", "--db", str(db), "--dataset", "hello", "--model", f"transformers:{tiny_model}",
            "--batch-size", "1", "--opt", "threads=2"]
    res = CliRunner().invoke(cli_main, [*argv, "--out", str(tmp_path / "one"), "--max-steps", "1"])
    assert res.exit_code == 0, res.output
    text = _text(res)
    assert "trained on: 1 step, 1 example" in text and "the dataset: 3 examples" in text, text
    assert "2 of its examples were not trained on" in text, text
    assert "examples 3" not in text, text  # the dataset's count is not printed as if it were the training's

    res = CliRunner().invoke(cli_main, [*argv, "--out", str(tmp_path / "two"), "--epochs", "2"])
    assert res.exit_code == 0, res.output
    text = _text(res)
    assert "trained on: 6 steps, 6 examples" in text and "the dataset: 3 examples" in text, text
    assert "not trained on" not in text


def _grpo(tmp_path: Path, model: Path, out: str):
    db = tmp_path / "store.db"
    if not db.exists():
        with Store(db) as store:
            export_rl(store, [hello_task()], tmp_path / "data", name="prompts", formats=["jsonl"])
    return CliRunner().invoke(cli_main, [
        "train", "grpo", "--db", str(db), "-p", "prompts", "--model", f"transformers:{model}",
        "--out", str(tmp_path / out), "-G", "2", "--max-steps", "1", "--max-turns", "1", "--max-tokens", "8",
        "--concurrency", "2", "--run-prefix", out, "--opt", "threads=2", "--opt", "turn_timeout_s=120",
    ])


@pytest.mark.timeout(300)
def test_grpo_whose_groups_all_scored_equal_says_it_did_not_learn_and_exits_non_zero(tiny_model, tmp_path):
    from clawsdk_plugins.trainers.common import weights_digest

    res = _grpo(tmp_path, tiny_model, "flat")  # a random 2-layer model never writes hello.txt: every reward 0
    text = _text(res)
    assert res.exit_code == 1, res.output
    assert "trained ckpt-" not in text, text
    assert "no group had a reward spread: in each of the 1 group (2 rollouts of one task)" in text, text
    assert "-G" in text and "temperature" in text and "harder or easier" in text, text  # what to do
    # the checkpoint is still written and recorded, and it is the starting model's weights
    assert weights_digest(tmp_path / "flat") == weights_digest(tiny_model)


@pytest.mark.timeout(300)
def test_grpo_with_a_reward_spread_trains_and_says_how_many_groups_had_one(tiny_model, tmp_path, monkeypatch):
    from clawsdk_plugins.trainers.grpo import TrlGrpoTrainer

    real = TrlGrpoTrainer.rollout_func

    def rigged(self, db, prefix):  # the verifier's scores, with one rollout of each group made to pass
        rollout = real(self, db, prefix)

        def scored(prompts, trainer):
            out = rollout(prompts, trainer)
            out["clawsdk_reward"] = [float(i % 2) for i in range(len(out["clawsdk_reward"]))]
            return out

        return scored

    monkeypatch.setattr(TrlGrpoTrainer, "rollout_func", rigged)
    res = _grpo(tmp_path, tiny_model, "spread")
    text = _text(res)
    assert res.exit_code == 0, res.output
    assert "trained ckpt-" in text and "reward spread in 1 of 1 groups" in text, text
    from clawsdk_plugins.trainers.common import weights_digest
    assert weights_digest(tmp_path / "spread") != weights_digest(tiny_model)
