"""Training inputs equal what the agent prompts with; real SFT steps and a GRPO step on the CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import anyio
import pytest

from clawsdk.data import lineage
from clawsdk.data.export import export_rl, export_sft, load_rows
from clawsdk.data.select import Selection, select
from clawsdk.data.tokenize import assemble_episode, encode_chat
from clawsdk.models import toolcalls
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from clawsdk.tasks.model import Limits, Task, ToolPolicy, VerifierSpec
from tests.sandbox.sandbox_backends import why_unavailable


def hello_task(task_id: str = "hello", text: str = "hello world") -> Task:
    return Task(
        id=task_id,
        instruction=f"Write '{text}' into hello.txt.",
        category="content & domain",
        tools=["core"],
        tool_policy=ToolPolicy(allow=["read", "write"]),
        verifier=VerifierSpec(checks=[{"type": "text_equals", "path": "hello.txt", "text": text}]),
        solution=[
            {"tool": "read", "args": {"path": "hello.txt"}},
            {"tool": "write", "args": {"path": "hello.txt", "content": text}},
        ],
        limits=Limits(timeout_s=120, tool_timeout_s=10, verifier_timeout_s=20),
    )


def sft_export(tmp_path: Path, n: int = 2) -> tuple[Path, str]:
    db = tmp_path / "store.db"
    tasks = [hello_task(f"hello-{i}", f"hello {i}") for i in range(n)]
    run_sync(tasks, agent="oracle", run_id="oracle", db=db)
    with Store(db) as store:
        exp = export_sft(
            store, select(store, Selection()), tmp_path / "data", name="hello", formats=["jsonl", "hf"]
        )
    return db, exp.dataset_id


def test_training_tokens_are_what_the_agent_prompts_with(tiny_model, tmp_path):
    """Each assistant turn in the loss is the model's own output for the prompt the agent would send."""
    from clawsdk_plugins.models.transformers import TransformersModel
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    prompter = TransformersModel(str(tiny_model))
    prompter.tokenizer = tok  # the rollout-side rendering, without loading weights
    db, dataset_id = sft_export(tmp_path, n=1)
    with Store(db) as store:
        (row,) = load_rows(lineage.dataset(store, dataset_id)["path"])
        calls = [
            (e["payload"]["tool"], e["payload"]["args"])
            for e in store.events(row["rollout_id"])
            if e["kind"] == "tool_call"
        ]
    ids, mask = encode_chat(tok, row["messages"], row["tools"])
    assert len(ids) == len(mask)
    turns = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
    assert len(turns) == 3  # read, write, finish
    pos = 0
    for i in turns:
        prompt = prompter.render(row["messages"][:i], row["tools"])
        assert ids[: len(prompt)] == prompt  # the prefix is exactly the rollout's prompt
        assert not any(mask[pos : len(prompt)])  # and none of it is trained
        end = len(prompt)
        while end < len(mask) and mask[end]:
            end += 1
        want = toolcalls.assistant_text(row["messages"][i]) + "<|im_end|>"
        assert tok.decode(ids[len(prompt) : end]) == want
        pos = end
    trained = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    for name, args in calls:  # the store's calls, in clawsdk's tool-call format
        assert toolcalls.format_tool_call(name, args) in trained
    assert '"name": "finish"' in trained


def test_episode_assembly_masks_what_the_model_did_not_write():
    turns = [
        {"prompt_token_ids": [1, 2, 3], "completion_token_ids": [10, 11], "logprobs": [-0.1, -0.2]},
        {"prompt_token_ids": [1, 2, 3, 10, 11, 20, 21], "completion_token_ids": [12], "logprobs": [-0.3]},
        {"prompt_token_ids": [1, 2, 99], "completion_token_ids": [13], "logprobs": [-0.4]},  # re-rendered
    ]
    ep = assemble_episode(turns, eos_id=0)
    assert ep.prompt_ids == [1, 2, 3]
    assert ep.completion_ids == [10, 11, 20, 21, 12]
    assert ep.env_mask == [1, 1, 0, 0, 1]
    assert ep.logprobs == [-0.1, -0.2, 0.0, 0.0, -0.3]
    assert (ep.turns, ep.cut_turns) == (2, 1)
    assert assemble_episode([{"message": {}}], eos_id=0) is None


def _chat_once(path: str) -> str:

    from clawsdk_plugins.models.transformers import TransformersModel
    model = TransformersModel(path, device="cpu")

    async def go():
        with anyio.fail_after(120):
            r = await model.chat([{"role": "user", "content": "hi"}], None, max_tokens=4, timeout_s=60)
            return r.finish_reason

    return anyio.run(go)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sft_steps_write_a_loadable_checkpoint_with_its_lineage(base_model, tmp_path):
    from clawsdk_plugins.trainers.trl import TrlSftTrainer

    db, dataset_id = sft_export(tmp_path, n=2)
    result = TrlSftTrainer(base_model, max_steps=2, batch_size=1, lr=1e-4, threads=2).train(
        dataset_id, tmp_path / "ckpt", db=db
    )
    m = result.metrics
    assert m["steps"] == 2 and m["examples"] == 2 and math.isfinite(m["last_loss"])
    assert 0 < m["assistant_tokens"] < m["tokens"]
    assert (tmp_path / "ckpt" / "config.json").exists()
    assert _chat_once(str(tmp_path / "ckpt")) in ("stop", "length", "tool_calls")
    with Store(db) as store:
        row = lineage.checkpoint(store, result.checkpoint_id)
        assert row["dataset_id"] == dataset_id and row["trainer"] == "trl-sft"
        assert row["base_model"] == base_model and row["metrics"]["steps"] == 2
        kept = [r["id"] for r in store.query("SELECT id FROM rollouts ORDER BY task_id")]
        assert sorted(lineage.rollouts_behind(store, result.checkpoint_id)) == sorted(kept)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_train_sft_cli_with_lora_merges_into_a_plain_checkpoint(tiny_model, tmp_path):
    from click.testing import CliRunner

    from clawsdk.cli import cli as cli_main

    db, dataset_id = sft_export(tmp_path, n=2)
    runner = CliRunner()
    res = runner.invoke(
        cli_main,
        [
            "train",
            "sft",
            "--db",
            str(db),
            "--dataset",
            "hello",
            "--model",
            f"transformers:{tiny_model}",
            "--out",
            str(tmp_path / "lora"),
            "--max-steps",
            "1",
            "--batch-size",
            "2",
            "--lora",
            "--lora-r",
            "4",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "trained ckpt-" in res.output and "transformers:" in res.output
    assert not (tmp_path / "lora" / "adapter_config.json").exists()  # merged: transformers loads it as is
    assert _chat_once(str(tmp_path / "lora")) in ("stop", "length", "tool_calls")
    res = runner.invoke(cli_main, ["train", "list", "--db", str(db)])
    assert res.exit_code == 0 and "trl-sft" in res.output and dataset_id in res.output
    res = runner.invoke(
        cli_main, ["train", "sft", "--db", str(db), "--dataset", "nope", "--out", str(tmp_path / "x")]
    )
    assert res.exit_code == 2 and "no dataset 'nope'" in res.output


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_one_grpo_step_runs_its_group_as_sandbox_rollouts(base_model, tmp_path):
    from clawsdk_plugins.trainers.trl import TrlGrpoTrainer

    db = tmp_path / "store.db"
    with Store(db) as store:
        prompts = export_rl(store, [hello_task()], tmp_path / "data", name="prompts", formats=["jsonl"])
    trainer = TrlGrpoTrainer(
        base_model,
        num_generations=2,
        max_steps=1,
        max_turns=2,
        max_tokens=12,
        concurrency=2,
        threads=2,
        turn_timeout_s=120,
    )
    result = trainer.train(prompts.dataset_id, tmp_path / "grpo", db=db, run_prefix="grpo-test")
    assert result.metrics["steps"] == 1 and result.runs == ["grpo-test-g00000"]
    assert (tmp_path / "grpo" / "config.json").exists()
    with Store(db) as store:
        rollouts = store.rollouts("grpo-test-g00000")
        assert len(rollouts) == 2 and all(r["status"] == "finished" for r in rollouts)
        assert {r["sample"] for r in rollouts} == {0, 1}  # one group of G=2 for the one task
        # the policy's commands ran in the isolating sandbox, where it works, without asking for it
        assert store.run("grpo-test-g00000")["sandbox"] == ("bwrap" if why_unavailable("bwrap") is None else "local")
        for r in rollouts:
            kinds = [e["kind"] for e in store.events(r["id"])]
            assert "model_response" in kinds and "verifier" in kinds
        row = lineage.checkpoint(store, result.checkpoint_id)
        assert row["runs"] == ["grpo-test-g00000"] and row["dataset_id"] == prompts.dataset_id
    # the reward each completion got is the verifier's score of its rollout
    rewards = {e["rollout_id"]: e["reward"] for e in trainer.episodes}
    with Store(db) as store:
        assert rewards == {r["id"]: r["reward"] for r in store.rollouts("grpo-test-g00000")}
    assert json.loads((tmp_path / "grpo" / "clawsdk-checkpoint.json").read_text())["runs"] == result.runs
