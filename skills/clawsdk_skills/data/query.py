"""A small JSONPath-like language: .key ["key"] [0] [*] .* [?field OP value]."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


class QueryError(ValueError):
    pass


@dataclass(frozen=True)
class Step:
    kind: str  # key | index | all | filter
    key: Any = None
    field: str | None = None
    op: str | None = None
    value: Any = None


TOKEN = re.compile(
    r"""\s*(?:
      \.(?P<dotkey>[A-Za-z_$][\w$-]*) |
      \.\*(?P<dotall>) |
      \[\s*\*\s*\](?P<all>) |
      \[\s*(?P<index>-?\d+)\s*\] |
      \[\s*(?P<q>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*\] |
      \[\s*\?\s*@?\.?(?P<ffield>[\w$-]+(?:\.[\w$-]+)*)\s*(?P<fop>==|!=|<=|>=|<|>)\s*(?P<fval>[^\]]+?)\s*\]
    )""",
    re.VERBOSE,
)


def parse_query(query: str) -> list[Step]:
    q = query.strip()
    if q in ("", "$", "."):
        return []
    if q.startswith("$"):
        q = q[1:]
    elif q[0] not in ".[":
        q = "." + q
    steps, pos = [], 0
    while pos < len(q):
        m = TOKEN.match(q, pos)
        if not m:
            raise QueryError(f"cannot read the query at {q[pos:pos + 20]!r} (position {pos}); use .key, "
                             f"[\"key\"], [0], [*] or [?field == value]")
        if m.group("dotkey") is not None:
            steps.append(Step("key", m.group("dotkey")))
        elif m.group("dotall") is not None or m.group("all") is not None:
            steps.append(Step("all"))
        elif m.group("index") is not None:
            steps.append(Step("index", int(m.group("index"))))
        elif m.group("q") is not None:
            raw = m.group("q")
            steps.append(Step("key", json.loads('"' + raw[1:-1].replace('"', '\\"') + '"')
                              if raw[0] == "'" else json.loads(raw)))
        else:
            raw = m.group("fval").strip()
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw.strip("'\"")
            steps.append(Step("filter", field=m.group("ffield"), op=m.group("fop"), value=value))
        pos = m.end()
    return steps


def _field(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            return _MISSING
    return obj


_MISSING = object()


def _compare(a: Any, op: str, b: Any) -> bool:
    if a is _MISSING:
        return op == "!="
    try:
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    except TypeError:
        return False


def fmt_path(path: tuple) -> str:
    out = "$"
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.fullmatch(r"[A-Za-z_][\w-]*", p):
            out += f".{p}"
        else:
            out += "[" + json.dumps(p, ensure_ascii=False) + "]"
    return out


def select(doc: Any, steps: list[Step], *, create: bool = False) -> list[tuple[tuple, Any]]:
    """(concrete path, value) of every match. With create, missing object keys become {}."""
    current: list[tuple[tuple, Any]] = [((), doc)]
    for i, step in enumerate(steps):
        nxt = []
        for path, node in current:
            if step.kind == "key":
                if isinstance(node, dict):
                    if step.key in node:
                        nxt.append((path + (step.key,), node[step.key]))
                    elif create:
                        last = i == len(steps) - 1
                        if not last:
                            node[step.key] = {}
                        nxt.append((path + (step.key,), node.get(step.key)))
            elif step.kind == "index":
                if isinstance(node, list) and -len(node) <= step.key < len(node):
                    k = step.key % len(node)
                    nxt.append((path + (k,), node[k]))
            elif step.kind == "all":
                if isinstance(node, dict):
                    nxt += [(path + (k,), v) for k, v in node.items()]
                elif isinstance(node, list):
                    nxt += [(path + (k,), v) for k, v in enumerate(node)]
            else:
                items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
                for k, v in items:
                    if _compare(_field(v, step.field or ""), step.op or "==", step.value):
                        nxt.append((path + (k,), v))
        current = nxt
    return current


def parent_of(doc: Any, path: tuple) -> Any:
    node = doc
    for p in path[:-1]:
        node = node[p]
    return node
