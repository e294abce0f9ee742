"""`data export --tokenizer NAME` looks in the local folder and Hugging Face cache only: a name found in
neither asked the hub, which retried for ~50 s on a machine without internet."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli

pytest.importorskip("transformers")


@pytest.fixture
def lookups(monkeypatch):
    """The host names anything tried to resolve (each refused at once, as without internet)."""
    tried: list[str] = []

    def refuse(host, *args, **kwargs):
        tried.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no network in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # huggingface_hub (2.4) fetches a list of AI agents for its User-Agent header once per process (3 s at
    # most, no retries), local_files_only or not: not a look-up of the model, so left out of the count
    from huggingface_hub.utils import _detect_agent

    monkeypatch.setattr(_detect_agent, "_registry", {"standardEnvVars": [], "harnesses": {}}, raising=False)
    return tried


def _export(tmp_path, tokenizer: str):
    args = ["data", "export", "--kind", "sft", "--tokenizer", tokenizer, "--name", "x", "--out",
            str(tmp_path / "out"), "--db", str(tmp_path / "r.db")]
    return CliRunner().invoke(cli, args)


def test_a_name_neither_here_nor_cached_fails_at_once_saying_what_to_pass(tmp_path, lookups):
    r = _export(tmp_path, "nosuch")
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "--tokenizer nosuch: 'nosuch' is neither a folder nor a model in the local Hugging Face cache" \
        in said
    assert "pass a checkpoint folder" in said
    assert lookups == []  # the hub was never asked


def test_a_model_in_the_local_cache_loads_without_the_network(tmp_path, lookups, monkeypatch):
    from huggingface_hub import constants
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from clawsdk.cli.data_cmd import _load_tokenizer

    # the layout `hf download local/tiny` leaves
    repo = tmp_path / "hub" / "models--local--tiny"
    snapshot = repo / "snapshots" / "0123abc"
    PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                            unk_token="<unk>").save_pretrained(snapshot)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert _load_tokenizer("local/tiny").unk_token == "<unk>"
    assert _load_tokenizer(str(snapshot)).unk_token == "<unk>"  # and a folder, as before
    assert lookups == []
