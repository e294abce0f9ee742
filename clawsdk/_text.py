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


def printable_data(value: Any) -> Any:
    """`printable` over the strings of JSON-like data: keys, values, nested lists and dicts."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_data(k): printable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_data(v) for v in value]
    return value
