"""A damaged dataset export is one line naming the file, the line and the field, before any model loads.

The model named here does not exist: a check that came after loading it would fail on the model instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.data.export import load_rows, read_manifest
from clawsdk.data.tokenize import chat_segments

MANIFEST = {"format_version": 1, "id": "hello@v1", "name": "hello", "version": 1, "kind": "sft", "n_rows": 1,
            "files": ["data.jsonl"], "content_hash": "x", "selection": None}
ROW = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"}], "tools": [], "rollout_id": "r1"}


def export(folder: Path, manifest: str, rows: list[str]) -> Path:
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(manifest)
    (folder / "data.jsonl").write_text("".join(r + "\n" for r in rows))
    return folder


def m(**change) -> str:
    return json.dumps({k: v for k, v in {**MANIFEST, **change}.items() if v is not ...})


GOOD = json.dumps(ROW)
CASES = {
    "no-id": (m(id=...), [GOOD], "dataset.json: id: missing or not a string"),
    "a-list": ("[1, 2]", [GOOD], "dataset.json: a dataset manifest is a JSON object, not a list"),
    "bad-json": ('{"format_version": 1, id: 2}', [GOOD], "dataset.json: not valid JSON (line 1, column 23"),
    "version-text": (m(format_version="1"), [GOOD],
                     "dataset.json: format_version '1' is not a version number"),
    "messages-text": (m(), [GOOD, json.dumps({**ROW, "messages": "hi there"})],
                      "data.jsonl:2: messages: a str, not a list of chat messages"),
    "row-json": (m(), [GOOD, GOOD[:-1]], "data.jsonl:2: not valid JSON"),
    "row-list": (m(), [GOOD, "[]"], "data.jsonl:2: a row is a JSON object, not a list"),
    "no-role": (m(), [json.dumps({**ROW, "messages": [{"content": "x"}]})],
                "data.jsonl:1: messages[0]: not a message"),
    "content-number": (m(), [json.dumps({**ROW, "messages": [{"role": "user", "content": 3}]})],
                       "data.jsonl:1: messages[0].content: not text"),
    "tools-text": (m(), [json.dumps({**ROW, "tools": "read"})], "data.jsonl:1: tools: a str, not a list"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_train_sft_on_a_damaged_export_names_the_file_and_the_field(case, tmp_path):
    manifest, rows, expected = CASES[case]
    folder = export(tmp_path / "hello-v1", manifest, rows)
    res = CliRunner().invoke(cli_main, ["train", "sft", "--db", str(tmp_path / "store.db"), "-d", str(folder),
                                        "--model", f"transformers:{tmp_path / 'no-such-model'}",
                                        "--out", str(tmp_path / "out")])
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert str(folder) in text and expected in text, text
    assert "bug" not in text and "no-such-model" not in text
    assert not (tmp_path / "out").exists()


def test_a_good_export_reads_back_and_a_newer_one_is_refused(tmp_path):
    folder = export(tmp_path / "ok", m(), [GOOD, ""])
    assert read_manifest(folder)["id"] == "hello@v1" and load_rows(folder) == [ROW]
    (folder / "dataset.json").write_text(m(format_version=2))
    with pytest.raises(ValueError, match="format_version 2 is newer than this clawsdk reads"):
        read_manifest(folder)


def test_the_tokenizer_says_what_is_wrong_with_a_row_it_is_given():
    with pytest.raises(ValueError, match="messages: a str, not a list of chat messages"):
        chat_segments(object(), "hi there")
    with pytest.raises(ValueError, match="tools: not valid JSON"):
        chat_segments(object(), ROW["messages"], "[{")
