"""OpenClaw's tool calls as the rollout's own tool_call / tool_result events, read off its model traffic.

OpenClaw runs its tools itself, inside the sandbox; clawsdk sees only the model calls through the
recording proxy. Those carry everything: an answer's `tool_calls` are the calls, and the next
request's `tool` messages after that assistant turn are their results, in order. So the proxy
records through a `ToolEventRecorder`, which writes a `tool_call` event after each answer that
makes calls and the matching `tool_result` events before the next request, the order the
built-in agent's events have. n_tool_calls, selection, SFT export and the TUI then treat the
rollout like any other.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clawsdk.runtime.recorder import Recorder

#: OpenClaw's text for a failed tool (its tool messages carry no error flag)
ERROR_PREFIXES = ("error:", "error ", "tool error", "failed:", "command failed", "validation failed")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else json.dumps(content)


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {"_raw": raw}  # what the model sent, kept as it was
    return raw or {}


class ToolEventRecorder:
    """Records like `recorder`, adding the tool events OpenClaw's model traffic implies.

    `first_request_at` is when OpenClaw's first model request came: its boot is over by then.
    """

    def __init__(self, recorder: Recorder):
        self.inner = recorder
        self.pending: list[dict[str, Any]] = []  # calls of the last answer, results not yet seen
        self.called_at = 0.0
        self.first_request_at: float | None = None

    @property
    def n_tool_calls(self) -> int:
        return self.inner.n_tool_calls

    @property
    def n_model_calls(self) -> int:
        return self.inner.n_model_calls

    async def record(self, kind: str, payload: dict[str, Any], *, duration_ms: float | None = None) -> int:
        if kind == "model_request":
            if self.first_request_at is None:
                self.first_request_at = time.monotonic()
            await self._results(payload.get("messages") or [])
        seq = await self.inner.record(kind, payload, duration_ms=duration_ms)
        if kind == "model_response":
            await self._calls(payload.get("message") or {})
        return seq

    async def _calls(self, message: dict[str, Any]) -> None:
        self.pending = []
        for tc in message.get("tool_calls") or []:
            fn = tc.get("function") or {}
            call = {"tool": fn.get("name") or "", "args": _args(fn.get("arguments"))}
            await self.inner.record("tool_call", call)
            self.pending.append(call)
        self.called_at = time.monotonic()

    async def _results(self, messages: list[dict[str, Any]]) -> None:
        if not self.pending:
            return
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant" and m.get("tool_calls")),
                   default=-1)
        results = [m for m in messages[last + 1:] if m.get("role") == "tool"] if last >= 0 else []
        took = (time.monotonic() - self.called_at) * 1000
        for call, result in zip(self.pending, results):
            text = _text(result.get("content"))
            await self.inner.record("tool_result", {
                "tool": call["tool"], "is_error": text.strip().lower().startswith(ERROR_PREFIXES),
                "content": text}, duration_ms=took)
        self.pending = []

    async def flush(self) -> None:
        """Calls whose results never came back to the model (OpenClaw stopped or was stopped)."""
        for call in self.pending:
            await self.inner.record("tool_result", {"tool": call["tool"], "is_error": True,
                                                    "content": "(OpenClaw ended before returning this result)"})
        self.pending = []
