"""A hand-edited tool call that is malformed (no function name, arguments that are neither a JSON object nor
JSON text) is one error naming the file, the line and the field, before any model loads. A missing name used
to fail after the model loaded, as `error: 'name'` (a KeyError inside the rendering, naming no line), and
arguments that were a list or a number trained in silence.

The model named here does not exist: a check that came after loading it would fail on the model instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from tests.train.test_damaged_exports import GOOD, ROW, export, m

CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}}


def with_calls(calls) -> str:
    """A row whose assistant turn makes `calls`, answered by a tool message."""
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "read a.txt"},
                {"role": "assistant", "content": "", "tool_calls": calls},
                {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
                {"role": "assistant", "content": "it says hello"}]
    return json.dumps({**ROW, "messages": messages})


def fn(**change) -> dict:
    return {**CALL, "function": {k: v for k, v in {**CALL["function"], **change}.items() if v is not ...}}


def train(tmp_path: Path, command: str, folder: Path):
    """`clawsdk train sft|grpo` on `folder`, with a model that does not exist."""
    data = "-d" if command == "sft" else "-p"
    return CliRunner().invoke(cli_main, [
        "train", command, "--db", str(tmp_path / "store.db"), data, str(folder),
        "--model", f"transformers:{tmp_path / 'no-such-model'}", "--out", str(tmp_path / "out"),
    ])


AT = "data.jsonl:1: messages[2].tool_calls[0]"
CASES = {
    "no-name": ([with_calls([fn(name=...)])], f"{AT}.function.name: missing"),
    "name-number": ([GOOD, with_calls([CALL, fn(name=3)])],
                    "data.jsonl:2: messages[2].tool_calls[1].function.name: missing or not a tool name"),
    "arguments-list": ([with_calls([fn(arguments=["a.txt"])])],
                       f"{AT}.function.arguments: a list, not a JSON object"),
    "arguments-number": ([GOOD, "", with_calls([fn(arguments=3)])],  # a blank line still counts as a line
                         "data.jsonl:3: messages[2].tool_calls[0].function.arguments: a int, not a JSON"),
    "no-function": ([with_calls([{"id": "call_1", "type": "function"}])], f"{AT}.function: missing"),
    "call-text": ([with_calls(["read a.txt"])], f"{AT}: a str, not a tool call"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_train_sft_names_the_line_and_field_of_a_malformed_tool_call(case, tmp_path):
    rows, expected = CASES[case]
    folder = export(tmp_path / "hello-v1", m(n_rows=sum(1 for r in rows if r)), rows)
    res = train(tmp_path, "sft", folder)
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert str(folder) in text and expected in text, text
    assert "export the dataset again" in text and '"function": {"name"' in text, text  # what to do
    assert "bug" not in text and "no-such-model" not in text
    assert not (tmp_path / "out").exists()


def test_tool_calls_that_are_not_a_list_are_named_too(tmp_path):
    res = train(tmp_path, "sft", export(tmp_path / "hello-v1", m(), [with_calls(CALL)]))
    assert res.exit_code == 2, res.output
    assert "data.jsonl:1: messages[2].tool_calls: not a list" in " ".join(res.output.split())


def test_train_grpo_checks_the_tool_calls_of_its_prompts_too(tmp_path):
    prompt = json.loads(with_calls([fn(name=...)]))["messages"]
    row = json.dumps({"prompt": prompt, "tools": [], "task_id": "t", "task_hash": "0" * 64})
    folder = export(tmp_path / "prompts-v1", m(kind="rl"), [row])
    res = train(tmp_path, "grpo", folder)
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "data.jsonl:1: prompt[2].tool_calls[0].function.name: missing" in text, text
    assert not (tmp_path / "out").exists()


def test_the_shapes_an_export_writes_read_back_and_render(tiny_model, tmp_path):
    """Arguments as JSON text (what the export writes), as an object (OpenAI's templates take either), as
    text that is not JSON (a call cut short, exported as written) or absent; an empty list of calls."""
    from transformers import AutoTokenizer

    from clawsdk.data.export import load_rows
    from clawsdk.data.tokenize import encode_chat

    rows = [with_calls([CALL]), with_calls([fn(arguments={"path": "a.txt"})]),
            with_calls([fn(arguments='{"pa')]), with_calls([fn(arguments=...)]), with_calls([]), GOOD]
    folder = export(tmp_path / "ok-v1", m(n_rows=len(rows)), rows)
    got = load_rows(folder)
    assert got == [json.loads(r) for r in rows]
    tok = AutoTokenizer.from_pretrained(tiny_model)
    for row in got:
        _ids, mask = encode_chat(tok, row["messages"], row["tools"])
        assert any(mask)


def test_a_row_of_an_hf_export_is_named_by_its_index(tmp_path):
    import datasets

    from clawsdk.data.export import load_rows

    folder = Path(tmp_path / "hf-v1")
    bad = json.loads(with_calls([fn(name="")]))
    datasets.Dataset.from_list([json.loads(with_calls([CALL])), bad]).save_to_disk(str(folder / "hf"))
    (folder / "dataset.json").write_text(m(n_rows=2, content_hash=...))
    with pytest.raises(ValueError, match=r"hf-v1: row 1: messages\[2\]\.tool_calls\[0\]\.function\.name: "):
        load_rows(folder)
