"""The OpenAI Responses API (`POST /v1/responses`, what Codex CLI speaks) in front of the chat-completions core.

A request becomes a chat request: `instructions` the system message, `input` items messages (`developer` as
`system`, `function_call` items an assistant turn's tool_calls, `function_call_output` items `tool` messages,
`custom_tool_call` a call whose one argument is `input`), `function` and `custom` tools function tools (tools
with no chat form, such as `web_search` or a tool namespace, are dropped and named in the recorded params).
Reasoning items carry nothing a chat model reads and are left out. The chat answer is said back as a response
object, or streamed as Responses events (response.created, output items, text and argument deltas,
response.completed) as the chat chunks come.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from clawsdk.proxy.wire import Protocol, Stream, kind_of, sse, text_of, tools_and_flags_problem

SAME_PARAMS = {"max_output_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
               "parallel_tool_calls": "parallel_tool_calls", "stream": "stream", "seed": "seed"}
#: the argument a custom (free-form) tool's text travels in, as a chat function call
CUSTOM_INPUT = "input"


def _role(role: Any) -> str:
    return "system" if role == "developer" else role


def _parts(content: Any) -> Any:
    """A message's content as chat content: text parts joined, images as image_url parts."""
    if isinstance(content, str):
        return content
    parts = []
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, dict):
            continue
        if p.get("type") in ("input_text", "output_text", "text", "summary_text"):
            parts.append({"type": "text", "text": p.get("text", "")})
        elif p.get("type") == "input_image" and p.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": p["image_url"]}})
        elif p.get("type") == "refusal":
            parts.append({"type": "text", "text": p.get("refusal", "")})
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        last = out[-1] if out else {}
        if kind == "message":
            role, content = _role(item.get("role")), _parts(item.get("content"))
            if role == "assistant" and last.get("role") == "assistant" and last.get("content") is None \
                    and not last.get("tool_calls"):
                last["content"] = content
            else:
                out.append({"role": role, "content": content})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else \
                json.dumps({CUSTOM_INPUT: item.get("input", "")}, ensure_ascii=False)
            if last.get("role") != "assistant":  # calls join the assistant turn they follow (a preamble)
                out.append(last := {"role": "assistant", "content": None})
            last.setdefault("tool_calls", []).append(
                {"id": item.get("call_id"), "type": "function",
                 "function": {"name": item.get("name"), "arguments": arguments or ""}})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": output if isinstance(output, str) else text_of(output)})
        # reasoning, web_search_call, ...: nothing a chat model is given
    return out


class OpenAIResponses(Protocol):
    name = "openai-responses"
    path = "/responses"

    def problem(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return f"the request body must be a JSON object with `input`, not {kind_of(body)}"
        if body.get("previous_response_id"):
            return ("`previous_response_id` is not supported: the clawsdk proxy stores no responses; send the "
                    "whole conversation in `input` (Codex: store = false)")
        items = body.get("input")
        if not isinstance(items, (str, list)) or not items:
            return f"`input` must be a non-empty string or list of input items, got {kind_of(items)}"
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                return f"input[{i}] must be an object, got {kind_of(item)}"
            kind = item.get("type", "message")
            if kind == "message" and not isinstance(item.get("role"), str):
                return f"input[{i}].role must be a string"
            if kind in ("function_call", "function_call_output") and not isinstance(item.get("call_id"), str):
                return f"input[{i}].call_id must be a string"
        if body.get("instructions") is not None and not isinstance(body["instructions"], str):
            return f"`instructions` must be a string, got {kind_of(body['instructions'])}"
        return tools_and_flags_problem(body)

    def to_chat(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        items = body["input"]
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        messages = _messages(items)
        if body.get("instructions"):
            messages.insert(0, {"role": "system", "content": body["instructions"]})
        chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
        tools, dropped, custom = [], [], []
        for t in body.get("tools") or []:
            if t.get("type") == "function" and isinstance(t.get("name"), str):
                tools.append({"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                                               "parameters": t.get("parameters") or {"type": "object"}}})
            elif t.get("type") == "custom" and isinstance(t.get("name"), str):
                custom.append(t["name"])
                tools.append({"type": "function", "function": {
                    "name": t["name"], "description": t.get("description", ""),
                    "parameters": {"type": "object", "properties": {CUSTOM_INPUT: {"type": "string"}},
                                   "required": [CUSTOM_INPUT]}}})
            else:
                dropped.append(t.get("name") or t.get("type"))
        if tools:
            chat["tools"] = tools
            choice = body.get("tool_choice")
            if choice in ("auto", "required", "none"):
                chat["tool_choice"] = choice
            elif isinstance(choice, dict) and choice.get("name"):
                chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        for key, chat_key in SAME_PARAMS.items():
            if body.get(key) is not None:
                chat[chat_key] = body[key]
        fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            chat["response_format"] = {"type": "json_schema", "json_schema": {
                k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}}
        if chat.get("stream"):
            chat["stream_options"] = {"include_usage": True}
        params = {k: v for k, v in body.items() if k not in ("input", "tools", "instructions")}
        if dropped:
            params["dropped_tools"] = dropped
        if custom:
            params["custom_tools"] = custom
        return chat, params

    def answer(self, completion: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        custom = params.get("custom_tools") or []
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        output: list[dict[str, Any]] = []
        if message.get("content"):
            output.append(_message_item(text_of(message["content"]), "completed"))
        for tc in message.get("tool_calls") or []:
            fn = tc.get("function") or {}
            output.append(_call_item(tc.get("id"), fn.get("name") or "", fn.get("arguments") or "", custom))
        return _response(completion.get("id"), completion.get("model"), output, completion.get("usage"),
                         choice.get("finish_reason"))

    def stream(self, params: dict[str, Any]) -> Stream:
        return _ResponsesStream(params.get("model"), params.get("custom_tools") or [])

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                          "param": None, "code": None}}


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _message_item(text: str, status: str, item_id: str | None = None) -> dict[str, Any]:
    return {"type": "message", "id": item_id or _id("msg"), "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" or text
            else []}


def _call_item(call_id: Any, name: str, arguments: str, custom: list[str], item_id: str | None = None,
               status: str = "completed") -> dict[str, Any]:
    call_id = call_id if isinstance(call_id, str) and call_id else _id("call")
    if name in custom:  # said back as the free-form call the client offered
        value = json.loads(arguments) if arguments.strip().startswith("{") else {}
        text = value.get(CUSTOM_INPUT) if isinstance(value, dict) and isinstance(value.get(CUSTOM_INPUT), str) \
            else arguments
        return {"type": "custom_tool_call", "id": item_id or _id("ctc"), "call_id": call_id, "name": name,
                "input": text, "status": status}
    return {"type": "function_call", "id": item_id or _id("fc"), "call_id": call_id, "name": name,
            "arguments": arguments, "status": status}


def _usage(usage: Any) -> dict[str, Any]:
    usage = usage if isinstance(usage, dict) else {}
    inp, out = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": inp + out}


def _response(upstream_id: Any, model: Any, output: list[dict[str, Any]], usage: Any, finish: Any,
              status: str | None = None, response_id: str | None = None) -> dict[str, Any]:
    status = status or ("incomplete" if finish == "length" else "completed")
    return {"id": response_id or (f"resp_{upstream_id}" if isinstance(upstream_id, str) and upstream_id else _id("resp")),
            "object": "response", "created_at": int(time.time()), "status": status, "model": model,
            "output": output, "usage": _usage(usage), "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


class _ResponsesStream(Stream):
    """Chat chunks -> Responses events: a message item for the text, a function_call item per tool call."""

    def __init__(self, model: str | None, custom: list[str]):
        self.model = model
        self.custom = custom
        self.n = 0  # sequence_number
        self.response_id = _id("resp")
        self.started = False
        self.text: dict[str, Any] | None = None  # the open message item: id, index, text so far
        self.calls: dict[int, dict[str, Any]] = {}  # chat tool index -> its item: id, index, call_id, name, args
        self.items: list[dict[str, Any]] = []  # the output as it will be when complete, by output index

    def _event(self, kind: str, **fields: Any) -> bytes:
        self.n += 1
        return sse({"type": kind, "sequence_number": self.n, **fields}, kind)

    def _start(self) -> bytes:
        self.started = True
        shell = _response(None, self.model, [], None, None, status="in_progress", response_id=self.response_id)
        return self._event("response.created", response=shell) + self._event("response.in_progress", response=shell)

    def _end_text(self) -> bytes:
        t, self.text = self.text, None
        if t is None:
            return b""
        part = {"type": "output_text", "text": t["text"], "annotations": []}
        item = _message_item(t["text"], "completed", t["id"])
        self.items[t["index"]] = item
        return (self._event("response.output_text.done", item_id=t["id"], output_index=t["index"], content_index=0,
                            text=t["text"])
                + self._event("response.content_part.done", item_id=t["id"], output_index=t["index"],
                              content_index=0, part=part)
                + self._event("response.output_item.done", output_index=t["index"], item=item))

    def feed(self, chunk: dict[str, Any]) -> bytes:
        out = b"" if self.started else self._start()
        if chunk.get("model"):
            self.model = chunk["model"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = got if isinstance(got := choice.get("delta"), dict) else {}
            if isinstance(delta.get("content"), str) and delta["content"]:
                if self.text is None:
                    self.text = {"id": _id("msg"), "index": len(self.items), "text": ""}
                    self.items.append({})
                    item = _message_item("", "in_progress", self.text["id"])
                    out += self._event("response.output_item.added", output_index=self.text["index"], item=item)
                    out += self._event("response.content_part.added", item_id=self.text["id"],
                                       output_index=self.text["index"], content_index=0,
                                       part={"type": "output_text", "text": "", "annotations": []})
                self.text["text"] += delta["content"]
                out += self._event("response.output_text.delta", item_id=self.text["id"],
                                   output_index=self.text["index"], content_index=0, delta=delta["content"])
            for tc in delta.get("tool_calls") or []:
                if not isinstance(tc, dict):
                    continue
                out += self._end_text()
                at = tc.get("index", 0)
                fn = got if isinstance(got := tc.get("function"), dict) else {}
                call = self.calls.get(at)
                if call is None:
                    call = self.calls[at] = {"id": _id("fc"), "index": len(self.items), "call_id": tc.get("id"),
                                             "name": fn.get("name") or "", "args": ""}
                    self.items.append({})
                    item = _call_item(call["call_id"], call["name"], "", self.custom, call["id"], "in_progress")
                    out += self._event("response.output_item.added", output_index=call["index"], item=item)
                if isinstance(fn.get("arguments"), str) and fn["arguments"]:
                    call["args"] += fn["arguments"]
                    if call["name"] not in self.custom:
                        out += self._event("response.function_call_arguments.delta", item_id=call["id"],
                                           output_index=call["index"], delta=fn["arguments"])
        return out

    def finish(self, answer: dict[str, Any]) -> bytes:
        out = (b"" if self.started else self._start()) + self._end_text()
        for call in self.calls.values():
            item = _call_item(call["call_id"], call["name"], call["args"], self.custom, call["id"])
            self.items[call["index"]] = item
            if item["type"] == "function_call":
                out += self._event("response.function_call_arguments.done", item_id=call["id"],
                                   output_index=call["index"], arguments=call["args"])
            out += self._event("response.output_item.done", output_index=call["index"], item=item)
        final = _response(None, self.model, self.items, answer.get("usage"), answer.get("finish_reason"),
                          response_id=self.response_id)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return out + self._event(kind, response=final)

    def fail(self, message: str) -> bytes:
        out = b"" if self.started else self._start()
        failed = _response(None, self.model, [i for i in self.items if i], None, None, status="failed",
                           response_id=self.response_id)
        failed["error"] = {"code": "server_error", "message": message}
        return out + self._event("response.failed", response=failed)
