"""clawsdk's one tool-call format, for models whose chat template has no tool section.

Hermes-style, as Qwen2.5 and Hermes 2 Pro write it. The tools go into the system prompt as
one JSON line each inside ``<tools></tools>``; the model calls a tool with

    <tool_call>
    {"name": "read", "arguments": {"path": "notes.md"}}
    </tool_call>

and reads the result in the next user turn inside ``<tool_response></tool_response>``.
The same rendering prompts models in rollouts (`render_messages`) and writes SFT examples
(`render_messages` / `assistant_text`), so a model trained on clawsdk data calls tools the
way clawsdk parses them (`parse_tool_calls`).
"""

from __future__ import annotations

import ast
import json
import math
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TOOL_CALL_OPEN", "TOOL_CALL_CLOSE", "TOOL_RESPONSE_OPEN", "TOOL_RESPONSE_CLOSE",
    "ParsedCall", "ParsedOutput", "compact_schema", "tools_system_prompt", "format_tool_call", "format_tool_response",
    "assistant_text", "render_messages", "parse_tool_calls", "openai_tool_calls", "arguments_of",
    "message_from_text", "FORMAT_REMINDER",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"

TOOLS_HEADER = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""

#: what a malformed call's error message tells the model to do instead
FORMAT_REMINDER = ('Call a tool as <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call> '
                   "with valid JSON.")

_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)(?:" + re.escape(TOOL_CALL_CLOSE) + r"|\Z)", re.DOTALL)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool) if tool.get("type", "function") == "function" else tool


def compact_schema(schema: Any) -> Any:
    """A JSON schema without the noise small models pay tokens for: pydantic's titles, and
    `anyOf [T, null]` for optional T."""
    if isinstance(schema, list):
        return [compact_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: compact_schema(prop) for name, prop in value.items()}
        elif key == "anyOf" and isinstance(value, list):
            kept = [v for v in value if v != {"type": "null"}]
            if len(kept) == 1 and isinstance(kept[0], dict):
                out.update(compact_schema(kept[0]))
            else:
                out[key] = compact_schema(value)
        elif key == "description" and isinstance(value, str):
            out[key] = " ".join(value.split())
        else:
            out[key] = compact_schema(value)
    return out


def tools_system_prompt(tools: list[dict[str, Any]]) -> str:
    """The system-prompt section that offers `tools` (OpenAI function specs), one JSON line each."""
    lines = []
    for tool in tools:
        fn = _function(tool)
        lines.append(_dumps({"type": "function", "function": {
            "name": fn["name"], "description": " ".join(str(fn.get("description") or "").split()),
            "parameters": compact_schema(fn.get("parameters") or {"type": "object", "properties": {}})}}))
    return TOOLS_HEADER.format(tools="\n".join(lines))


def arguments_of(call: dict[str, Any]) -> Any:
    """The arguments of an OpenAI-shaped tool call as a value (they travel as a JSON string)."""
    fn = call.get("function", call)
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except (json.JSONDecodeError, RecursionError):  # the tool answers that they are not an object
            return args
    return {} if args is None else args


def format_tool_call(name: str, arguments: Any) -> str:
    return f'{TOOL_CALL_OPEN}\n{_dumps({"name": name, "arguments": arguments})}\n{TOOL_CALL_CLOSE}'


def format_tool_response(content: str) -> str:
    return f"{TOOL_RESPONSE_OPEN}\n{content}\n{TOOL_RESPONSE_CLOSE}"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def assistant_text(message: dict[str, Any]) -> str:
    """An assistant message exactly as the model writes it: its text, then its tool calls."""
    parts = [_text(message.get("content")).strip()]
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call)
        parts.append(format_tool_call(fn["name"], arguments_of(call)))
    return "\n".join(p for p in parts if p)


def render_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
                    ) -> list[dict[str, str]]:
    """OpenAI-shaped messages -> plain system/user/assistant text messages in clawsdk's format.

    The tools section is appended to the system message (one is added if there is none);
    assistant tool calls become <tool_call> blocks; consecutive tool results become one user
    turn of <tool_response> blocks. Feed the result to any chat template.
    """
    out: list[dict[str, str]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            block = format_tool_response(_text(m.get("content")))
            if out and out[-1]["role"] == "user" and out[-1].get("_tool"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool": True})  # type: ignore[dict-item]
        elif role == "assistant":
            out.append({"role": "assistant", "content": assistant_text(m)})
        else:
            out.append({"role": role or "user", "content": _text(m.get("content"))})
    if tools:
        section = tools_system_prompt(tools)
        if out and out[0]["role"] == "system":
            out[0]["content"] = (out[0]["content"].rstrip() + "\n\n" + section).lstrip()
        else:
            out.insert(0, {"role": "system", "content": section})
    for m in out:
        m.pop("_tool", None)
    return out


@dataclass
class ParsedCall:
    name: str
    arguments: dict[str, Any]
    raw: str


@dataclass
class ParsedOutput:
    """A model's text split into its answer text, the calls it made and the calls that failed to parse."""

    content: str
    calls: list[ParsedCall] = field(default_factory=list)
    #: (raw text of the block, what is wrong with it)
    errors: list[tuple[str, str]] = field(default_factory=list)


def _loads_lenient(text: str) -> Any:
    """JSON, else JSON with trailing text or trailing commas, else a Python literal (single quotes);
    ValueError if none of them reads it."""
    try:
        return _loads_any(text)
    except RecursionError:  # a model that repeats "[" a few thousand times: its malformed call, not a crash
        raise ValueError("nested too deep to read (brackets inside brackets, over a thousand levels)") from None


def _loads_any(text: str) -> Any:
    text = text.strip()
    fence = _FENCE.match(text)
    if fence:
        text = fence.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        error = first
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        candidate = text[start:]
        try:
            value, _ = json.JSONDecoder().raw_decode(candidate)
            return value
        except json.JSONDecodeError:
            pass
        try:
            return json.loads(_TRAILING_COMMA.sub(r"\1", candidate))
        except json.JSONDecodeError:
            pass
        try:
            value = ast.literal_eval(candidate)
            if isinstance(value, (dict, list)):
                return value
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    raise ValueError(f"not valid JSON ({error.msg} at line {error.lineno} column {error.colno})")


def _non_finite(value: Any) -> float | None:
    """The first NaN or Infinity in `value`: JSON has neither, yet Python's json reads both (1e999 as inf)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _call_of(obj: Any, raw: str) -> ParsedCall:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object with \"name\" and \"arguments\", got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError('the call has no "name" (a string naming the tool)')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            raise ValueError(f'"arguments" of {name!r} is a string that is not valid JSON ({e.msg})') from None
        except RecursionError:
            raise ValueError(f'"arguments" of {name!r} are nested too deep to read') from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ValueError(f'"arguments" of {name!r} must be a JSON object, got {type(args).__name__}')
    bad = _non_finite(args)
    if bad is not None:
        raise ValueError(f'"arguments" of {name!r} hold {bad!r}, which is not a finite number '
                         "(JSON has no NaN or Infinity)")
    return ParsedCall(name=name.strip(), arguments=args, raw=raw)


def parse_tool_calls(text: str) -> ParsedOutput:
    """Split model output into answer text, tool calls and malformed calls. Never raises.

    Lenient where the intent is clear: an unclosed last block (generation cut at the stop
    string), code fences, trailing commas, single-quoted Python-style dicts, "parameters"
    for "arguments", an OpenAI {"function": {...}} wrapper, a list of calls in one block,
    and a bare JSON call with no tags when it is the whole output.
    """
    text = text or ""
    out = ParsedOutput(content="")
    blocks = list(_BLOCK.finditer(text))
    if not blocks:
        stripped = text.strip()
        if stripped.startswith(("{", "```")) and '"name"' in stripped:
            try:
                out.calls.append(_call_of(_loads_lenient(stripped), stripped))
                return out
            except ValueError:
                pass
        out.content = stripped
        return out
    kept, pos = [], 0
    for block in blocks:
        kept.append(text[pos:block.start()])
        pos = block.end()
        raw = block.group(1)
        try:
            value = _loads_lenient(raw)
            items = value if isinstance(value, list) and value else [value]
            for item in items:
                out.calls.append(_call_of(item, raw.strip()))
        except ValueError as e:
            out.errors.append((block.group(0).strip(), str(e)))
    kept.append(text[pos:])
    out.content = "".join(kept).replace(TOOL_CALL_CLOSE, "").strip()
    return out


def openai_tool_calls(calls: list[ParsedCall]) -> list[dict[str, Any]]:
    """Parsed calls in OpenAI's message shape (arguments as a JSON string), with fresh ids."""
    return [{"id": "call_" + secrets.token_hex(6), "type": "function",
             "function": {"name": c.name, "arguments": _dumps(c.arguments)}} for c in calls]


def message_from_text(text: str) -> dict[str, Any]:
    """The assistant message for raw model output: parsed calls become tool_calls.

    Malformed blocks stay in the content, so whoever reads the message (the tool-loop agent)
    finds them with `parse_tool_calls` and answers them with an error.
    """
    parsed = parse_tool_calls(text)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    content = parsed.content
    if parsed.errors:
        content = "\n".join(p for p in [content] + [raw for raw, _ in parsed.errors] if p)
    message["content"] = content or None
    if parsed.calls:
        message["tool_calls"] = openai_tool_calls(parsed.calls)
    return message
