"""A rollout in the store -> the conversation a model should learn from (OpenAI-shaped messages + tools).

Rollouts of a model agent (tool-loop, or a black-box agent through the recording proxy) carry
model_request/model_response events: the conversation is the messages of the request the last reply
answers, plus that reply, in the shape a chat dataset carries (`_message`). Rollouts of the oracle,
scripted, replay or harness agents carry only tool_call/tool_result events: the conversation is
rebuilt the way the tool-loop agent would have held it (its system prompt, the task's tools plus
`finish`, one tool call per assistant turn, results as tool messages, a closing `finish` call), so
reference solutions are training data in the very format the agent prompts with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clawsdk.data.rows import row_problem
from clawsdk.data.tokenize import find_control_token
from clawsdk.models import toolcalls
from clawsdk.models.completion import content_text
from clawsdk.store.events import ErrorEvent, ModelRequest, ModelResponse, StoredEvent, ToolCall, ToolResult

#: the agent name of rollouts served to an external MCP client (`clawsdk serve`: "mcp:CLIENT")
SERVED = "mcp:"

__all__ = ["PromptStyle", "Trajectory", "new_call_id", "tool_calls_answered", "tool_listing",
           "trajectory_from_events"]


@dataclass
class PromptStyle:
    """How the tool-loop agent frames a task; oracle trajectories are rebuilt in the same frame."""

    system_prompt: str | None = None  # None: the tool-loop agent's built-in prompt
    finish_tool: bool = True
    finish_summary: str = "Done."
    max_tool_output_chars: int = 8000

    def resolved_system_prompt(self) -> str:
        if self.system_prompt:
            return self.system_prompt
        from clawsdk.models.prompt import SYSTEM_PROMPT

        return SYSTEM_PROMPT


@dataclass
class Trajectory:
    rollout_id: str
    attempt: int
    task_id: str
    task_hash: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    #: "model" (recorded model turns) or "tools" (rebuilt from tool calls)
    source: str
    n_tool_calls: int = 0
    n_tool_errors: int = 0
    n_assistant_turns: int = 0
    completion_tokens: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_error_rate(self) -> float:
        return self.n_tool_errors / self.n_tool_calls if self.n_tool_calls else 0.0

    def signature(self) -> str:
        """What the agent did, for dedup: the tool calls in order (name + arguments)."""
        calls = []
        for m in self.messages:
            for c in m.get("tool_calls") or []:
                calls.append([c["function"]["name"], toolcalls.arguments_of(c)])
        return json.dumps(calls, sort_keys=True, ensure_ascii=False)


def new_call_id(rollout_id: str, n: int) -> str:
    # deterministic, so the same rollout always exports to the same bytes
    return f"call_{rollout_id[-8:]}_{n}"


def tool_calls_answered(events: list[StoredEvent]) -> list[tuple[ToolCall, ToolResult | None]]:
    """Each `tool_call` event, in order, with the `tool_result` answering it (None: none did).

    A result names its call (`call`: the seq of the `tool_call` event): calls made concurrently (an
    external agent over `clawsdk serve`) finish, and are recorded, in any order. Results recorded
    before they named their call (older stores) answer the calls left, in order, as they always did."""
    calls = [e for e in events if isinstance(e, ToolCall)]
    by_seq = {e.seq: i for i, e in enumerate(calls) if e.seq is not None}
    answers: dict[int, ToolResult] = {}
    unnamed = []
    for e in events:
        if not isinstance(e, ToolResult):
            continue
        i = by_seq.get(e.call) if isinstance(e.call, int) else None
        if i is None:
            unnamed.append(e)
        else:
            answers.setdefault(i, e)
    left = [i for i in range(len(calls)) if i not in answers]
    answers.update(zip(left, unnamed, strict=False))  # in order; either list may be the longer
    return [(call, answers.get(i)) for i, call in enumerate(calls)]


def _text(content: Any, where: str) -> str | None:
    """Content as text: parts (as OpenAI-SDK agents send them) flattened the way answers are read.
    A part that is not text (an image) has no text to train on: ValueError, so selection drops the
    rollout saying why."""
    if isinstance(content, list):
        for j, part in enumerate(content):
            kind = part.get("type", "text") if isinstance(part, dict) else type(part).__name__
            if kind != "text":
                raise ValueError(f"{where}[{j}] is a {kind!r} part, not text: nothing to train on as text")
    return content_text(content, where)


def _message(message: dict[str, Any], where: str) -> dict[str, Any]:
    """A recorded message with the roles and fields a chat dataset has: `developer` is `system`, a
    legacy `function_call` is a tool call and a `function` message its result, and an assistant turn
    with only a refusal says the refusal (what the model said)."""
    role = {"developer": "system", "function": "tool"}.get(message.get("role") or "", message.get("role"))
    out = {**message, "role": role, "content": _text(message.get("content"), f"{where}.content")}
    if role == "assistant":
        if not out.get("tool_calls") and isinstance(message.get("function_call"), dict):
            out["tool_calls"] = [{"id": None, "type": "function", "function": message["function_call"]}]
        if not out["content"] and not out.get("tool_calls") and isinstance(message.get("refusal"), str):
            out["content"] = message["refusal"]
    return out


def _normalise_assistant(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message as the tool-loop agent keeps it: text calls moved into tool_calls."""
    calls = list(message.get("tool_calls") or [])
    content = message.get("content")
    if content and isinstance(content, str):
        parsed = toolcalls.parse_tool_calls(content)
        if parsed.calls or parsed.errors:
            calls += toolcalls.openai_tool_calls(parsed.calls)
            content = parsed.content or None
            if parsed.errors:
                content = "\n".join(p for p in [parsed.content] + [raw for raw, _ in parsed.errors] if p)
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = calls
    return out


def _canonical_calls(message: dict[str, Any], rollout_id: str, start: int) -> dict[str, Any]:
    """Tool-call ids made deterministic (the same rollout exports to the same bytes) and arguments a
    JSON string (OpenAI's shape); the caller points the tool messages at the new ids."""
    if not message.get("tool_calls"):
        return message
    calls = []
    for i, c in enumerate(message["tool_calls"]):
        fn = c.get("function", c)
        args = toolcalls.arguments_of(c)
        # JSON is written out again (a JSON string too: "\"hi\"" is not the text hi); only arguments
        # that are not JSON at all (a call cut short) come back as the very text, and stay as written
        not_json = isinstance(args, str) and args == fn.get("arguments")
        calls.append(
            {
                "id": new_call_id(rollout_id, start + i),
                "type": "function",
                "function": {
                    "name": fn["name"],
                    "arguments": args if not_json else json.dumps(args, ensure_ascii=False),
                },
            }
        )
    return {**message, "tool_calls": calls}


def _answered(events: list[StoredEvent], rid: str) -> tuple[ModelResponse, ModelRequest, list[ModelResponse]]:
    """The last model reply (a response with a `message` and no `error`: an error answer, an abandoned
    stream or a stream that broke off with an error event is none), the payload of the request it
    answers, and the replies recorded before that request (the turns its history may hold)."""
    replies = [i for i, e in enumerate(events) if isinstance(e, ModelResponse)
               and isinstance(e.message, dict) and e.error is None]
    if not replies:
        raise ValueError(f"rollout {rid} has no model reply recorded (its model call failed): "
                         f"no conversation to rebuild")
    reply = events[replies[-1]]
    assert isinstance(reply, ModelResponse)
    # a reply names its request (`request`: its seq) where a client may have several calls in flight;
    # one that does not (older stores, the tool-loop agent, which calls one at a time) answers the last
    # request before it
    asked = [(i, e) for i, e in enumerate(events[:replies[-1]]) if isinstance(e, ModelRequest)]
    if reply.request is not None:
        asked = [(i, e) for i, e in asked if e.seq == reply.request] or asked
    if not asked:
        raise ValueError(f"rollout {rid}: its last model reply answers no recorded request")
    at, request = asked[-1]
    return reply, request, [events[i] for i in replies if i < at]  # type: ignore[misc]


def _said(message: dict[str, Any], where: str) -> str:
    """What an assistant turn says, to compare a turn of a history with the model's replies: its text (parts
    joined, whitespace at either end aside) and its calls by name and arguments (ids aside; arguments
    parsed, since a client sends them back written its own way, as OpenClaw does)."""
    m = _message({**message, "role": "assistant"}, where)
    calls = [[(c.get("function") or c).get("name"), toolcalls.arguments_of(c)]
             for c in m.get("tool_calls") or []]
    return json.dumps([(m.get("content") or "").strip(), calls], sort_keys=True, ensure_ascii=False)


def _check_backed(history: list[dict[str, Any]], replies: list[ModelResponse], rid: str,
                  tool_loop: bool) -> None:
    """Raise ValueError (`unverified: ...`) unless each assistant turn of `history` (the messages the last
    request sent) is, in order, a reply the model gave in this attempt, each reply backing one turn. A
    client sends its own history: a turn it wrote itself (an invented call, an edited answer) must not be
    trained on as the model's, with the rollout's reward."""
    said: list[set[str]] = []
    for p in replies:
        options = [p.message] + [c["message"] for c in p.choices or []
                                 if isinstance(c, dict) and isinstance(c.get("message"), dict)]
        keys = set()
        for m in options:
            try:
                keys.add(_said(m, "a reply"))
                if tool_loop:  # the agent keeps a reply with its text calls moved into tool_calls
                    m = _normalise_assistant(_message({**m, "role": "assistant"}, "a reply"))
                    keys.add(_said(m, "a reply"))
            except Exception:  # a reply that cannot be read backs no turn
                continue
        said.append(keys)
    j = 0
    for i, m in enumerate(history):
        if m["role"] != "assistant":
            continue
        key = _said(m, f"rollout {rid}: messages[{i}]")
        while j < len(said) and key not in said[j]:
            j += 1
        if j == len(said):
            raise ValueError(f"rollout {rid}: unverified: messages[{i}] is an assistant turn that no reply of "
                             f"the model in this attempt backs (in order): the client wrote it, so it is not "
                             f"trained on")
        j += 1


def _checked(rid: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
    """Raise ValueError naming the rollout when its conversation has a shape no export holds (check_row's
    rules: an id or a name that is not text, a conversation that opens with the assistant, a tool spec that
    is not a function) or holds a chat control token as text: that one rollout is left out, instead of the
    export failing (Arrow) or training on turn markers nobody wrote."""
    problem = row_problem({"messages": messages, "tools": tools}, "sft")
    if problem:
        raise ValueError(f"rollout {rid}: {problem[0]}")
    found = find_control_token({"messages": messages, "tools": tools})
    if found:
        raise ValueError(f"rollout {rid}: control_tokens: {found[0]!r} in {found[1]}: a chat template would "
                         f"render it as a real turn marker")


def _strip(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the fields a chat dataset carries, in a stable order."""
    out = []
    for m in messages:
        row: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
        if m.get("tool_calls"):
            row["tool_calls"] = m["tool_calls"]
        if m["role"] == "tool":
            row["tool_call_id"] = m.get("tool_call_id")
            row["name"] = m.get("name")
        out.append(row)
    return out


def trajectory_from_events(
    rollout: dict[str, Any],
    events: list[StoredEvent],
    *,
    listing: tuple[list[dict], dict[str, str]] | None = None,
    style: PromptStyle | None = None,
    instruction: str | None = None,
) -> Trajectory:
    """The conversation of one rollout attempt. `listing` (tools, server instructions) is needed
    only for rollouts without model events; get it with `tool_listing(task)`."""
    style = style or PromptStyle()
    rid = rollout["id"]
    n_calls = sum(1 for e in events if isinstance(e, ToolCall))
    n_errors = sum(1 for e in events if isinstance(e, ToolResult) and e.is_error)
    n_errors += sum(1 for e in events if isinstance(e, ErrorEvent) and e.error_kind == "malformed_tool_call")
    requests = [e for e in events if isinstance(e, ModelRequest)]
    base = dict(
        rollout_id=rid,
        attempt=rollout.get("attempt", 0),
        task_id=rollout["task_id"],
        task_hash=rollout["task_hash"],
        n_tool_calls=n_calls,
        n_tool_errors=n_errors,
    )
    if requests:
        reply, asked, earlier = _answered(events, rid)
        assert reply.message is not None  # _answered picks a reply with a message
        if asked.messages is None:
            raise ValueError(f"rollout {rid}: the request its last reply answers records no messages: no "
                             f"conversation to rebuild")
        messages = [_message(m, f"rollout {rid}: messages[{i}]") for i, m in enumerate(asked.messages)]
        prefill = (asked.params or {}).get("continue_final_message")
        if prefill or (messages and messages[-1]["role"] == "assistant"):
            raise ValueError(f"rollout {rid}: unverified: its last request ends with an assistant turn for "
                             f"the model to go on from (a prefill, continue_final_message): the reply finishes "
                             f"a turn the client began, not one the model wrote whole")
        # the reply is the assistant's turn, whatever role (if any) its server wrote
        final = _message({**reply.message, "role": "assistant"}, f"rollout {rid}: the last reply")
        # only the tool-loop agent calls tools in text; another agent's prose that quotes a call
        # (`<tool_call>...`) did not make one
        messages.append(_normalise_assistant(final) if rollout.get("agent") == "tool-loop" else final)
        n = 0
        canon = []
        pending: list[tuple[Any, str]] = []  # (recorded id, exported id) of the last turn's unanswered calls
        for i, m in enumerate(messages):
            if m["role"] == "assistant":
                # an empty last reply is how the tool-loop agent's model ends its work (small models do)
                if not (m.get("content") or "").strip() and not m.get("tool_calls") and i < len(messages) - 1:
                    raise ValueError(f"rollout {rid}: messages[{i}] is an assistant turn with no content and "
                                     f"no tool calls: nothing to train on")
                recorded = [c.get("id") for c in m.get("tool_calls") or []]
                m = _canonical_calls(m, rid, n)
                pending = list(zip(recorded, [c["id"] for c in m.get("tool_calls") or []], strict=True))
                n += len(pending)
            elif m["role"] == "tool" and pending:
                # the call whose id it names (OpenAI pairs by id: results may come in any order); by
                # position where ids are missing or repeat
                match = next((p for p in pending if p[0] == m.get("tool_call_id")), pending[0])
                pending.remove(match)
                m = {**m, "tool_call_id": match[1]}
            canon.append(m)
        _check_backed(messages[:-1], earlier, rid, rollout.get("agent") == "tool-loop")
        names = [c["function"]["name"] for c in canon[-1].get("tool_calls") or []]
        if "finish" in names[:-1]:
            later = ", ".join(names[names.index("finish") + 1:])
            raise ValueError(f"rollout {rid}: its last reply calls {later} after finish, which ended the "
                             f"rollout: they never ran")
        messages, tools = _strip(canon), list(asked.tools or [])
        _checked(rid, messages, tools)
        # what a server (or a client of the proxy) reported: a count that is not an int counts as none
        counts = [(e.usage or {}).get("completion_tokens") for e in events if isinstance(e, ModelResponse)]
        tokens = sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool))
        return Trajectory(
            messages=messages,
            tools=tools,
            source="model",
            n_assistant_turns=sum(1 for m in canon if m["role"] == "assistant"),
            completion_tokens=tokens,
            **base,
        )
    if listing is None:
        raise ValueError(f"rollout {rid} has no model events: pass the task's tool listing to rebuild it")
    tools, instructions = listing
    tools = list(tools)
    offered = {t["function"]["name"] for t in tools}
    if style.finish_tool and "finish" not in offered:
        from clawsdk.models.prompt import FINISH_TOOL

        tools.append(FINISH_TOOL)
    system = [style.resolved_system_prompt().strip()]
    for server, text in instructions.items():
        system.append(f"## {server}\n{text.strip()}")
    messages = [
        {"role": "system", "content": "\n\n".join(system)},
        {"role": "user", "content": instruction or ""},
    ]
    if str(rollout.get("agent") or "").startswith(SERVED):
        # an external agent over `clawsdk serve` whose model calls were not recorded: its prompt was its own
        # runtime's, never the tool-loop agent's, so none is made up (`clawsdk serve --upstream` records it)
        messages = messages[1:]
    from clawsdk.models.prompt import truncate_middle

    n = 0
    for p, result in tool_calls_answered(events):
        call_id = new_call_id(rid, n)
        n += 1
        if p.tool is None:
            raise ValueError(f"rollout {rid}: the tool_call event at seq {p.seq} names no tool")
        args = p.args
        if isinstance(args, dict) and list(args) == ["unreadable"]:  # arguments a session could not read
            raise ValueError(f"rollout {rid}: the arguments of {p.tool} could not be read (recorded in "
                             f"outline: {str(args['unreadable'])[:80]}): not a call to train on")
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": p.tool,
                            "arguments": json.dumps(p.args or {}, ensure_ascii=False),
                        },
                    }
                ],
            }
        )
        if result is None:
            break
        text = truncate_middle(result.content or "", style.max_tool_output_chars)
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": p.tool,
                "content": f"error: {text}" if result.is_error else text,
            }
        )
    if style.finish_tool:
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": new_call_id(rid, n),
                        "type": "function",
                        "function": {
                            "name": "finish",
                            "arguments": json.dumps({"summary": style.finish_summary}),
                        },
                    }
                ],
            }
        )
    messages = _strip(messages)
    _checked(rid, messages, tools)
    return Trajectory(
        messages=messages,
        tools=tools,
        source="tools",
        n_assistant_turns=sum(1 for m in messages if m["role"] == "assistant"),
        **base,
    )


async def _list_tools(task: Any) -> tuple[list[dict], dict[str, str]]:
    from clawsdk.plugins import get_registry
    from clawsdk.runtime.rollout import list_tools

    specs, instructions = await list_tools(task, get_registry())
    return [s.openai() for s in specs], instructions


_LISTINGS: dict[str, tuple[list[dict], dict[str, str]]] = {}


def tool_listing(task: Any) -> tuple[list[dict], dict[str, str]]:
    """The OpenAI tool specs and server instructions an agent sees for `task` (cached per tool set)."""
    import anyio

    key = json.dumps(
        [task.tools, task.tool_policy.model_dump() if task.tool_policy else None], sort_keys=True
    )
    if key not in _LISTINGS:
        _LISTINGS[key] = anyio.run(_list_tools, task)
    return _LISTINGS[key]
