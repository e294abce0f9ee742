"""The shape of an exported row (SFT, preference, RL): what `export` writes, what `trajectory` leaves out and
what a trainer checks before it loads a model."""

from __future__ import annotations

from typing import Any

from clawsdk.data.tokenize import find_control_token

#: per kind, the row fields that hold messages, and the other fields a trainer needs
_ROW_SHAPE = {
    "sft": (("messages",), ()),
    "preference": (("prompt", "chosen", "rejected"), ()),
    "rl": (("prompt",), ("task_hash",)),
}


def check_row(row: Any, kind: str, where: str) -> None:
    """Raise ValueError naming `where` (file:line) and the field when a row is not the shape `kind` exports, or
    holds a chat control token as text: a damaged or hand-made file is caught before a trainer loads a model, not
    as a crash deep inside it (or as turn markers trained on)."""
    problem = row_problem(row, kind)
    if problem:
        what, fix = problem
        raise ValueError(f"{where}: {what}; " + (f"{fix}: fix the row or {REDO}" if fix else REDO))
    found = find_control_token(row)
    if found:
        raise ValueError(f"{where}: {found[1]}: holds the chat control token {found[0]!r}, which a chat template "
                         f"would render as a real turn marker; fix the row or {REDO}")


def row_problem(row: Any, kind: str) -> tuple[str, str] | None:
    """What is wrong with the shape of a row of an export of `kind`: (`field: why`, a hint on the right shape or
    ""), or None. `trajectory_from_events` checks each conversation with it, so one rollout of a hostile shape is
    left out instead of failing the export (Arrow) or the training run (the chat template) for all."""
    if not isinstance(row, dict):
        return f"a row is a JSON object, not a {type(row).__name__}", ""
    lists, texts = _ROW_SHAPE.get(kind, ((), ()))
    for key in texts:
        if not isinstance(row.get(key), str):
            return f"{key}: missing or not a string", ""
    for key in lists:
        messages = row.get(key)
        if not isinstance(messages, list) or not messages:
            what = "missing" if messages is None else f"a {type(messages).__name__}"
            return f"{key}: {what}, not a list of chat messages", ""
        opened = key not in ("messages", "prompt")  # a conversation opens with the user (after any system prompt)
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                return f"{key}[{i}]: not a message (an object with a 'role')", ""
            if not opened and m["role"] != "system":
                if m["role"] != "user":
                    why = "where the conversation's first turn must be the user's"
                    return f"{key}[{i}]: role {m['role']!r} {why}", ""
                opened = True
            if m.get("content") is not None and not isinstance(m["content"], str):
                return f"{key}[{i}].content: not text", ""
            for field, what in (("tool_call_id", "an id"), ("name", "a tool name")):
                if m.get(field) is not None and (not isinstance(m[field], str) or not m[field].strip()):
                    return f"{key}[{i}].{field}: {m[field]!r} is not {what}", ""
            if m.get("tool_calls") is not None and not isinstance(m["tool_calls"], list):
                return f"{key}[{i}].tool_calls: not a list", ""
            for j, call in enumerate(m.get("tool_calls") or []):
                problem = _call_problem(call)
                if problem:
                    return f"{key}[{i}].tool_calls[{j}]{problem}", _CALL_SHAPE
    tools = row.get("tools")
    if tools is not None and not isinstance(tools, list):
        return f"tools: a {type(tools).__name__}, not a list of function specs", ""
    for i, tool in enumerate(tools or []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if (not isinstance(fn, dict) or not isinstance(name, str) or not name.strip()
                or tool.get("type", "function") != "function"
                or not isinstance(fn.get("parameters") or {}, dict)):
            return f"tools[{i}]: not a function spec", _TOOL_SHAPE
    return None


REDO = "export the dataset again with `clawsdk data export`"
_CALL_SHAPE = 'a tool call is {"type": "function", "function": {"name": TOOL, "arguments": an object or its JSON text}}'
_TOOL_SHAPE = 'a tool is {"type": "function", "function": {"name": TOOL, "parameters": a JSON schema object}}'


def _call_problem(call: Any) -> str | None:
    """What is wrong with one tool call of a row (`.field: why`), or None. A hand-edited call without a name
    failed deep inside the chat template after the model loaded; arguments that were a list trained as is.
    Arguments may be an object, text (JSON, or a call cut short, exported as written) or absent."""
    if not isinstance(call, dict):
        return f": a {type(call).__name__}, not a tool call"
    fn = call.get("function")
    if not isinstance(fn, dict):
        return ".function: missing or not an object"
    if not isinstance(fn.get("name"), str) or not fn["name"].strip():
        return f".function.name: missing or not a tool name ({fn.get('name')!r})"
    args = fn.get("arguments")
    if args is not None and not isinstance(args, (dict, str)):
        return f".function.arguments: a {type(args).__name__}, not a JSON object or a JSON string"
    if call.get("id") is not None and (not isinstance(call["id"], str) or not call["id"].strip()):
        return f".id: {call['id']!r} is not an id"
    return None
