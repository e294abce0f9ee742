"""How `clawsdk show` prints one event: a head line, then what it carried as text.

A file the agent wrote is shown as that file (highlighted by its name), an edit as a diff, a command as a
shell line and its output as lines, a model's answer as its text, a note or unknown payload as indented
JSON: never as one line of escaped JSON. Everything comes from the store, so from an agent, a model or a task
file: it goes into Rich as `Text` and `Syntax`, never as markup, and through `clean` first, so no control
character reaches the terminal. `--json` gives the data as it is.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.text import Text

from clawsdk._text import clean, lexer_for
from clawsdk.store.events import (
    ErrorEvent,
    ModelRequest,
    ModelResponse,
    SandboxExec,
    StoredEvent,
    ToolCall,
    ToolResult,
    Unreadable,
    VerifierScore,
)

FOLD = 20  # lines a body shows without --full
MAX_CHARS = 200_000  # a body past this is cut even with --full (the JSON has it whole)


def _fold(text: str, full: bool) -> tuple[str, int]:
    """`text` cut to FOLD lines (all with `full`); and how many lines were left out."""
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS]
    lines = text.splitlines()
    if full or len(lines) <= FOLD:
        return text, 0
    return "\n".join(lines[:FOLD]), len(lines) - FOLD


def body(text: Any, full: bool, lexer: str | None = None) -> RenderableType:
    """A block of text from the store, indented under its head: highlighted when `lexer` names a language."""
    shown, more = _fold(clean(str(text).rstrip("\n"), lines=True), full)
    if lexer and lexer != "text":
        # as wide as its longest line: a pipe's console is wide, and Syntax pads every line to its width
        width = max((len(line) for line in shown.splitlines()), default=1) + 1
        block: RenderableType = Syntax(shown, lexer, theme="ansi_dark", background_color="default",
                                       word_wrap=True, code_width=width)
    else:
        block = Text(shown)
    if more:
        block = Group(block, Text(f"… {more} more lines (--full shows all)", style="dim"))
    return Padding(block, (0, 0, 0, 6), expand=False)


def command_output(content: str, full: bool) -> list[RenderableType] | None:
    """A command's result (the exec tool's `{exit_code, stdout, stderr, ...}`) as its output lines; None when
    `content` is not one."""
    if not content.startswith("{") or '"stdout"' not in content:
        return None
    try:
        result = json.loads(content)
    except ValueError:
        return None
    if not isinstance(result, dict) or not ({"stdout", "stderr"} & set(result)):
        return None
    out: list[RenderableType] = []
    notes = [f"exit {result['exit_code']}" if result.get("exit_code") is not None else "",
             "timed out" if result.get("timed_out") else "", "output cut" if result.get("truncated") else "",
             f"session {result['sessionId']} ({result.get('status')})" if result.get("sessionId") else ""]
    if line := ", ".join(n for n in notes if n):
        out.append(Padding(Text(clean(line), style="dim"), (0, 0, 0, 6), expand=False))
    for stream in ("stdout", "stderr"):
        if result.get(stream):
            if stream == "stderr":
                out.append(Padding(Text("stderr", style="dim"), (0, 0, 0, 6), expand=False))
            out.append(body(result[stream], full))
    return out


def diff(path: str, old: str, new: str, full: bool) -> RenderableType:
    lines = difflib.unified_diff(str(old).splitlines(), str(new).splitlines(), f"a/{path}", f"b/{path}",
                                 lineterm="", n=2)
    return body("\n".join(lines), full, "diff")


def _head(e: StoredEvent, *parts: tuple[str, str]) -> Text:
    head = Text(f"{e.seq:>4} ", style="dim")
    for text, style in parts:
        head.append(clean(text), style=style)
    if e.duration_ms is not None:
        head.append(f"  {e.duration_ms:.1f} ms", style="dim")
    return head


def _args_line(args: dict, skip: tuple[str, ...] = ()) -> str:
    """Short arguments as `key=value`; the long ones are shown as blocks below."""
    out = []
    for k, v in args.items():
        if k in skip:
            continue
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        out.append(f"{k}={text}" if "\n" not in text and len(text) <= 120 else f"{k}=…")
    return " ".join(out)


def tool_call(tool: str, args: Any, full: bool) -> list[RenderableType]:
    """What a tool call asked for, as text: the file it writes, the diff an edit makes, the command it
    runs."""
    if not isinstance(args, dict):
        return [body(json.dumps(args, ensure_ascii=False, indent=2), full, "json")]
    path = str(args.get("path") or "")
    if tool == "write" and isinstance(args.get("content"), str):
        return [body(args["content"], full, lexer_for(path) or "text")]
    if tool == "edit" and isinstance(args.get("old_text"), str) and isinstance(args.get("new_text"), str):
        return [diff(path, args["old_text"], args["new_text"], full)]
    if tool == "apply_patch" and isinstance(args.get("input"), str):
        return [body(args["input"], full, "diff")]
    if tool in ("exec", "bash", "shell") and isinstance(args.get("command"), str):
        return [body("$ " + args["command"], full, "bash")]
    long = {k: v for k, v in args.items() if isinstance(v, str) and ("\n" in v or len(v) > 120)}
    return [body(v, full, lexer_for(path) if k == "content" else None) for k, v in long.items()]


def render_event(e: StoredEvent, full: bool, calls: dict[int, ToolCall]) -> list[RenderableType]:
    """One event as printed: its head, then its body. `calls` maps a tool call's seq to its event, so a
    result is shown as what it is (a file read is highlighted as that file)."""
    if isinstance(e, Unreadable):
        return [_head(e, (e.kind, ""), (f" (unreadable: {e.problem})", "red")), body(str(e.raw), full)]
    if isinstance(e, ToolCall):
        tool, args = str(e.tool), e.args if e.args is not None else {}
        line = _args_line(args, ("content", "old_text", "new_text", "input", "command")) \
            if isinstance(args, dict) else ""
        return [_head(e, (f"→ {tool}", "bold cyan"), (f" {line}" if line else "", "")),
                *tool_call(tool, args, full)]
    if isinstance(e, ToolResult):
        call = calls.get(e.call) if isinstance(e.call, int) else None
        failed = bool(e.is_error)
        path = call.args.get("path") if call is not None and isinstance(call.args, dict) else None
        lexer = lexer_for(path) if call is not None and call.tool == "read" and not failed else None
        content = e.content if e.content is not None else ""
        mark = ("✗ ", "red") if failed else ("← ", "green")
        head = _head(e, mark, (str(e.tool), ""))
        if not isinstance(content, str):
            return [head, body(json.dumps(content, ensure_ascii=False, indent=2), full, "json")]
        return [head, *(command_output(content, full) or [body(content, full, lexer)])]
    if isinstance(e, ModelRequest):
        msgs = e.messages or []
        last = msgs[-1] if msgs and isinstance(msgs[-1], dict) else {}
        return [_head(e, ("model request", "magenta"),
                      (f" ({len(msgs)} messages; last: {last.get('role', '')})", "dim"))]
    if isinstance(e, ModelResponse):
        msg = e.message if isinstance(e.message, dict) else {}
        out: list[RenderableType] = [_head(e, ("model", "magenta"))]
        if msg.get("content"):
            out.append(body(msg["content"], full, "markdown"))
        for c in msg.get("tool_calls") or []:
            fn = c.get("function", c) if isinstance(c, dict) else {}
            name, raw = str(fn.get("name")), fn.get("arguments")
            try:
                args = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                args = raw
            line = _args_line(args, ("content", "old_text", "new_text", "input", "command")) \
                if isinstance(args, dict) else ""
            out.append(Padding(Text.assemble(("tool call ", "magenta"), clean(name), (f" {clean(line)}", "")),
                               (0, 0, 0, 2)))
            out += tool_call(name, args, full) if isinstance(args, (dict, list)) else [body(str(raw), full)]
        return out
    if isinstance(e, VerifierScore):
        detail = e.detail if isinstance(e.detail, str) else json.dumps(e.detail, ensure_ascii=False)
        return [_head(e, ("check ", "yellow"), (f"{e.check}: {e.score}", "")),
                *([body(detail, full)] if detail and detail != "null" else [])]
    if isinstance(e, SandboxExec):
        out = [_head(e, ("exec", "yellow"), (f" → exit {e.exit_code}", "")),
               body("$ " + str(e.command or e.harness or ""), full, "bash")]
        for name, text in (("stdout", e.stdout), ("stderr", e.stderr)):
            if text:
                out.append(Padding(Text(name, style="dim"), (0, 0, 0, 6)))
                out.append(body(text, full))
        return out
    if isinstance(e, ErrorEvent):
        return [_head(e, (f"error ({e.error_kind})", "red")), body(str(e.message), full)]
    return [_head(e, (e.kind, "")), body(json.dumps(e.payload(), ensure_ascii=False, indent=2), full, "json")]
