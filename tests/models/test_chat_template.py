"""The tool-aware ChatML template renders exactly what clawsdk's own rendering gives.

`toolcalls.render_messages` + plain ChatML is how the local backends prompt; a tokenizer carrying
`chatml_tools_template` (the embedded checkpoint's) must give the same text from OpenAI-shaped
messages and tools, so what TRL trains on is what rollouts prompt with.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from clawsdk.models import toolcalls
from clawsdk.models.chat_template import chatml_tools_template

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
# SmolLM2's own template: ChatML, with a default system turn
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
          "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

TOOLS = [
    {"type": "function", "function": {"name": "read", "description": "Read a file.\n\n  Returns its text.",
                                      "parameters": {"type": "object", "title": "readArguments",
                                                     "properties": {"path": {"type": "string", "title": "Path"}},
                                                     "required": ["path"]}}},
    {"type": "function", "function": {"name": "ls", "description": "List a folder <dir> ü",
                                      "parameters": {"type": "object", "properties": {
                                          "title": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                                                    "title": "Title"},
                                          "depth": {"type": "integer", "enum": [1, 2], "default": 1}}}}},
    {"type": "function", "function": {"name": "finish", "description": None}},
]

CONVERSATION = [
    {"role": "system", "content": "Work in the workspace.  \n"},
    {"role": "user", "content": "Summarise <notes.md> ü"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": "nötes.md"},
                                                                                             ensure_ascii=False)}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "read", "content": "line 1\nline 2"},
    {"role": "assistant", "content": "Two calls.", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": '{"depth": 2}'}},
        {"id": "c3", "type": "function", "function": {"name": "read", "arguments": {"path": "a"}}}]},
    {"role": "tool", "tool_call_id": "c2", "name": "ls", "content": "a"},
    {"role": "tool", "tool_call_id": "c3", "name": "read", "content": [{"type": "text", "text": "A"}]},
    {"role": "assistant", "content": "Done."},
]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                   unk_token="<unk>")


@pytest.mark.parametrize("messages", [CONVERSATION, CONVERSATION[1:], CONVERSATION[:4], CONVERSATION[1:2]],
                         ids=["system", "no-system", "mid-tool", "prompt-only"])
@pytest.mark.parametrize("tools", [TOOLS, None], ids=["tools", "no-tools"])
@pytest.mark.parametrize("generation_prompt", [False, True])
def test_the_template_renders_as_clawsdk_prompts(tokenizer, messages, tools, generation_prompt):
    want = tokenizer.apply_chat_template(toolcalls.render_messages(messages, tools), chat_template=CHATML,
                                         tokenize=False, add_generation_prompt=generation_prompt)
    got = tokenizer.apply_chat_template(messages, tools=tools, chat_template=chatml_tools_template(SYSTEM),
                                        tokenize=False, add_generation_prompt=generation_prompt)
    assert got == want


def test_the_assistant_turns_are_marked_for_trl(tokenizer):
    has_generation_markers = pytest.importorskip("trl.chat_template_utils").has_generation_markers

    template = chatml_tools_template(SYSTEM)
    assert has_generation_markers(template)
    # what clawsdk's own loss mask needs to find the template's tool support
    from clawsdk.data.tokenize import uses_template_tools

    tokenizer.chat_template = template
    assert uses_template_tools(tokenizer)
