"""How one event looks: a one-line head and an optional body.

Bodies are highlighted by what they are (JSON, shell, the file type a tool read or wrote,
markdown from a model) with Textual's theme-aware highlighter, and long ones are folded by the
widget that shows them.

Every string here comes from the store, so from an agent, a model, a task file: it goes into Rich `Text`
and Textual `Content` as text, never as markup (`[@click=app.quit]` would be a live action, a stray `[/]`
an exception), and through `clean` first, so no control character reaches the terminal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.content import Content
from textual.highlight import highlight

from clawsdk._text import JSON_RAW as _JSON_RAW
from clawsdk._text import clean, lexer_for  # the TUI's names for them

FOLD_LINES = 12  # bodies longer than this start folded
MAX_BODY_CHARS = 20_000  # beyond this a body is cut; the full JSON view has everything
MAX_NAME_CHARS = 120  # a name or a one-line message in a head line; longer ones are cut

def clean_data(value: Any) -> Any:
    """`clean(..., lines=True)` over the strings of JSON-like data: keys, values, nested lists and dicts."""
    if isinstance(value, str):
        return clean(value, lines=True)
    if isinstance(value, dict):
        return {clean_data(k): clean_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_data(v) for v in value]
    return value


def json_text(value: Any, indent: int | None = None) -> str:
    """JSON as json.dumps writes it, with DEL, C1 controls and lone surrogates, which it leaves raw, as \\u
    escapes: the same JSON, safe to show."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def name(value: Any) -> str:
    """A name from the store for a head line: one line, cut."""
    text = clean(str(value))
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


@dataclass
class EventView:
    head: Text
    body: Content | None = None
    body_lines: int = 0
    summary: str = ""  # the first line of a folded body

    @property
    def foldable(self) -> bool:
        return self.body_lines > FOLD_LINES


def _cut(text: str) -> str:
    if len(text) <= MAX_BODY_CHARS:
        return text
    return text[:MAX_BODY_CHARS] + f"\n… {len(text) - MAX_BODY_CHARS:,} more characters (j: full JSON)"


def code(text: str, lexer: str | None) -> tuple[Content, int]:
    text = clean(_cut(text.rstrip("\n")), lines=True)
    lines = text.count("\n") + 1 if text else 0
    if lexer and lexer != "text":
        return highlight(text, language=lexer), lines
    return Content(text), lines


def group(*parts: Content) -> Content:
    return Content("\n").join(parts)


def as_json(value: Any) -> tuple[Content, int]:
    return code(json_text(value, indent=2), "json")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return clean(line.strip()[:100])
    return ""


def _dur(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"  {ms / 1000:.2f} s" if ms >= 1000 else f"  {ms:.1f} ms"


def _view(head: Text, body: Content | None, lines: int, summary: str) -> EventView:
    return EventView(head=head, body=body, body_lines=lines, summary=summary)


def _args_body(tool: str, args: Any) -> tuple[Content | None, int, str]:
    """Arguments as JSON, with the one long string argument (a command, a file's content) highlighted."""
    if not isinstance(args, dict) or not args:
        return None, 0, ""
    if "command" in args and isinstance(args["command"], str):
        body, n = code(args["command"], "bash")
        return body, n, _first_line(args["command"])
    if "content" in args and isinstance(args["content"], str):
        rest = {k: v for k, v in args.items() if k != "content"}
        syn, n = code(args["content"], lexer_for(args.get("path")))
        return (
            group(Content.styled(json_text(rest), "$text-muted"), syn),
            n + 1,
            _first_line(args["content"]),
        )
    body, n = as_json(args)
    return body, n, json_text(args)[:100]


FILE_READERS = ("read", "read_file", "cat", "view")


def _result_body(tool: str, content: Any, call_args: dict | None) -> tuple[Content | None, int, str]:
    if content in (None, ""):
        return None, 0, ""
    if not isinstance(content, str):
        body, n = as_json(content)
        return body, n, json_text(content)[:100]
    stripped = content.strip()
    if stripped[:1] in "{[":
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and {"exit_code", "stdout"} <= parsed.keys():
            return _exec_body(parsed)
        if parsed is not None:
            body, n = as_json(parsed)
            return body, n, _first_line(stripped)
    # Only a read returns a file's text; other tools answer in prose.
    path = (call_args or {}).get("path") if tool in FILE_READERS else None
    body, n = code(content, lexer_for(path))
    return body, n, _first_line(content)


def _exec_body(p: dict) -> tuple[Content | None, int, str]:
    parts: list[Content] = []
    lines = 0
    for stream, style in (("stdout", ""), ("stderr", "$text-error")):
        text = str(p.get(stream) or "").rstrip("\n")
        if text:
            text = clean(_cut(text), lines=True)
            parts.append(Content.styled(text, style) if style else Content(text))
            lines += text.count("\n") + 1
    if not parts:
        return None, 0, ""
    return group(*parts), lines, _first_line(str(p.get("stdout") or p.get("stderr") or ""))


def render_event(e: dict, call_args: dict | None = None) -> EventView:
    """One event; `call_args` are the arguments of the tool call a result answers (for its file type)."""
    try:
        return _render_event(e, call_args)
    except (AttributeError, TypeError, ValueError, LookupError):  # a payload of another shape: its JSON
        p = clean_data(e.get("payload"))
        head = Text.assemble((f"{e['seq']:>4} ", "dim"), (name(e["kind"]), "bold"))
        body, n = as_json(p)
        return _view(head, body, n, json_text(p)[:100])


def _render_event(e: dict, call_args: dict | None) -> EventView:
    p = clean_data(e.get("payload") or {})  # what a head line shows; bodies are cleaned again once parsed
    kind = e["kind"]
    head = Text.assemble((f"{e['seq']:>4} ", "dim"))
    dur = _dur(e.get("duration_ms"))
    if kind == "tool_call":
        head.append(f"→ {name(p.get('tool'))}", style="bold cyan")
        body, n, summary = _args_body(str(p.get("tool")), p.get("args"))
        if n <= 1 and isinstance(p.get("args"), dict):
            head.append(" " + json_text(p.get("args"))[:160], style="dim")
            return _view(head, None, 0, "")
        return _view(head, body, n, summary)
    if kind == "tool_result":
        if p.get("is_error"):
            head.append(f"✗ {name(p.get('tool'))}", style="bold red")
        else:
            head.append(f"← {name(p.get('tool'))}", style="green")
        head.append(dur, style="dim")
        body, n, summary = _result_body(str(p.get("tool")), p.get("content"), call_args)
        return _view(head, body, n, summary)
    if kind == "model_request":
        msgs = p.get("messages") or []
        last = msgs[-1] if msgs else {}
        head.append("model request", style="magenta")
        head.append(f"  {len(msgs)} messages; last from {name(last.get('role', '?'))}", style="dim")
        text = (
            last.get("content") if isinstance(last.get("content"), str) else json.dumps(last.get("content"))
        )
        if not text:
            return _view(head, None, 0, "")
        body, n = code(text, None)
        return _view(head, body, n, _first_line(text))
    if kind == "model_response":
        msg = p.get("message") or {}
        head.append("model", style="bold magenta")
        usage = p.get("usage") or {}
        if usage:
            tokens = f"{name(usage.get('prompt_tokens', '?'))}→{name(usage.get('completion_tokens', '?'))}"
            head.append(f"  {tokens} tokens", style="dim")
        head.append(dur, style="dim")
        parts: list[Content] = []
        lines = 0
        text = msg.get("content") or ""
        if isinstance(text, str) and text.strip():
            md, n = code(text, "markdown")
            parts.append(md)
            lines += n
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", call)
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            parts.append(Content.styled(f"tool call {name(fn.get('name'))}", "$text-accent"))
            syn, n = as_json(args) if not isinstance(args, str) else code(args, None)
            parts.append(syn)
            lines += n + 1
        summary = (
            _first_line(text) if isinstance(text, str) and text.strip() else f"{len(parts) // 2} tool call(s)"
        )
        return _view(head, group(*parts) if parts else None, lines, summary)
    if kind == "verifier":
        score = p.get("score")
        style = "green" if isinstance(score, (int, float)) and score >= 1 else "yellow"
        head.append("check ", style="bold yellow")
        head.append(f"{name(p.get('check'))}: ", style="yellow")
        head.append(name(score), style=style)
        detail = str(p.get("detail") or "")
        if "\n" not in detail and len(detail) < 120:
            head.append(f"  {detail}", style="dim")
            return _view(head, None, 0, "")
        body, n = code(detail, None)
        return _view(head, body, n, _first_line(detail))
    if kind == "sandbox_exec":
        head.append("exec ", style="bold yellow")
        head.append(_first_line(str(p.get("command")))[:120])
        code_ = p.get("exit_code")
        head.append(f"  → exit {name(code_)}", style="green" if code_ == 0 else "red")
        head.append(dur, style="dim")
        body, n, summary = _exec_body(p)
        return _view(head, body, n, summary)
    if kind == "error":
        head.append(f"error ({name(p.get('kind'))}) ", style="bold red")
        message = str(p.get("message") or "")
        if "\n" not in message and len(message) <= MAX_NAME_CHARS:
            head.append(message, style="red")
            return _view(head, None, 0, "")
        body, n = code(message, None)
        return _view(head, body, n, _first_line(message))
    head.append(name(kind), style="bold")
    body, n = as_json(p)
    return _view(head, body, n, json_text(p)[:100])


def verdict_table(verdict: dict) -> Table:
    table = Table(
        title=Text(
            f"verdict ({name(verdict['verifier'])}): score {verdict['score']:.2f}, "
            f"{'passed' if verdict['passed'] else 'failed'}"
        ),
        title_justify="left",
        expand=True,
    )
    table.add_column("check")
    table.add_column("score", justify="right")
    table.add_column("weight", justify="right")
    table.add_column("detail", ratio=1)
    for s in verdict.get("subscores") or []:
        style = "green" if s["score"] >= 1 else ("yellow" if s["score"] > 0 else "red")
        table.add_row(
            Text(name(s["name"])),
            Text(f"{s['score']:.2f}", style=style),
            f"{s['weight']:g}",
            Text(clean((s.get("detail") or "")[:200], lines=True)),
        )
    return table
