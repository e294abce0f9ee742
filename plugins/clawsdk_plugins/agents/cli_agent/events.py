"""A CLI agent's tool calls as the rollout's own tool_call / tool_result events, read off its model traffic.

A CLI agent (OpenClaw, Claude Code, Codex) runs its tools itself, inside the sandbox; clawsdk sees only the
model calls through the recording proxy, each in the chat shape whatever protocol the agent speaks. Those
carry everything: an answer's `tool_calls` are the calls, and a later request that holds that assistant turn
holds their results, as `tool` messages naming the calls' ids (OpenClaw rewrites ids, e.g. `call_9` to
`call9`, so an id is read off the assistant turn as the agent sent it back, by position). So the proxy
records through a `ToolEventRecorder`, which
writes a `tool_call` event after each answer that makes calls and the matching `tool_result`
events (each with `call`, its call's seq) before the next request, the order the built-in
agent's events have. n_tool_calls, selection, SFT export and the TUI then treat the rollout like
any other.

The agent's every request holds the whole conversation so far. One that does not hold the pending
calls' assistant turn was sent by some other process with the token (a script the agent ran that
read the agent's config): it resolves nothing, the calls its answer makes are nobody's and are not
recorded as the agent's, and the pending calls wait for the agent's own next request.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clawsdk.proxy.wire import parse_arguments
from clawsdk.store.events import Event, ModelRequest, ModelResponse, Note, ToolCall, ToolResult, event_of

if TYPE_CHECKING:
    from clawsdk.store.recorder import Recorder

#: whether the request this proxy task is answering carries the pending calls' turn (each request is
#: its own task, so its answer reads what its request set, whatever other requests came between)
_ON_CHAIN: contextvars.ContextVar[bool] = contextvars.ContextVar("harness_on_chain", default=True)

#: how a failed tool's result starts where the protocol carries no error flag (OpenClaw's text)
ERROR_PREFIXES = ("error:", "error ", "tool error", "failed:", "command failed", "validation failed")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else json.dumps(content)


class ToolEventRecorder:
    """Records like `recorder`, adding the tool events the agent's model traffic implies.

    `first_request_at` is when the agent's first model request came: its boot is over by then. `who` names
    the agent in the results it never sent back; `failed(text)` says whether a result with no error flag
    (Anthropic's `is_error`) is a failure.
    """

    def __init__(self, recorder: Recorder, *, who: str = "the agent",
                 failed: Callable[[str], bool] | None = None):
        self.inner = recorder
        self.who = who
        self.failed = failed or (lambda text: text.strip().lower().startswith(ERROR_PREFIXES))
        self.pending: list[ToolCall] = []  # calls of the last answer (seq set), results not yet seen
        self.last_own: list[Any] = []  # the messages of the agent's last own request
        self.called_at = 0.0
        self.first_request_at: float | None = None

    def agents_own(self) -> bool:
        """Whether the request being answered (in this task) is the agent's own: the proxy asks before it lets
        an upstream failure count as the model server's (ModelProxy.last_failed)."""
        return _ON_CHAIN.get()

    @property
    def n_tool_calls(self) -> int:
        return self.inner.n_tool_calls

    @property
    def n_model_calls(self) -> int:
        return self.inner.n_model_calls

    async def record(self, event: Event | str, payload: dict[str, Any] | None = None, *,
                     duration_ms: float | None = None) -> int:
        if isinstance(event, str):  # Recorder.record's form of earlier releases, as it takes it
            event = event_of(event, payload)
        if isinstance(event, ModelRequest):
            if self.first_request_at is None:
                self.first_request_at = time.monotonic()
            messages = event.messages or []
            own = await self._results(messages)
            _ON_CHAIN.set(own)
            if own:
                self.last_own = messages
        seq = await self.inner.record(event, duration_ms=duration_ms)
        if isinstance(event, ModelResponse):
            if _ON_CHAIN.get():
                # an answer that ended in an error carries calls that were never made: the agent drops
                # that turn from the history it sends next (so the calls would wait for it forever)
                if event.error is None:
                    await self._calls(event.message or {})
            else:
                await self.inner.record(Note(extra={"harness": f"a model request without the pending calls' turn "
                                                               f"(not {self.who}'s own): its answer's calls are not "
                                                               f"recorded"}))
        return seq

    async def _calls(self, message: dict[str, Any]) -> None:
        for tc in message.get("tool_calls") or []:
            fn = tc.get("function") or {}
            call = ToolCall(tool=fn.get("name") or "", args=parse_arguments(fn.get("arguments")))
            call.seq = await self.inner.record(call)
            self.pending.append(call)
        self.called_at = time.monotonic()

    def _anchor(self, messages: list[dict[str, Any]]) -> int | None:
        """Where in `messages` the assistant turn that made the pending calls is (the last one that
        names the same tools in the same order), or None."""
        names = [c.tool for c in self.pending]
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list) and \
                    [(tc.get("function") or {}).get("name") for tc in m["tool_calls"]] == names:
                return i
        return None

    async def _results(self, messages: list[dict[str, Any]]) -> bool:
        """Records the pending calls' results this request carries; False if it does not carry their turn."""
        if not self.pending:
            return True
        at = self._anchor(messages)
        if at is None:
            n = len(self.last_own)
            if not n or messages[:n] != self.last_own or any(m.get("role") == "assistant" for m in messages[n:]):
                return False
            # the agent's last request again, with no turn after it (it may add context): it dropped the answer
            for call in self.pending:
                await self.inner.record(ToolResult(tool=call.tool, call=call.seq, is_error=True,
                                                   content=f"({self.who} dropped this answer: not run)"))
            self.pending = []
            return True
        ids = [tc.get("id") for tc in messages[at]["tool_calls"]]
        results: dict[int, dict[str, Any]] = {}  # position among the calls -> its tool message
        for m in messages[at + 1:]:
            if m.get("role") == "assistant":
                break
            if m.get("role") != "tool":
                continue
            tid = m.get("tool_call_id")
            i = ids.index(tid) if tid in ids else next((k for k in range(len(ids)) if k not in results), None)
            if i is not None and i not in results:
                results[i] = m
        took = (time.monotonic() - self.called_at) * 1000
        for i, call in enumerate(self.pending):
            if i in results:
                text = _text(results[i].get("content"))
                flag = results[i].get("is_error")
                error = flag if isinstance(flag, bool) else self.failed(text)
            else:
                text, error = f"({self.who} sent the model no result for this call)", True
            await self.inner.record(ToolResult(tool=call.tool, call=call.seq, is_error=error, content=text),
                                    duration_ms=took)
        self.pending = []
        return True

    async def flush(self) -> None:
        """Calls whose results never came back to the model (the agent stopped or was stopped)."""
        for call in self.pending:
            await self.inner.record(ToolResult(tool=call.tool, call=call.seq, is_error=True,
                                               content=f"({self.who} ended before returning this result)"))
        self.pending = []
