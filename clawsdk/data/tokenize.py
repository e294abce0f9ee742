"""Conversations -> token ids with an assistant mask, rendered exactly as the local model backends prompt.

A template with its own tool section (Qwen2.5, Hermes) renders tools and calls itself; any other
template gets clawsdk's tool-call format (clawsdk.models.toolcalls.render_messages) first, which
is what `LocalChatModel.render` does in rollouts. Each assistant turn (its text, its calls and the
end-of-turn token) is in the loss; everything else (system, user, tool results) is not.

Multi-turn episodes for RL are assembled from the token ids the backend recorded on each
model_response (`assemble_episode`).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from clawsdk.models import toolcalls

__all__ = ["CONTROL_TOKENS", "Episode", "assemble_episode", "chat_segments", "control_tokens", "encode_chat",
           "find_control_token", "uses_template_tools"]

#: The turn markers of common chat templates: ChatML (Qwen, SmolLM, Hermes), Llama 3, Gemma, Phi-3 and Zephyr,
#: Mistral and Llama 2. Typed as text into a message, a tool call or a tool spec, a template renders them as real
#: markers (and a tokenizer reads them as its control tokens), so the text would train the model on turns nobody
#: took. Llama 2's `<s>` and `</s>` are left out: HTML's strikethrough tags, common in real files (a tokenizer that
#: has them as special tokens adds them, `control_tokens`).
CONTROL_TOKENS = (
    "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
    "<start_of_turn>", "<end_of_turn>",
    "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
    "[INST]", "[/INST]",
)
#: the row fields a control token is looked for in
_ROW_TEXT = ("messages", "prompt", "chosen", "rejected", "tools")


def control_tokens(tokenizer: Any = None) -> tuple[str, ...]:
    """CONTROL_TOKENS, and the special tokens of `tokenizer` (each of which it reads as one token in any text)."""
    tokens = set(CONTROL_TOKENS)
    if tokenizer is not None:
        tokens.update(getattr(tokenizer, "all_special_tokens", None) or [])
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
        tokens.update(str(getattr(t, "content", t)) for t in added.values() if getattr(t, "special", False))
    return tuple(sorted(t for t in tokens if isinstance(t, str) and t.strip()))


@functools.lru_cache(maxsize=8)
def _pattern(tokens: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)))


def find_control_token(row: dict[str, Any], tokens: tuple[str, ...] | list[str] = CONTROL_TOKENS
                       ) -> tuple[str, str] | None:
    """The first of `tokens` in a row's messages (their text, names, ids, and calls: names, and arguments as
    written and as parsed, where JSON escapes can hide one) or its tools, and where: ('<|im_end|>',
    'messages[3].content'). None when there is none."""
    pattern = _pattern(tuple(tokens))
    stack: list[tuple[str, Any]] = [(key, row.get(key)) for key in reversed(_ROW_TEXT)]
    while stack:  # not recursive: arguments may nest deeper than Python's stack
        path, value = stack.pop()
        if isinstance(value, str):
            found = pattern.search(value)
            if found:
                return found.group(0), path
            if path.endswith(".function.arguments"):
                parsed = toolcalls.arguments_of({"arguments": value})
                if parsed != value:  # JSON, a string too: "\\u003c|im_end|>" holds the marker once parsed
                    stack.append((path, parsed))
        elif isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                stack += [(f"{path}.{k}", v), (f"{path}.{k}", str(k))]
        elif isinstance(value, list):
            stack += [(f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value)))]
    return None


def uses_template_tools(tokenizer: Any, tool_format: str = "auto") -> bool:
    """The rule of LocalChatModel.uses_template_tools, for a tokenizer alone."""
    if tool_format != "auto":
        return tool_format == "template"
    template = getattr(tokenizer, "chat_template", None) or ""
    return isinstance(template, str) and "tools" in template and "tool_call" in template


def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        if m.get("tool_calls"):  # templates expect arguments as objects
            m["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": toolcalls.arguments_of(c)}}
                for c in m["tool_calls"]
            ]
        out.append(m)
    return out


def chat_segments(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | str | None = None,
    tool_format: str = "auto",
) -> list[tuple[str, bool]]:
    """The rendered conversation as (text, is_assistant) pieces, in order."""
    # rows come from files a user may have edited: say what is wrong, not an AttributeError deep inside
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ValueError(f"messages: a {type(messages).__name__}, not a list of chat messages (objects "
                         f"with a 'role'); check the row with clawsdk.data.rows.check_row")
    if isinstance(tools, str):
        try:
            tools = json.loads(tools) if tools else None
        except json.JSONDecodeError as e:
            raise ValueError(f"tools: not valid JSON ({e.msg}); a list of OpenAI function specs") from None
    messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
    if uses_template_tools(tokenizer, tool_format):
        msgs, kwargs = _template_messages(messages), {"tools": tools or None}
    else:
        msgs, kwargs = toolcalls.render_messages(messages, tools), {}

    def render(upto: int, gen: bool) -> str:
        return tokenizer.apply_chat_template(msgs[:upto], add_generation_prompt=gen, tokenize=False, **kwargs)

    full = render(len(msgs), False)
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        start = len(render(i, True))
        end_text = render(i + 1, False)
        if not full.startswith(end_text) or start > len(end_text):
            raise ValueError(
                "the chat template does not render this conversation incrementally (a later turn "
                "changes an earlier one); train with --style text or a template without that"
            )
        end = len(end_text.rstrip())  # the end-of-turn token, not the newline after it
        pieces.append((full[pos:start], False))
        pieces.append((full[start:end], True))
        pos = end
    pieces.append((full[pos:], False))
    return [(t, a) for t, a in pieces if t]


def encode_chat(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | str | None = None,
    tool_format: str = "auto",
) -> tuple[list[int], list[int]]:
    """(input_ids, assistant_masks): 1 on the tokens of assistant turns."""
    ids: list[int] = []
    mask: list[int] = []
    for text, is_assistant in chat_segments(tokenizer, messages, tools, tool_format):
        piece = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids += piece
        mask += [int(is_assistant)] * len(piece)
    return ids, mask


@dataclass
class Episode:
    """One multi-turn rollout as a single sequence for policy-gradient training."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    #: 1 on tokens the model generated, 0 on tool results and template tokens in between
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: int = 0
    #: turns left out because the next prompt did not extend the previous one (re-rendered text)
    cut_turns: int = 0


def assemble_episode(responses: list[dict[str, Any]], eos_id: int) -> Episode | None:
    """Model turns (model_response payloads with prompt_token_ids / completion_token_ids / logprobs) ->
    one sequence: the first prompt, then each completion (trained) and the tokens that the next prompt
    adds after it (not trained). If a later prompt is not an extension of the sequence so far, the
    episode ends there. None when no turn carries token ids."""
    turns = [r for r in responses if r.get("prompt_token_ids") is not None and r.get("completion_token_ids")]
    if not turns:
        return None
    ep = Episode(prompt_ids=list(turns[0]["prompt_token_ids"]))
    seq = list(ep.prompt_ids)
    for i, r in enumerate(turns):
        if i > 0:
            prompt = list(r["prompt_token_ids"])
            if prompt[: len(seq)] != seq:
                ep.cut_turns = len(turns) - i
                break
            gap = prompt[len(seq) :]
            ep.completion_ids += gap
            ep.env_mask += [0] * len(gap)
            ep.logprobs += [0.0] * len(gap)
            seq += gap
        comp = list(r["completion_token_ids"])
        lps = list(r.get("logprobs") or [])
        lps = (lps + [0.0] * len(comp))[: len(comp)]
        ep.completion_ids += comp
        ep.env_mask += [1] * len(comp)
        ep.logprobs += lps
        seq += comp
        ep.turns += 1
    return ep
