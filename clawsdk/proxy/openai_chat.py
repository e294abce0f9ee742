"""OpenAI chat completions: the proxy's own shape. Requests go upstream as they came and answers come back byte
for byte; this module checks a request, reads a whole answer into its model_response record, and folds a
streamed answer's chunks into the assembled message the store keeps."""

from __future__ import annotations

from typing import Any

from clawsdk.models.completion import capped, read_completion
from clawsdk.proxy.wire import Protocol, kind_of, tools_and_flags_problem

#: answer fields recorded under their own name where the upstream gives them (vLLM: token ids, logprobs)
TOKEN_FIELDS = ("logprobs", "completion_token_ids", "prompt_token_ids")


def merge_delta(acc: dict[str, Any], delta: dict[str, Any]) -> None:
    """Fold one streamed delta into the assembled assistant message."""
    if delta.get("role"):
        acc["role"] = delta["role"]
    for key in ("content", "reasoning_content", "reasoning"):
        if isinstance(delta.get(key), str) and delta[key]:
            acc[key] = (acc.get(key) or "") + delta[key]
    tool_calls = delta.get("tool_calls")
    for tc in tool_calls if isinstance(tool_calls, list) else []:
        if not isinstance(tc, dict):
            continue
        calls = acc.setdefault("tool_calls", [])
        idx = tc.get("index", len(calls))
        if not isinstance(idx, int) or not 0 <= idx < 1024:  # an index is a small position, never a size
            continue
        while len(calls) <= idx:
            calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        slot = calls[idx]
        if isinstance(tc.get("id"), str):
            slot["id"] = tc["id"]
        fn = got if isinstance(got := tc.get("function"), dict) else {}
        for key in ("name", "arguments"):
            if isinstance(fn.get(key), str):
                slot["function"][key] += fn[key]


def response_record(body: dict[str, Any]) -> dict[str, Any]:
    """The model_response payload of a (non-streamed) chat completion; MalformedAnswer if it is not one."""
    read_completion(body)  # every field this reads has the type it needs
    choice = body["choices"][0]
    out: dict[str, Any] = {"message": choice.get("message"), "finish_reason": choice.get("finish_reason"),
                           "usage": body.get("usage"), "model": body.get("model"), "id": body.get("id")}
    for key in ("logprobs", "token_ids"):
        if choice.get(key) is not None:
            out["completion_token_ids" if key == "token_ids" else key] = choice[key]
    if body.get("prompt_token_ids") is not None:
        out["prompt_token_ids"] = body["prompt_token_ids"]
    if len(body.get("choices") or []) > 1:
        out["choices"] = body["choices"]
    return out


def request_problem(body: Any) -> str | None:
    """Why a chat-completions request body cannot be forwarded, or None (it is checked before anything
    reads it: a list or a string used to be an HTTP 500 with a traceback in the log)."""
    if not isinstance(body, dict):
        return f"the request body must be a JSON object with `messages`, not {kind_of(body)}"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        what = "missing" if "messages" not in body else f"{kind_of(messages)}" if not isinstance(messages, list) \
            else "an empty list"
        return f"`messages` must be a non-empty list of {{role, content}} objects, got {what}"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return f"messages[{i}] must be an object with a string `role`, got {kind_of(m)}" \
                if not isinstance(m, dict) else f"messages[{i}].role must be a string, got {kind_of(m.get('role'))}"
    return tools_and_flags_problem(body)


def bad_upstream(why: str, raw: bytes) -> dict[str, Any]:
    return {"error": {"message": f"the upstream's answer is not a chat completion: {why}", "type": "upstream_error",
                      "raw": capped(raw)}}


class Assembly:
    """A streamed chat answer as it comes in: the assistant message so far and the rest (finish reason, usage,
    ids, token ids, an error event)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"role": "assistant", "content": None}
        self.meta: dict[str, Any] = {}

    def fold_line(self, line: str) -> dict[str, Any] | None:
        """Fold one line of the stream; returns its event when it is a chunk (a JSON object), else None."""
        if not line.startswith("data:"):
            return None
        data = line[5:].strip()
        if data == "[DONE]":
            self.meta["done"] = True
        if not data or data == "[DONE]":
            return None
        import json

        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            return None
        if not isinstance(event, dict):  # not a chunk: the client gets it as it came; nothing to fold
            return None
        self.fold(event)
        return event

    def fold(self, event: dict[str, Any]) -> None:
        meta = self.meta
        if "error" in event:
            meta["error"] = event["error"]
        for key in ("id", "model"):
            if event.get(key):
                meta[key] = event[key]
        if event.get("usage"):
            meta["usage"] = event["usage"]
        if event.get("prompt_token_ids"):
            meta["prompt_token_ids"] = event["prompt_token_ids"]
        choices = event.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                merge_delta(self.message, delta)
            if choice.get("finish_reason"):
                meta["finish_reason"] = choice["finish_reason"]
            lp = choice.get("logprobs")
            lp = lp.get("content") if isinstance(lp, dict) else None
            if isinstance(lp, list) and lp:
                meta.setdefault("logprobs", {"content": []})["content"].extend(lp)
            if isinstance(choice.get("token_ids"), list):
                meta.setdefault("completion_token_ids", []).extend(choice["token_ids"])

    def record(self) -> dict[str, Any]:
        """The model_response payload of the streamed answer as assembled."""
        meta = self.meta
        payload = {"message": self.message, "finish_reason": meta.get("finish_reason"), "usage": meta.get("usage"),
                   "model": meta.get("model"), "id": meta.get("id"), "streamed": True}
        if "error" in meta:  # an error event in a 2xx stream: its calls were not made (clients drop the turn)
            payload["error"] = meta["error"]
        for key in TOKEN_FIELDS:
            if meta.get(key):
                payload[key] = meta[key]
        return payload


class OpenAIChat(Protocol):
    """Chat completions: forwarded and answered as they are (core.py passes the bytes through)."""

    name = "openai-chat"
    path = "/chat/completions"
    passthrough = True

    def problem(self, body: Any) -> str | None:
        return request_problem(body)

    def to_chat(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # every other field goes upstream, so every one is recorded: `chat_template`, `continue_final_message`
        # or `logit_bias` change what the model saw or said
        return body, {k: v for k, v in body.items() if k not in ("messages", "tools")}

    def answer(self, completion: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        return completion
