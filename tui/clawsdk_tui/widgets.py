"""Widgets: the live header and a virtual rollouts table that draws only the rows on screen.

Textual's DataTable measures every cell it holds; with 10,000 rollouts a refill took seconds here.
RolloutTable keeps the rows as plain dicts and renders the visible lines through the line API,
so filtering, sorting and live updates cost Python list work plus one screenful of drawing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from clawsdk_tui.data import UNFINISHED, parse_ts
from clawsdk_tui.render import clean

# ---- the live header ----------------------------------------------------------------------


@dataclass
class HeaderStats:
    scope: str = ""  # what the figures are about: a run id
    rollouts_per_s: float = 0.0
    tool_calls_per_s: float = 0.0
    running: int = 0
    finished: int = 0
    errors: int = 0
    pass_rates: tuple[float, ...] = ()  # the per-task pass rate as it evolved (RunWatch.pass_rate_series)
    pass_rate: float | None = None  # pass@1 per task so far
    concurrency: int | None = None  # rollouts at once now (run_control), when the run records it
    paused: bool = False


BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: tuple[float, ...] | list[float], width: int = 24) -> Text:
    """Pass rates in [0, 1] as bars on an absolute scale (Textual's Sparkline rescales to min..max,
    which draws a steady 100% as flat as a steady 0%)."""
    values = list(values)[-width:]
    text = Text()
    for v in values:
        v = min(1.0, max(0.0, v))
        style = "green" if v >= 0.75 else ("yellow" if v >= 0.4 else "red")
        text.append(BARS[min(len(BARS) - 1, int(v * (len(BARS) - 1) + 0.5))], style=style)
    return text


class LiveHeader(Widget):
    """One line: store, run, rates, errors, and the pass rate (pass@1 per task) as it evolved.

    Drawn by render() rather than built from Static children: a Static update asks for a new
    layout of the whole screen, and this line changes on every poll.
    """

    DEFAULT_CSS = """
    LiveHeader { dock: top; height: 1; background: $panel; }
    """

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title = title
        self.stats = HeaderStats()

    def on_mount(self) -> None:
        stats = getattr(self.app, "header_stats", None)
        if stats is not None:
            self.show(stats)

    def show(self, stats: HeaderStats) -> None:
        if stats != self.stats:
            self.stats = stats
            self.refresh()

    def render(self) -> Text:
        s = self.stats
        left = Text.assemble(
            (f" {clean(self.title)} ", "bold reverse"),
            "  ",
            (clean(s.scope) or "no run", "bold"),
            "  ",
            (f"{s.rollouts_per_s:.2f}", "bold"),
            " rollouts/s  ",
            (f"{s.tool_calls_per_s:.1f}", "bold"),
            " tool calls/s  ",
            (f"{s.running}", "bold yellow" if s.running else "bold"),
            " running  ",
            (f"{s.errors}", "bold red" if s.errors else "bold"),
            " errors",
        )
        if s.concurrency is not None:
            left.append_text(Text.assemble("  ", (f"{s.concurrency}", "bold"), " at once"))
        if s.paused:
            left.append_text(Text.assemble("  ", ("paused", "bold reverse yellow")))
        right = Text.assemble(
            sparkline(s.pass_rates, width=20),
            " pass@1/task ",
            "–" if s.pass_rate is None else f"{s.pass_rate:.0%}",
            " ",
        )
        gap = self.size.width - left.cell_len - right.cell_len
        if gap < 1:  # narrow: the figures give way before the pass rate does
            left.truncate(max(0, self.size.width - right.cell_len - 1), overflow="ellipsis")
            gap = self.size.width - left.cell_len - right.cell_len
        return Text.assemble(left, " " * max(0, gap), right)


# ---- the rollouts table -------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    right: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("status", "status", 9),
    Column("task_id", "task", 24),
    Column("category", "category", 16),
    Column("sample", "k", 3, right=True),
    Column("turns", "turns/tools", 11, right=True),
    Column("reward", "reward", 8, right=True),
    Column("duration", "duration", 8, right=True),
    Column("failure_kind", "ending", 14),
    Column("id", "rollout", 16),
)


def status_label(row: dict) -> str:
    """What an operator cares about: running, passed, failed, or unscored (an infrastructure failure)."""
    status = row["status"]
    if status in UNFINISHED or status == "cancelled":
        return status
    if row.get("scored") == 1:
        return "passed" if row.get("passed") == 1 else "failed"
    return "unscored"


STATUS_STYLES = {
    "running": "bold yellow",
    "retrying": "yellow",
    "pending": "dim",
    "cancelled": "magenta",
    "passed": "green",
    "failed": "red",
    "unscored": "bold magenta",
}


def duration_of(row: dict, now: float) -> float | None:
    if row.get("duration_s") is not None:
        return row["duration_s"]
    if row["status"] in UNFINISHED:
        started = parse_ts(row.get("started_at"))
        return max(0.0, now - started) if started else None
    return None


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def cell(row: dict, key: str, now: float) -> tuple[str, str]:
    """(text, style) of one cell."""
    if key == "status":
        label = status_label(row)
        return label, STATUS_STYLES.get(label, "")
    if key == "turns":
        return f"{row.get('n_model_calls') or 0}/{row.get('n_tool_calls') or 0}", ""
    if key == "reward":
        r = row.get("reward")
        if r is None:
            return "-", "dim"
        return f"{r:.2f}", "green" if r >= 1 else ("yellow" if r > 0 else "red")
    if key == "duration":
        return fmt_duration(duration_of(row, now)), ""
    if key == "failure_kind":
        kind = row.get("failure_kind")
        return kind or "", "" if kind in (None, "ok") else "red"
    value = row.get(key)
    return ("" if value is None else str(value)), ""


def _fit(text: str, width: int, right: bool) -> str:
    """`text` from the store (a task id, a category) in one line of `width` characters, cleaned."""
    text = clean(text[: width + 1])
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)


class RolloutTable(ScrollView, can_focus=True):
    """Rollout rows, drawn a screenful at a time. Click a header to sort; click a row twice to open it."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"rollout-table--header", "rollout-table--cursor", "rollout-table--sorted"}
    DEFAULT_CSS = """
    RolloutTable { height: 1fr; }
    RolloutTable > .rollout-table--header { text-style: bold; background: $panel; }
    RolloutTable > .rollout-table--sorted { text-style: bold underline; background: $panel; }
    RolloutTable > .rollout-table--cursor { background: $block-cursor-background; }
    RolloutTable:blur > .rollout-table--cursor { background: $block-cursor-blurred-background; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "up", show=False),
        Binding("down", "cursor(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "jump(0)", "first", show=False),
        Binding("end", "jump(-1)", "last", show=False),
        Binding("enter", "select", "open", show=True),
    ]

    cursor = reactive(0, always_update=True)

    class Selected(Message):
        def __init__(self, row: dict) -> None:
            super().__init__()
            self.row = row

    class SortRequested(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, *, clock: Callable[[], float] = time.time, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[dict] = []
        self.sort_key = "task_id"
        self.sort_reverse = False
        self.clock = clock
        self._width = sum(c.width + 1 for c in COLUMNS)
        self._strips: dict[tuple, Strip] = {}
        self._strip_rows: dict[tuple, dict] = {}  # keeps each cached row alive, so its id() stays unique

    # ---- data ----

    def set_rows(self, rows: Sequence[dict]) -> None:
        """Show these rows (already filtered and sorted), keeping the cursor on the same rollout."""
        current = self.current_id
        self.rows = list(rows)
        self.virtual_size = Size(self._width, len(self.rows) + 1)
        index = next((i for i, r in enumerate(self.rows) if r["id"] == current), None) if current else None
        self.cursor = min(index if index is not None else self.cursor, max(0, len(self.rows) - 1))
        self.refresh()

    @property
    def current(self) -> dict | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    @property
    def current_id(self) -> str | None:
        row = self.current
        return row["id"] if row else None

    # ---- cursor ----

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, value: int) -> None:
        visible = max(1, self.size.height - 1)
        top = int(self.scroll_y)
        if value < top:
            self.scroll_to(y=value, animate=False, immediate=True)
        elif value >= top + visible:
            self.scroll_to(y=value - visible + 1, animate=False, immediate=True)
        self.refresh()

    def action_cursor(self, step: int) -> None:
        self.cursor += step

    def action_page(self, direction: int) -> None:
        self.cursor += direction * max(1, self.size.height - 2)

    def action_jump(self, where: int) -> None:
        self.cursor = len(self.rows) - 1 if where < 0 else where

    def action_select(self) -> None:
        if self.current is not None:
            self.post_message(self.Selected(self.current))

    def on_click(self, event: Click) -> None:
        if event.y == 0:
            x = event.x + int(self.scroll_x)
            for col in COLUMNS:
                if x < col.width + 1:
                    self.post_message(self.SortRequested(col.key))
                    return
                x -= col.width + 1
            return
        index = int(self.scroll_y) + event.y - 1
        if not 0 <= index < len(self.rows):
            return
        if index == self.cursor or event.chain >= 2:
            self.cursor = index
            self.action_select()
        else:
            self.cursor = index

    # ---- drawing ----

    # Styles resolved from CSS once per style change, not once per line drawn.
    _styles: dict[str, Style] | None = None

    def notify_style_update(self) -> None:
        self._styles = None
        self._strips.clear()
        super().notify_style_update()

    def on_focus(self) -> None:
        self._styles = None
        self._strips.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._styles = None
        self._strips.clear()
        self.refresh()

    def _style(self, name: str) -> Style:
        if self._styles is None:
            self._styles = {
                "base": self.rich_style,
                "header": self.get_component_rich_style("rollout-table--header"),
                "sorted": self.get_component_rich_style("rollout-table--sorted"),
                "cursor": self.rich_style + self.get_component_rich_style("rollout-table--cursor"),
            }
        return self._styles[name]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x = int(self.scroll_x)
        if y == 0:
            return self._header().crop_extend(scroll_x, scroll_x + width, None)
        index = int(self.scroll_y) + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, self._style("base"))
        return self._row(index).crop_extend(scroll_x, scroll_x + width, self._style("base"))

    def _header(self) -> Strip:
        base = self._style("header")
        sorted_style = self._style("sorted")
        segments = []
        for col in COLUMNS:
            title = col.title
            if col.key == self.sort_key:  # the arrow always shows; the title gives way
                title = title[: col.width - 2] + (" ▼" if self.sort_reverse else " ▲")
            segments.append(
                Segment(_fit(title, col.width, col.right), sorted_style if col.key == self.sort_key else base)
            )
            segments.append(Segment(" ", base))
        return Strip(segments, self._width).extend_cell_length(self.size.width + int(self.scroll_x), base)

    def _row(self, index: int) -> Strip:
        row = self.rows[index]
        now = self.clock()
        # Rows are replaced, never mutated, when the store changes: the dict's identity is its version.
        key = (
            id(row),
            index == self.cursor,
            int(now) if row["status"] in UNFINISHED else 0,
            self.size.width + int(self.scroll_x),
        )
        strip = self._strips.get(key)
        if strip is not None and self._strip_rows.get(key) is row:
            return strip
        if len(self._strips) > 2000:
            self._strips.clear()
            self._strip_rows.clear()
        strip = self._draw_row(row, index, now)
        self._strips[key] = strip
        self._strip_rows[key] = row
        return strip

    def _draw_row(self, row: dict, index: int, now: float) -> Strip:
        base = self._style("cursor" if index == self.cursor else "base")
        segments = []
        for col in COLUMNS:
            text, style = cell(row, col.key, now)
            segments.append(
                Segment(_fit(text, col.width, col.right), base + Style.parse(style) if style else base)
            )
            segments.append(Segment(" ", base))
        return Strip(segments, self._width).extend_cell_length(self.size.width + int(self.scroll_x), base)


class Line(Widget):
    """A one-line label that repaints without a new layout (see LiveHeader)."""

    DEFAULT_CSS = """
    Line { height: 1; }
    """

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = Text()

    def show(self, text: Text) -> None:
        if text != self.text:
            self.text = text
            self.refresh()

    def render(self) -> Text:
        return self.text
