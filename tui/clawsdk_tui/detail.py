"""One rollout: its summary, the live event stream (folded where long), and the verdict."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Static

from clawsdk_tui.render import clean, render_event, verdict_table
from clawsdk_tui.widgets import STATUS_STYLES, LiveHeader, duration_of, fmt_duration, status_label

if TYPE_CHECKING:
    from clawsdk_tui.app import DetailUpdate, Polled, WatchApp


class EventItem(Static):
    """One event: its head line and its body, shown or folded (click it, or e for all).

    One widget per event, not a container of several: a rollout of a few hundred events
    mounts in one go.
    """

    DEFAULT_CSS = """
    EventItem { height: auto; }
    EventItem.foldable:hover { background: $boost; }
    """

    folded = reactive(True, init=False)

    def __init__(self, event: dict, call_args: dict | None) -> None:
        self.event = event
        self.view = render_event(event, call_args)
        kind = str(event["kind"])  # a class name: the store's kinds are, another writer's may not be
        kind = kind if re.fullmatch(r"[a-zA-Z_-][a-zA-Z0-9_-]*", kind) else "other"
        classes = f"event {kind}" + (" foldable" if self.view.foldable else "")
        super().__init__(self._content(True), classes=classes)

    def _content(self, folded: bool) -> Content:
        head = Content.from_rich_text(self.view.head)
        body = self.view.body
        if body is None:
            return head
        if self.view.foldable and folded:
            note = Content.styled(
                f"     ▶ {self.view.summary[:90]} … ({self.view.body_lines} lines)", "$text-muted"
            )
            return Content("\n").join([head, note])
        return Content("\n").join([head, *(Content("     ") + line for line in body.split("\n"))])

    def watch_folded(self, folded: bool) -> None:
        self.update(self._content(folded))

    def on_click(self) -> None:
        if self.view.foldable:
            self.folded = not self.folded


class RolloutScreen(Screen):
    """One rollout's events as they arrive: model messages, tool calls and results, checks, verdict."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("f", "toggle_follow", "follow"),
        Binding("e", "toggle_folds", "fold/unfold"),
        Binding("a", "load_all", "all events"),
        Binding("y", "copy_id", "copy id"),
        Binding("j", "json", "JSON"),
        Binding("up", "scroll(-1)", "scroll", show=False),
        Binding("down", "scroll(1)", "scroll", show=False),
        Binding("pageup", "scroll(-20)", "page up", show=False),
        Binding("pagedown", "scroll(20)", "page down", show=False),
        Binding("home", "top", "top", show=False),
        Binding("end", "bottom", "bottom", show=False),
    ]
    DEFAULT_CSS = """
    RolloutScreen #summary { height: auto; padding: 0 1; background: $boost; }
    RolloutScreen #events { height: 1fr; padding: 0 1; }
    RolloutScreen #verdict { height: auto; margin: 1 0 0 0; }
    RolloutScreen #earlier { color: $text-muted; }
    """

    app: WatchApp

    def __init__(self, rollout_id: str) -> None:
        super().__init__()
        self.rollout_id = rollout_id
        self.follow = True
        self.rollout: dict | None = None
        self.instruction: str | None = None
        self.n_events = 0
        # calls' arguments, to type their results: by seq (a result names its call) and the last per tool
        # (results recorded before they named their call); the events on screen hold them anyway
        self._args: dict[int, dict] = {}
        self._last_args: dict[str, dict] = {}
        self._unfolded = False

    def compose(self) -> ComposeResult:
        yield LiveHeader(f"clawsdk watch · {self.app.db.name}")
        yield Static(f"loading rollout {clean(self.rollout_id)}…", id="summary", markup=False)
        yield VerticalScroll(id="events")
        yield Footer()

    def on_mount(self) -> None:
        self.app.follow(self.rollout_id)
        self.ready = True

    def on_unmount(self) -> None:
        if self.app.follower is not None and self.app.follower.rollout_id == self.rollout_id:
            self.app.follow(None)

    def on_screen_resume(self) -> None:
        if self.app.follower is None or self.app.follower.rollout_id != self.rollout_id:
            self.app.follow(self.rollout_id)

    def store_updated(self, msg: Polled) -> None:
        if (
            msg.detail is not None
            and msg.detail.rollout is not None
            and msg.detail.rollout["id"] == self.rollout_id
        ):
            self.apply(msg.detail)
        elif self.rollout is not None and self.rollout["status"] in ("running", "retrying"):
            self._show_summary()  # the running duration ticks

    def apply(self, update: DetailUpdate) -> None:
        self.rollout = update.rollout
        if update.instruction is not None:
            self.instruction = update.instruction
        events = self.query_one("#events", VerticalScroll)
        chunk = update.chunk
        new: list = []
        if chunk is not None and chunk.reset:
            events.remove_children()
            self.n_events = 0
            self._args.clear()
            self._last_args.clear()
            if chunk.skipped:
                new.append(
                    Static(f"… {chunk.skipped:,} earlier events not shown (a: load all)", id="earlier")
                )
        if chunk is not None:
            for e in chunk.events:
                p = e.get("payload") or {}
                call_args = None
                if e["kind"] == "tool_call":
                    args = got if isinstance(got := p.get("args"), dict) else {}
                    self._args[e["seq"]] = self._last_args[str(p.get("tool"))] = args
                elif e["kind"] == "tool_result":
                    call = p.get("call")
                    call_args = self._args.get(call) if isinstance(call, int) else None  # concurrent calls answer in any order
                    if call_args is None:
                        call_args = self._last_args.get(str(p.get("tool")))
                new.append(EventItem(e, call_args))
            self.n_events += len(chunk.events)
        if update.verdict is not None:
            new.append(Static(verdict_table(update.verdict), id="verdict"))
        self._show_summary()
        if new:
            verdict = events.query("#verdict")
            if verdict and update.verdict is None:
                events.mount_all(new, before=verdict.first())
            else:
                events.mount_all(new)
            if self.follow:
                self.call_after_refresh(events.scroll_end, animate=False)

    def _show_summary(self) -> None:
        ro = self.rollout
        if ro is None:
            self.query_one("#summary", Static).update(f"no rollout {clean(self.rollout_id)} in the store")
            return
        label = status_label(ro)
        reward = "-" if ro["reward"] is None else f"{ro['reward']:.2f}"
        text = Text.assemble(  # the store's strings: as text, cleaned
            (clean(ro["id"]), "bold"),
            f"  run {clean(ro['run_id'])}  task ",
            (clean(ro["task_id"]), "bold"),
            f"  {clean(ro.get('category') or '-')}  sample {ro['sample']}  attempt {ro['attempt']}\n",
            (label, "bold " + STATUS_STYLES.get(label, "")),
            f"  ending {clean(ro['failure_kind'] or '-')}  reward ",
            (reward, "bold"),
            f"  turns {ro['n_model_calls'] or 0}  tool calls {ro['n_tool_calls'] or 0}  ",
            f"{fmt_duration(duration_of(ro, self.app.clock()))}  events {self.n_events}  ",
            ("following" if self.follow else "not following", "green" if self.follow else "dim"),
        )
        if ro.get("error"):
            text.append(f"\n{clean(ro['error'][:2000], lines=True)}", style="red")
        if self.instruction:
            lines = self.instruction.strip().splitlines()
            shown = "\n".join(clean(line[:500]) for line in lines[:3])
            shown += f"  … ({len(lines) - 3} more lines)" if len(lines) > 3 else ""
            text.append(f"\n{shown}", style="italic dim")
        self.query_one("#summary", Static).update(text)

    # ---- actions ----

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self.query_one("#events", VerticalScroll).scroll_end(animate=False)
        self._show_summary()

    def action_toggle_folds(self) -> None:
        self._unfolded = not self._unfolded
        for item in self.query(EventItem):
            if item.view.foldable:
                item.folded = not self._unfolded

    def action_load_all(self) -> None:
        self.app.follow(self.rollout_id, load_all=True)

    def action_copy_id(self) -> None:
        self.app.copy_rollout_id(self.rollout_id)

    def action_json(self) -> None:
        self.app.open_json(self.rollout_id)

    def action_scroll(self, lines: int) -> None:
        events = self.query_one("#events", VerticalScroll)
        events.scroll_relative(y=lines, animate=False)
        if lines < 0:
            self.follow = False
            self._show_summary()

    def action_top(self) -> None:
        self.follow = False
        self.query_one("#events", VerticalScroll).scroll_home(animate=False)
        self._show_summary()

    def action_bottom(self) -> None:
        self.query_one("#events", VerticalScroll).scroll_end(animate=False)
