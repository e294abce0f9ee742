"""A rollout's model calls joined into a prefix tree: which call went on from which, which were retries, and
where the agent rewrote its context.

An agent sends its whole conversation with every call. A call whose messages are an earlier call's messages
followed by that call's answer *extends* it: one more turn on the same branch. A call with the very prompt of an
earlier one is a *retry* of it (the client sent it again: the answer failed, was cut off, or was thrown away);
the attempt a later call goes on from is the one on the branch, else the last one, and the others are marked
`retried`. A call that extends nothing is a new root: a *compaction* when it opens like an earlier root (the same
system prompt: the agent summarised or cut its history and went on), else a *side* call (another system prompt:
a title, a sub-agent) or the first *root*.

Messages are compared as the model reads them: role, text and tool calls by name and arguments; call ids aside
(clients rename them) and fields no model reads (cache hints) aside.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clawsdk.models import toolcalls
from clawsdk.store.events import ModelRequest, ModelResponse, StoredEvent

__all__ = ["Call", "branches", "call_tree"]


@dataclass
class Call:
    seq: int  # the model_request's seq
    request: ModelRequest
    response: ModelResponse | None  # the model_response answering it, if any
    relation: str = "root"  # root | extends | retry | compaction | side
    parent: int | None = None  # the call it extends (for a retry: the call its first attempt extends)
    retry_of: int | None = None  # a retry: the first call with this prompt
    retried: bool = False  # another attempt at the same prompt is the one on the branch
    children: list[int] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        r = self.response
        return r is not None and isinstance(r.message, dict) and r.error is None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def message_key(m: dict[str, Any]) -> str:
    """A message as the model reads it, for comparing turns across calls."""
    calls = [[(c.get("function") or c).get("name"), toolcalls.arguments_of(c)] for c in m.get("tool_calls") or []]
    role = {"developer": "system"}.get(m.get("role") or "", m.get("role"))
    return json.dumps([role, _text(m.get("content")).strip(), calls], sort_keys=True, ensure_ascii=False)


def _keys(request: ModelRequest) -> list[str]:
    messages = request.messages if isinstance(request.messages, list) else []
    return [message_key(m) for m in messages if isinstance(m, dict)]


def call_tree(events: list[StoredEvent]) -> list[Call]:
    """The rollout attempt's model calls, in order, each with its place in the prefix tree."""
    responses = {e.request: e for e in events if isinstance(e, ModelResponse) and isinstance(e.request, int)}
    calls: list[Call] = []
    pending: list[Call] = []  # calls without a response naming them: answered in order (older stores)
    for e in events:
        if isinstance(e, ModelRequest):
            call = Call(seq=e.seq, request=e, response=responses.get(e.seq))  # type: ignore[arg-type]
            calls.append(call)
            if call.response is None:
                pending.append(call)
        elif isinstance(e, ModelResponse) and e.request is None and pending:
            pending.pop(0).response = e
    by_seq = {c.seq: c for c in calls}
    keys = {c.seq: _keys(c.request) for c in calls}
    # an answered call's response has a message (Call.answered)
    answers = {c.seq: message_key({**c.response.message, "role": "assistant"})  # type: ignore[union-attr, dict-item]
               for c in calls if c.answered}
    first_with: dict[str, int] = {}  # prompt -> the first call with it
    for i, call in enumerate(calls):
        mine = keys[call.seq]
        prompt = json.dumps(mine)
        if prompt in first_with:
            first = by_seq[first_with[prompt]]
            call.relation, call.retry_of, call.parent = "retry", first.seq, first.parent
        else:
            first_with[prompt] = call.seq
            parent = _extended(call, calls[:i], keys, answers)
            if parent is not None:
                call.relation, call.parent = "extends", parent.seq
            elif any(c.relation in ("root", "compaction") and keys[c.seq][:1] == mine[:1] for c in calls[:i]):
                call.relation = "compaction"
            elif any(c.relation in ("root", "compaction") for c in calls[:i]):
                call.relation = "side"
        if call.parent is not None:
            by_seq[call.parent].children.append(call.seq)
    _mark_retries(calls, by_seq)
    return calls


def _extended(call: Call, earlier: list[Call], keys: dict[int, list[str]], answers: dict[int, str]) -> Call | None:
    """The latest earlier call whose prompt and answer this call's messages begin with."""
    mine = keys[call.seq]
    for c in reversed(earlier):
        theirs = keys[c.seq]
        n = len(theirs)
        if c.seq in answers and len(mine) > n and mine[:n] == theirs and mine[n] == answers[c.seq]:
            return c
    return None


def _mark_retries(calls: list[Call], by_seq: dict[int, Call]) -> None:
    """Of the attempts at one prompt, the one a later call went on from stays on the branch (else the last answered
    one, else the last); the others are `retried`. Children of an attempt that is not kept move to the kept one."""
    groups: dict[int, list[Call]] = {}
    for c in calls:
        groups.setdefault(c.retry_of if c.retry_of is not None else c.seq, []).append(c)
    for attempts in groups.values():
        if len(attempts) < 2:
            continue
        went_on = [a for a in attempts if any(by_seq[ch].relation == "extends" for ch in a.children)]
        kept = (went_on or [a for a in attempts if a.answered] or attempts)[-1]
        for a in attempts:
            a.retried = a is not kept


def branches(calls: list[Call]) -> list[list[Call]]:
    """Every root-to-leaf chain of kept, answered calls (a compaction and a side call start chains of their own)."""
    by_seq = {c.seq: c for c in calls}
    out = []
    for c in calls:
        if c.retried or not c.answered:
            continue
        if any(not by_seq[ch].retried and by_seq[ch].answered for ch in c.children):
            continue  # not a leaf: a kept turn goes on from it
        chain = [c]
        while chain[0].parent is not None:
            chain.insert(0, by_seq[chain[0].parent])
        out.append(chain)
    return out
