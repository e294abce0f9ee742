"""Anthropic Messages (`POST /v1/messages`, what Claude Code speaks) in front of the chat-completions core.

A request becomes a chat request: `system` (a string or text blocks) the system message; `tool_use` blocks an
assistant turn's tool_calls; `tool_result` blocks `tool` messages (in order, before the rest of their user
turn); `thinking` blocks the turn's `reasoning_content`; `tools` function tools (server tools such as web
search have no chat form: they are dropped, and the recorded params say which). The chat answer is said back
as a Messages answer, or streamed as Messages events (message_start, content blocks, message_delta,
message_stop) as the chat chunks come.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from clawsdk.proxy.wire import Protocol, Stream, kind_of, parse_arguments, sse, text_of

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                "content_filter": "refusal"}
#: Messages fields with a chat counterpart, and its name
SAME_PARAMS = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
               "stop_sequences": "stop", "stream": "stream"}
#: `system` turns are what newer clients (Claude Code 2.1) send mid-conversation
ROLES = ("user", "assistant", "system")
#: a system text block Claude Code sends as a transport header (its version and a per-run hash): Anthropic's API
#: removes it before the model sees the prompt, so the proxy does (else every rollout's prompt differs in it)
BILLING_HEADER = "x-anthropic-billing-header:"


def _image(block: dict[str, Any]) -> dict[str, Any] | None:
    src = got if isinstance(got := block.get("source"), dict) else {}
    if src.get("type") == "base64":
        return {"type": "image_url", "image_url": {"url": f"data:{src.get('media_type')};base64,{src.get('data')}"}}
    if src.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": src.get("url")}}
    return None


def _user_turn(blocks: list[Any]) -> list[dict[str, Any]]:
    """A user turn's blocks as chat messages: its tool results first, as `tool` messages, then what else it says."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "tool_result":
            content = b.get("content")
            text = content if isinstance(content, str) else text_of(content)
            msg = {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": text}
            if b.get("is_error"):
                msg["is_error"] = True  # kept in the record; never sent upstream (core.upstream_body)
            out.append(msg)
        elif kind == "text":
            parts.append({"type": "text", "text": b.get("text", "")})
        elif kind == "image" and (image := _image(b)):
            parts.append(image)
        elif kind == "document":
            parts.append({"type": "text", "text": text_of((b.get("source") or {}).get("content")) or
                          str((b.get("source") or {}).get("data") or "")})
    if parts:
        only_text = all(p["type"] == "text" for p in parts)
        out.append({"role": "user", "content": "".join(p["text"] for p in parts) if only_text and len(parts) == 1
                    else parts})
    return out


def _assistant_turn(blocks: list[Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": None}
    texts, thinking, calls = [], [], []
    for b in blocks:
        kind = b.get("type")
        if kind == "text":
            texts.append(b.get("text", ""))
        elif kind == "thinking":
            thinking.append(b.get("thinking", ""))
        elif kind == "tool_use":
            calls.append({"id": b.get("id"), "type": "function",
                          "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {},
                                                                                      ensure_ascii=False)}})
    if texts:
        msg["content"] = "".join(texts)
    if thinking:
        msg["reasoning_content"] = "".join(thinking)
    if calls:
        msg["tool_calls"] = calls
    return msg


def _check_blocks(content: Any, where: str) -> str | None:
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{where}.content must be a string or a list of content blocks, got {kind_of(content)}"
    for j, b in enumerate(content):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            return f"{where}.content[{j}] must be a content block with a string `type`"
    return None


class AnthropicMessages(Protocol):
    name = "anthropic"
    path = "/messages"

    def problem(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return f"the request body must be a JSON object with `messages`, not {kind_of(body)}"
        if not isinstance(body.get("model"), str):
            return f"`model` must be a string, got {kind_of(body.get('model'))}"
        if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool):
            return f"`max_tokens` must be an integer, got {kind_of(body.get('max_tokens'))}"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "`messages` must be a non-empty list of {role, content} objects"
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                return f"messages[{i}].role must be one of {', '.join(ROLES)}"
            if problem := _check_blocks(m.get("content"), f"messages[{i}]"):
                return problem
        system = body.get("system")
        if system is not None and (problem := _check_blocks(system, "system")):
            return problem.replace("system.content", "system")
        tools = body.get("tools")
        if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) and
                                                                        isinstance(t.get("name"), str) for t in tools)):
            return "`tools` must be a list of tool objects, each with a string `name`"
        if body.get("stream") is not None and not isinstance(body["stream"], bool):
            return f"`stream` must be a boolean, got {kind_of(body['stream'])}"
        return None

    def to_chat(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        system = body.get("system")
        if system:
            messages.append({"role": "system", "content": system if isinstance(system, str) else "\n\n".join(
                b.get("text", "") for b in system if b.get("type") == "text"
                and not b.get("text", "").startswith(BILLING_HEADER))})
        for m in body["messages"]:
            content = m.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if m["role"] == "assistant":
                messages.append(_assistant_turn(blocks))
            elif m["role"] == "system":
                messages.append({"role": "system", "content": text_of(blocks)})
            else:
                messages.extend(_user_turn(blocks))
        chat: dict[str, Any] = {"model": body["model"], "messages": messages}
        tools, dropped = [], []
        for t in body.get("tools") or []:
            if "input_schema" in t and t.get("type") in (None, "custom"):
                tools.append({"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                                               "parameters": t["input_schema"]}})
            else:
                dropped.append(t.get("name"))
        if tools:
            chat["tools"] = tools
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and tools:
            chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}.get(choice.get("type") or "") or \
                {"type": "function", "function": {"name": choice.get("name")}}
            if choice.get("disable_parallel_tool_use"):
                chat["parallel_tool_calls"] = False
        for key, chat_key in SAME_PARAMS.items():
            if body.get(key) is not None:
                chat[chat_key] = body[key]
        if chat.get("stream"):
            chat["stream_options"] = {"include_usage": True}
        params = {k: v for k, v in body.items() if k not in ("messages", "tools", "system")}
        if dropped:
            params["dropped_tools"] = dropped
        return chat, params

    def answer(self, completion: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        content: list[dict[str, Any]] = []
        if message.get("reasoning_content"):
            content.append({"type": "thinking", "thinking": message["reasoning_content"], "signature": ""})
        if message.get("content"):
            content.append({"type": "text", "text": text_of(message["content"])})
        for tc in message.get("tool_calls") or []:
            fn = tc.get("function") or {}
            content.append({"type": "tool_use", "id": tc.get("id") or _tool_id(), "name": fn.get("name"),
                            "input": parse_arguments(fn.get("arguments"))})
        usage = completion.get("usage") or {}
        stop = "tool_use" if message.get("tool_calls") else STOP_REASONS.get(choice.get("finish_reason"), "end_turn")
        return {"id": _message_id(completion.get("id")), "type": "message", "role": "assistant",
                "model": completion.get("model"), "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens":
                          usage.get("completion_tokens", 0)}}

    def stream(self, params: dict[str, Any]) -> Stream:
        return _MessagesStream(params.get("model"))

    def error(self, status: int, message: str) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}


def _message_id(upstream_id: Any) -> str:
    return f"msg_{upstream_id}" if isinstance(upstream_id, str) and upstream_id else f"msg_{secrets.token_hex(12)}"


def _tool_id() -> str:
    return f"toolu_{secrets.token_hex(12)}"


class _MessagesStream(Stream):
    """Chat chunks -> Messages events. One content block is open at a time: text, thinking, or one tool call."""

    def __init__(self, model: str | None):
        self.model = model
        self.started = False
        self.block = -1  # the index of the open block (-1: none)
        self.open: tuple[str, int] | None = None  # ("text" | "thinking" | "tool", chat tool index)
        self.tool_calls = False

    def _start(self, chunk: dict[str, Any]) -> bytes:
        self.started = True
        msg: dict[str, Any] = {"id": _message_id(chunk.get("id")), "type": "message", "role": "assistant",
               "model": chunk.get("model") or self.model, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 0, "output_tokens": 0}}
        return sse({"type": "message_start", "message": msg}, "message_start")

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        self.open = None
        return sse({"type": "content_block_stop", "index": self.block}, "content_block_stop")

    def _open(self, what: tuple[str, int], block: dict[str, Any]) -> bytes:
        out = self._close()
        self.block += 1
        self.open = what
        return out + sse({"type": "content_block_start", "index": self.block, "content_block": block},
                         "content_block_start")

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse({"type": "content_block_delta", "index": self.block, "delta": delta}, "content_block_delta")

    def feed(self, chunk: dict[str, Any]) -> bytes:
        out = b"" if self.started else self._start(chunk)
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = got if isinstance(got := choice.get("delta"), dict) else {}
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                if self.open != ("thinking", 0):
                    out += self._open(("thinking", 0), {"type": "thinking", "thinking": "", "signature": ""})
                out += self._delta({"type": "thinking_delta", "thinking": thought})
            if isinstance(delta.get("content"), str) and delta["content"]:
                if self.open != ("text", 0):
                    out += self._open(("text", 0), {"type": "text", "text": ""})
                out += self._delta({"type": "text_delta", "text": delta["content"]})
            for tc in delta.get("tool_calls") or []:
                if not isinstance(tc, dict):
                    continue
                self.tool_calls = True
                at = tc.get("index", 0)
                fn = got if isinstance(got := tc.get("function"), dict) else {}
                if self.open != ("tool", at):
                    out += self._open(("tool", at), {"type": "tool_use", "id": tc.get("id") or _tool_id(),
                                                     "name": fn.get("name") or "", "input": {}})
                if isinstance(fn.get("arguments"), str) and fn["arguments"]:
                    out += self._delta({"type": "input_json_delta", "partial_json": fn["arguments"]})
        return out

    def finish(self, answer: dict[str, Any]) -> bytes:
        out = b"" if self.started else self._start({"model": self.model})
        out += self._close()
        usage = answer.get("usage") or {}
        stop = "tool_use" if self.tool_calls else STOP_REASONS.get(answer.get("finish_reason") or "", "end_turn")
        out += sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                              "output_tokens": usage.get("completion_tokens", 0)}}, "message_delta")
        return out + sse({"type": "message_stop"}, "message_stop")

    def fail(self, message: str) -> bytes:
        return sse({"type": "error", "error": {"type": "api_error", "message": message}}, "error")
