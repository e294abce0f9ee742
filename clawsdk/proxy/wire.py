"""What the proxy's protocol modules share: the protocol contract, server-sent events, and JSON kinds in messages.

The recording core (core.py) speaks OpenAI chat completions to the upstream and records every call in
that shape (the store's `model_request`/`model_response`). A `Protocol` is how one client protocol maps
onto it: which requests it takes, the chat body a request becomes, and how a chat answer (whole, or
streamed chunk by chunk) is said back in the client's own protocol.
"""

from __future__ import annotations

import json
from typing import Any


def kind_of(value: Any) -> str:
    """`value`'s JSON kind, for an error message."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


def tools_and_flags_problem(body: dict[str, Any]) -> str | None:
    """What is wrong with the fields OpenAI's two APIs share (`tools`, `model`, `stream`), or None."""
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        return "`tools` must be a list of tool objects"
    for key, types, what in (("model", str, "a string"), ("stream", bool, "a boolean")):
        if body.get(key) is not None and not isinstance(body[key], types):
            return f"`{key}` must be {what}, got {kind_of(body[key])}"
    return None


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event (`event:` line first where the protocol names its events)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def parse_arguments(raw: Any) -> Any:
    """A tool call's arguments as a value: JSON text parsed; text that is not JSON kept, as `{"_raw": text}`."""
    if not isinstance(raw, str):
        return raw if raw is not None else {}
    try:
        return json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return {"_raw": raw}


def text_of(content: Any) -> str:
    """Text content: a string as is, text parts joined (any protocol's: `text`, `input_text`, `output_text`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


class Stream:
    """A translator of one streamed chat answer into the client's protocol: `feed` takes each chat chunk (a
    parsed `data:` event) and returns the bytes to send; `finish` the closing bytes, given the assembled
    model_response payload; `fail` the bytes that end the stream with an error."""

    def feed(self, chunk: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def finish(self, answer: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def fail(self, message: str) -> bytes:
        raise NotImplementedError


class Protocol:
    """One client protocol in front of the chat-completions core."""

    #: recorded as the model_request's `protocol`
    name = ""
    #: the path (after the base URL) its requests are posted to
    path = ""

    def problem(self, body: Any) -> str | None:
        """Why this request cannot be forwarded (a 400 with this reason), or None."""
        raise NotImplementedError

    def to_chat(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the chat-completions body sent upstream, the recorded `params`: the request's other fields as sent)."""
        raise NotImplementedError

    def answer(self, completion: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """A whole chat completion as this protocol's answer to the request whose recorded params are `params`."""
        raise NotImplementedError

    def stream(self, params: dict[str, Any]) -> Stream:
        """The translator of a streamed answer to the request whose recorded params are `params`."""
        raise NotImplementedError

    def error(self, status: int, message: str) -> dict[str, Any]:
        """An error body in this protocol's shape."""
        return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "upstream_error"}}
