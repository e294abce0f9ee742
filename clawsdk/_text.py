"""Text every consumer can encode. Python reads a byte of a file name that is not UTF-8 back as a lone
surrogate (os.fsdecode), and a model can write one as "\\udcff" in its JSON. No UTF-8 encoder takes it:
kept, it made the store refuse a write (and end the run), a judge or model request fail to send, and an
MCP result fail to serialize. Each becomes U+FFFD where text leaves for one of them."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, overload

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@overload
def printable(value: str) -> str: ...
@overload
def printable(value: None) -> None: ...
def printable(value: str | None) -> str | None:
    """`value` with each lone surrogate as U+FFFD (ASCII text returns as it is, at once)."""
    return _LONE_SURROGATE.sub("\ufffd", value) if value and not value.isascii() else value


def short(e: BaseException, limit: int = 300) -> str:
    """An error as one line of at most `limit` characters (and an ellipsis), for a run's or a rollout's reason."""
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit] + "…"


def rounded(value: float, digits: int, scale: float = 1.0) -> str:
    """`value * scale` to `digits` decimals, never shown as the top (`scale`) or 0 when it is not: 0.996 read
    1.00 beside 99/100 passed, and 1,999 of 2,000 read 100.0."""
    text = f"{value * scale:.{digits}f}"
    step = 10.0 ** -digits
    if value < 1 and float(text) >= scale:
        return f">{scale - step:.{digits}f}"
    if value > 0 and float(text) == 0:
        return f"<{step:.{digits}f}"
    return text


def printable_data(value: Any) -> Any:
    """`printable` over the strings of JSON-like data: keys, values, nested lists and dicts."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_data(k): printable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_data(v) for v in value]
    return value


# Text for a terminal (`clawsdk show`, the TUI).
# C0 controls (ESC starts sequences that clear the screen or, with OSC 52, write the clipboard; CR and
# BS overwrite what is shown), DEL, C1 controls (0x9b is a CSI on its own) and lone surrogates (they
# cannot be encoded). C0 and DEL show as their control pictures (␛ ␇ ␍ ␡), the others as U+FFFD.
# Rich and Textual strip only BEL, BS, VT, FF and CR, and let ESC through.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_PICTURES = {
    **{c: 0x2400 + c for c in range(0x20)},
    0x7F: 0x2421,
    **{c: 0xFFFD for c in [*range(0x80, 0xA0), *range(0xD800, 0xE000)]},
}
_PICTURES_BUT_LINES = {c: v for c, v in _PICTURES.items() if c not in (0x09, 0x0A)}
JSON_RAW = re.compile(r"[\x7f-\x9f\ud800-\udfff]")  # what json.dumps(ensure_ascii=False) leaves raw


def clean(text: str, *, lines: bool = False) -> str:
    """`text` with no control character left: one line (a cell, a head), or with `lines` its newlines and
    tabs kept (a body; CRLF read as a newline). Otherwise each character stays one character."""
    if not _UNPRINTABLE.search(text):
        return text
    if lines:
        return text.replace("\r\n", "\n").translate(_PICTURES_BUT_LINES)
    return text.translate(_PICTURES)


_LEXERS = {
    ".py": "python",
    ".json": "json",
    ".jsonl": "json",
    ".sh": "bash",
    ".bash": "bash",
    ".md": "markdown",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".csv": "text",
    ".html": "html",
    ".js": "javascript",
    ".ts": "typescript",
    ".sql": "sql",
    ".xml": "xml",
    ".ini": "ini",
    ".txt": "text",
    ".log": "text",
}


def lexer_for(path: str | None) -> str | None:
    """The highlighter of a file by its name (`text` or None: plain)."""
    if not path:
        return None
    return _LEXERS.get(PurePosixPath(str(path)).suffix.lower())
