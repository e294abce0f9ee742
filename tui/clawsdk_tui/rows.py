"""Filtering and sorting rollout rows: plain functions over dicts, shared by the table and the tests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from clawsdk_tui.widgets import duration_of, status_label

STATUS_FILTERS = ("all", "running", "passed", "failed", "unscored")
SORT_KEYS = ("task_id", "status", "reward", "duration", "turns", "started_at", "failure_kind", "category")


def haystack(row: dict) -> str:
    return " ".join(
        str(row.get(k) or "") for k in ("task_id", "id", "category", "failure_kind", "error", "status")
    ).lower()


def matches(row: dict, status: str, category: str | None, text: str, cache: dict | None = None) -> bool:
    if status != "all":
        label = status_label(row)
        if status == "running":
            if label not in ("running", "retrying", "pending"):
                return False
        elif label != status:
            return False
    if category is not None and (row.get("category") or "") != category:
        return False
    if text:
        if cache is None:
            hay = haystack(row)
        else:  # keyed by rollout id; a row read again is a new dict, so the cached text is redone
            hit = cache.get(row["id"])
            if hit is None or hit[0] is not row:
                hit = cache[row["id"]] = (row, haystack(row))
            hay = hit[1]
        if text.lower() not in hay:
            return False
    return True


def sort_value(row: dict, key: str, now: float) -> tuple:
    """A key that sorts None last and ties by task and sample."""
    tie = (row.get("task_id") or "", row.get("sample") or 0)
    if key == "task_id":
        return (0, tie)
    value: Any
    if key == "status":
        value = status_label(row)
    elif key == "duration":
        value = duration_of(row, now)
    elif key == "turns":
        value = (row.get("n_model_calls") or 0, row.get("n_tool_calls") or 0)
    else:
        value = row.get(key)
    return (1, 0, tie) if value is None else (0, value, tie)


def select(
    rows: Iterable[dict],
    *,
    status: str = "all",
    category: str | None = None,
    text: str = "",
    sort: str = "task_id",
    reverse: bool = False,
    now: float = 0.0,
    cache: dict | None = None,
) -> list[dict]:
    kept = [r for r in rows if matches(r, status, category, text, cache)]
    kept.sort(key=lambda r: sort_value(r, sort, now), reverse=reverse)
    if reverse:  # keep the rows without a value at the bottom either way
        kept.sort(key=lambda r: sort_value(r, sort, now)[0])
    return kept


def categories(rows: Sequence[dict]) -> list[str]:
    return sorted({r.get("category") or "" for r in rows})
