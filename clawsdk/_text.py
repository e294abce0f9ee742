"""Text every consumer can encode. Python reads a byte of a file name that is not UTF-8 back as a lone
surrogate (os.fsdecode), and a model can write one as "\\udcff" in its JSON. No UTF-8 encoder takes it:
kept, it made the store refuse a write (and end the run), a judge or model request fail to send, and an
MCP result fail to serialize. Each becomes U+FFFD where text leaves for one of them."""

from __future__ import annotations

import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(value: str | None) -> str | None:
    """`value` with each lone surrogate as U+FFFD (ASCII text returns as it is, at once)."""
    return _LONE_SURROGATE.sub("\ufffd", value) if value and not value.isascii() else value


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
