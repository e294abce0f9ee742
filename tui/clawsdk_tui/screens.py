"""The runs list, a run's rollouts, a rollout's full JSON, and the key help."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Static, TextArea

from clawsdk_tui import rows as rowsel
from clawsdk_tui.data import RunSummary, StoreReader
from clawsdk_tui.render import clean, json_text
from clawsdk_tui.widgets import STATUS_STYLES, Line, LiveHeader, RolloutTable

if TYPE_CHECKING:
    from clawsdk_tui.app import Polled, WatchApp


def _bar(done: int, total: int, width: int = 12) -> Text:
    filled = round(width * done / total) if total else 0
    return Text.assemble(("█" * filled, "green"), ("░" * (width - filled), "dim"), f" {done}/{total}")


def _failures(kinds: dict[str, int]) -> Text:
    if not kinds:
        return Text("-", style="dim")
    return Text(clean(" ".join(f"{k} {n}" for k, n in kinds.items())), style="red")


class RunsScreen(Screen):
    """Every run in the store: progress, pass rate (per task) so far, throughput, failures by kind."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "rollouts"),
        Binding("escape", "app.quit", "quit", show=False),
    ]
    COLUMNS = (
        "run",
        "status",
        "agent",
        "progress",
        "running",
        "pass@1/task",
        "reward/task",
        "rollouts/s",
        "failures",
        "started",
    )

    app: WatchApp

    def compose(self) -> ComposeResult:
        yield LiveHeader(f"clawsdk watch · {self.app.db.name}")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static("", id="empty")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in self.COLUMNS:
            table.add_column(col, key=col)
        self.show_runs(self.app.runs)
        self.ready = True

    def on_screen_resume(self) -> None:
        if (run_id := self._cursor_run()) is not None:  # back here: the run in focus is the one under the cursor
            self.app.focus_run(run_id)
        self.app.poll_now(force=True)  # the summary is read less often while another screen is up

    def store_updated(self, msg: Polled) -> None:
        if msg.runs is not None:
            self.show_runs(self.app.runs)

    def show_runs(self, runs: list[RunSummary]) -> None:
        table = self.query_one(DataTable)
        current = None
        if table.row_count and table.cursor_row is not None and 0 <= table.cursor_row < table.row_count:
            current = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear()
        now = self.app.clock()
        for r in runs:
            tput = r.throughput(now)
            rate, tasks = r.pass_rate, f"{r.tasks_scored} task{'' if r.tasks_scored == 1 else 's'}"
            table.add_row(  # a str cell would be markup: Text, cleaned, for what the store holds
                Text(clean(r.id)),
                Text(clean(r.status), style="yellow" if r.status == "running" else ""),
                Text(clean(r.agent or "")),
                _bar(r.finished, r.total),
                Text(str(r.running), style="yellow" if r.running else "dim"),
                "-" if rate is None else f"{rate:.0%} ({tasks})",  # pass@1 per task, as `clawsdk runs`
                "-" if r.mean_reward is None else f"{r.mean_reward:.2f}",
                "-" if tput is None else f"{tput:.2f}",
                _failures(r.failures),
                Text(clean((r.created_at or "")[:19])),
                key=r.id,
            )
        if current is not None and current in {r.id for r in runs}:
            table.move_cursor(row=table.get_row_index(current))
        empty = self.query_one("#empty", Static)
        empty.display = not runs
        empty.update(
            Text(
                f"No runs in {self.app.db} yet. Start one with `clawsdk run TASKS --db {self.app.db}`; "
                "it appears here as soon as it starts."
            )
        )

    def _cursor_run(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count or table.cursor_row is None or not 0 <= table.cursor_row < table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # the header names the run under the cursor, which Enter opens: one run shown, the same one opened.
        # The row under the cursor now, not the event's: a refresh re-adds the rows and moves the cursor back.
        if self.app.screen is not self:  # a refresh under another screen: that screen's run is in focus
            return
        run_id = self._cursor_run()
        if run_id is not None and (self.app.run_watch is None or self.app.run_watch.run_id != run_id):
            self.app.focus_run(run_id)

    def select_run(self, run_id: str) -> None:
        table = self.query_one(DataTable)
        try:
            table.move_cursor(row=table.get_row_index(run_id))
        except Exception:  # not on the table yet: the next refresh has it
            self.app.focus_run(run_id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(self._cursor_run() or event.row_key.value)

    def action_open(self) -> None:
        self._open(self._cursor_run())

    def _open(self, run_id: str | None) -> None:
        if run_id:
            self.app.focus_run(run_id)
            self.app.push_screen(RolloutsScreen(run_id))


class RolloutsScreen(Screen):
    """One run's rollouts: sort, filter by status, category and text, jump to the running ones."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "open"),
        Binding("slash", "filter", "filter"),
        Binding("s", "cycle_status", "status"),
        Binding("c", "cycle_category", "category"),
        Binding("o", "cycle_sort", "sort"),
        Binding("O", "reverse", "reverse", show=False),
        Binding("r", "next_running", "next running"),
        Binding("y", "copy_id", "copy id"),
        Binding("j", "json", "JSON"),
        Binding("escape", "back", "back"),
    ]
    DEFAULT_CSS = """
    RolloutsScreen #bar { height: 1; }
    RolloutsScreen #filter { width: 40; border: none; height: 1; padding: 0 1; }
    RolloutsScreen #facets { width: 1fr; padding: 0 1; }
    RolloutsScreen #control { height: 1; padding: 0 1; color: $text-muted; }
    """

    app: WatchApp

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.status = "all"
        self.category: str | None = None
        self.text = ""
        self.sort = "task_id"
        self.reverse = False
        self.shown: list[dict] = []
        self._search_text: dict[str, tuple[dict, str]] = {}

    def compose(self) -> ComposeResult:
        yield LiveHeader(f"clawsdk watch · {self.app.db.name}")
        with Horizontal(id="bar"):
            yield Input(placeholder="filter: task, id, error  (/)", id="filter")
            yield Line(id="facets")
        yield Line(id="control")
        yield RolloutTable(id="rollouts", clock=self.app.clock)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Input).cursor_blink = self.app.cursor_blink
        self.query_one(RolloutTable).focus()
        self.refilter()
        self.show_control()
        self.ready = True

    def show_control(self) -> None:
        """How the run is steered: the level in force and the last word on why (the controller's, or who
        changed it); keys: p pause, + - the level, A auto, R requeue unscored, X cancel."""
        c = self.app.steering
        line = self.query_one("#control", Line)
        line.display = c is not None and self.app.run_watch is not None and self.app.run_watch.run_id == self.run_id
        if c is None or not line.display:
            return
        who = "" if c.source == "controller" else f"{c.actor}, "
        line.show(Text.assemble(
            ("paused  " if c.paused else "", "bold yellow"),
            "concurrency ", (f"{c.level}", "bold"), ": ", clean(c.reason),
            (f"  ({who}{c.ts[11:19]})", "dim")))

    @property
    def all_rows(self) -> list[dict]:
        return self.app.rows.get(self.run_id, [])

    def store_updated(self, msg: Polled) -> None:
        if msg.run_id != self.run_id:
            return
        self.show_control()
        if msg.rows is not None:
            self.refilter()
        elif any(r["status"] in ("running", "retrying") for r in self.shown[:1000]):
            self.query_one(RolloutTable).refresh()  # the running durations tick

    def refilter(self) -> None:
        table = self.query_one(RolloutTable)
        table.sort_key, table.sort_reverse = self.sort, self.reverse
        self.shown = rowsel.select(
            self.all_rows,
            status=self.status,
            category=self.category,
            text=self.text,
            sort=self.sort,
            reverse=self.reverse,
            now=self.app.clock(),
            cache=self._search_text,
        )
        table.set_rows(self.shown)
        total = len(self.all_rows)
        facets = Text.assemble(
            "status ",
            (self.status, "bold " + STATUS_STYLES.get(self.status, "")),
            "  category ",
            (self.category if self.category is not None else "all", "bold"),
            "  sort ",
            (f"{self.sort}{' ▼' if self.reverse else ' ▲'}", "bold"),
            "  ",
            (f"{len(self.shown):,} of {total:,}", "bold"),
            f"  run {clean(self.run_id)}",
        )
        self.query_one("#facets", Line).show(facets)

    # ---- filters ----

    def on_input_changed(self, event: Input.Changed) -> None:
        self.text = event.value.strip()
        self.refilter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(RolloutTable).focus()

    def action_filter(self) -> None:
        self.query_one(Input).focus()

    def action_cycle_status(self) -> None:
        options = rowsel.STATUS_FILTERS
        self.status = options[(options.index(self.status) + 1) % len(options)]
        self.refilter()

    def action_cycle_category(self) -> None:
        options: list[str | None] = [None, *rowsel.categories(self.all_rows)]
        self.category = (
            options[(options.index(self.category) + 1) % len(options)] if self.category in options else None
        )
        self.refilter()

    def action_cycle_sort(self) -> None:
        keys = rowsel.SORT_KEYS
        self.sort = keys[(keys.index(self.sort) + 1) % len(keys)] if self.sort in keys else keys[0]
        self.refilter()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self.refilter()

    def on_rollout_table_sort_requested(self, event: RolloutTable.SortRequested) -> None:
        key = {"turns": "turns", "sample": "task_id", "id": "task_id"}.get(event.key, event.key)
        if key == self.sort:
            self.reverse = not self.reverse
        else:
            self.sort, self.reverse = key, False
        self.refilter()

    def action_next_running(self) -> None:
        table = self.query_one(RolloutTable)
        n = len(table.rows)
        for step in range(1, n + 1):
            i = (table.cursor + step) % n
            if table.rows[i]["status"] in ("running", "retrying"):
                table.cursor = i
                table.focus()
                return
        self.notify("no rollout is running in this view", timeout=2)

    def action_back(self) -> None:
        filter_input = self.query_one(Input)
        if filter_input.has_focus:
            self.query_one(RolloutTable).focus()
        elif self.text or self.status != "all" or self.category is not None:
            filter_input.value = ""
            self.text, self.status, self.category = "", "all", None
            self.refilter()
        else:
            self.app.pop_screen()

    # ---- a rollout ----

    def on_rollout_table_selected(self, event: RolloutTable.Selected) -> None:
        from clawsdk_tui.detail import RolloutScreen

        self.app.push_screen(RolloutScreen(event.row["id"]))

    def action_open(self) -> None:
        self.query_one(RolloutTable).action_select()

    def action_copy_id(self) -> None:
        self.app.copy_rollout_id(self.query_one(RolloutTable).current_id)

    def action_json(self) -> None:
        self.app.open_json(self.query_one(RolloutTable).current_id)


class JsonScreen(Screen):
    """A rollout's full JSON (row, every event, verdict), as `clawsdk show --json` prints it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "back"),
        Binding("y", "copy", "copy JSON"),
    ]

    app: WatchApp

    def __init__(self, rollout_id: str) -> None:
        super().__init__()
        self.rollout_id = rollout_id
        self.text = ""

    def compose(self) -> ComposeResult:
        yield LiveHeader(f"clawsdk watch · {self.rollout_id}.json")
        language = "json" if "json" in TextArea().available_languages else None
        area = TextArea("loading…", read_only=True, show_line_numbers=True, language=language, id="json")
        area.cursor_blink = self.app.cursor_blink
        yield area
        yield Footer()

    def on_mount(self) -> None:
        self._load(self.app.reader, self.rollout_id)

    @work(thread=True, exit_on_error=False)
    def _load(self, reader: StoreReader, rollout_id: str) -> None:
        try:
            text = json_text(reader.rollout_json(rollout_id), indent=2)  # what it leaves raw, \u-escaped
        except Exception as e:
            text = clean(f"could not read rollout {rollout_id}: {e}", lines=True)
        self.app.call_from_thread(self._show, text)

    def _show(self, text: str) -> None:
        self.text = text
        area = self.query_one(TextArea)
        area.load_text(text)
        area.focus()

    def action_copy(self) -> None:
        if self.text:
            self.app.copy_to_clipboard(self.text)
            self.notify(f"copied {len(self.text):,} characters of JSON", timeout=2)


class ConfirmScreen(ModalScreen[bool]):
    """Asks before something that cannot be taken back (cancelling a run)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Static { width: 64; height: auto; border: round $error; background: $panel; padding: 1 2; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(Text(self.question))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class HelpScreen(ModalScreen):
    """The keys of the screen below, and the app's."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 64; height: auto; max-height: 90%; border: round $primary;
                                  background: $panel; padding: 1 2; }
    """

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        text = Text()
        doc = type(self.under).__doc__ or type(self.under).__name__
        text.append(f"{doc.splitlines()[0]}\n\n", style="italic")
        keys_for: dict[str, list[str]] = {}  # description -> keys, so "scroll" lists ↑ and ↓ once
        for b in [*getattr(self.under, "BINDINGS", []), *self.app.BINDINGS]:
            if isinstance(b, Binding):
                keys = [self.app.get_key_display(Binding(k, "")) for k in b.key.split(",")]
                keys_for.setdefault(b.description, []).extend(keys)
        for description, keys in keys_for.items():
            text.append(f"{', '.join(keys):>16}", style="bold")
            text.append(f"  {description}\n")
        text.append(
            "\nMouse: click a row to select it, click it again to open it; click a column "
            "header to sort by it; scroll with the wheel.",
            style="dim",
        )
        with VerticalScroll():
            yield Static(text)
