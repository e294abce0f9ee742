"""Reading an OpenAI-shaped chat completion that may be anything: each field checked before it is used.

A server (or a proxy in front of one) can answer any JSON at all. What the backend and the recording
proxy read from an answer goes through `read_completion`, which returns the parts with their types
checked or raises `MalformedAnswer` naming the field (`choices[0].message.tool_calls[1].function`),
so a wrong shape is the backend's failure (`model_error`), never an AttributeError blamed on the agent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: how much of a malformed answer is kept in the error event
RAW_CAP = 2048


class MalformedAnswer(ValueError):
    """An answer that is not a chat completion; the message names the field."""


@dataclass
class Completion:
    data: dict[str, Any]
    choice: dict[str, Any]
    message: dict[str, Any]  # content: str | None, tool_calls: list of {id, type, function: {name, arguments}}
    finish_reason: str | None
    usage: dict[str, int]
    logprobs: list[float] | None
    prompt_token_ids: list[int] | None
    completion_token_ids: list[int] | None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


def _expect(value: Any, types: type | tuple[type, ...], where: str, what: str) -> Any:
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
        raise MalformedAnswer(f"{where}: expected {what}, got {_kind(value)}")
    return value


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _ints(value: Any, where: str) -> list[int] | None:
    if value is None:
        return None
    _expect(value, list, where, "a list of token ids")
    for i, v in enumerate(value):
        _expect(v, int, f"{where}[{i}]", "a token id (integer)")
    return value


def content_text(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts, as some servers answer
        texts = []
        for i, part in enumerate(value):
            _expect(part, dict, f"{where}[{i}]", "a content part object")
            texts.append(_expect(part.get("text", ""), str, f"{where}[{i}].text", "a string"))
        return "".join(texts)
    raise MalformedAnswer(f"{where}: expected a string or null, got {_kind(value)}")


def _tool_call(call: Any, where: str) -> dict[str, Any]:
    _expect(call, dict, where, "a tool call object")
    fn = _expect(call.get("function"), dict, f"{where}.function", "an object with name and arguments")
    name = _expect(fn.get("name"), str, f"{where}.function.name", "a string")
    args = fn.get("arguments")
    if args is None:
        args = "{}"
    elif isinstance(args, dict):
        args = json.dumps(args, ensure_ascii=False)
    else:
        _expect(args, str, f"{where}.function.arguments", "a JSON string or an object")
    call_id = call.get("id")
    if call_id is not None:
        _expect(call_id, str, f"{where}.id", "a string")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def read_message(message: Any, where: str = "choices[0].message") -> dict[str, Any]:
    """An assistant message with checked types (tool_calls normalized; `id` may be None)."""
    _expect(message, dict, where, "an object")
    content = content_text(message.get("content"), f"{where}.content")
    out: dict[str, Any] = {"role": "assistant", "content": content}
    calls = message.get("tool_calls")
    if calls is not None:
        _expect(calls, list, f"{where}.tool_calls", "a list")
        if calls:
            out["tool_calls"] = [_tool_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)]
    for extra in ("reasoning_content", "reasoning"):
        if message.get(extra) is not None:
            out[extra] = _expect(message[extra], str, f"{where}.{extra}", "a string")
    return out


def read_completion(data: Any) -> Completion:
    """The parts of a (non-streamed) chat completion the callers use, or MalformedAnswer."""
    _expect(data, dict, "the answer", "a JSON object")
    choices = _expect(data.get("choices"), list, "choices", "a list")
    if not choices:
        raise MalformedAnswer("choices: the list is empty")
    choice = _expect(choices[0], dict, "choices[0]", "an object")
    if "message" not in choice:
        raise MalformedAnswer("choices[0].message: missing")
    message = read_message(choice["message"])
    finish = choice.get("finish_reason")
    if finish is not None:
        _expect(finish, str, "choices[0].finish_reason", "a string")
    raw_usage = data.get("usage")
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    if raw_usage is not None:
        _expect(raw_usage, dict, "usage", "an object")
        for key in usage:
            value = raw_usage.get(key)
            if value is not None:
                usage[key] = _expect(value, int, f"usage.{key}", "an integer")
    logprobs: list | None = None
    lp = choice.get("logprobs")
    if lp is not None:
        _expect(lp, dict, "choices[0].logprobs", "an object")
        items = lp.get("content")
        if items is not None:
            _expect(items, list, "choices[0].logprobs.content", "a list")
            logprobs = []
            for i, t in enumerate(items):
                _expect(t, dict, f"choices[0].logprobs.content[{i}]", "an object")
                logprobs.append(_expect(t.get("logprob"), (int, float), f"choices[0].logprobs.content[{i}].logprob",
                                        "a number"))
            logprobs = logprobs or None
    prompt_ids = _ints(data.get("prompt_token_ids"), "prompt_token_ids")
    if prompt_ids is None:
        prompt_ids = _ints(choice.get("prompt_token_ids"), "choices[0].prompt_token_ids")
    return Completion(data=data, choice=choice, message=message, finish_reason=finish, usage=usage,
                      logprobs=logprobs, prompt_token_ids=prompt_ids,
                      completion_token_ids=_ints(choice.get("token_ids"), "choices[0].token_ids"))


def capped(raw: bytes | str, limit: int = RAW_CAP) -> str:
    """The first `limit` bytes of an answer as text, for an error event."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "replace")
    text = data[:limit].decode("utf-8", "replace")
    return text + (f"… ({len(data)} bytes in all)" if len(data) > limit else "")
