"""Text the agent, the model, a task file or another writer put in the store is shown as text: never
parsed as markup (a click action, a link, a style; a stray `[/]` used to crash the app) and never sent
to the terminal as a control sequence (clear screen, OSC 52 clipboard writes, C1 CSI)."""

from __future__ import annotations

import json
import unicodedata

import anyio
from clawsdk_tui.app import WatchApp
from clawsdk_tui.detail import EventItem, RolloutScreen
from clawsdk_tui.render import render_event, verdict_table
from clawsdk_tui.screens import JsonScreen, RolloutsScreen
from rich.console import Console
from textual.strip import Strip
from tui_helpers import BASE, FIXED_NOW, store_of, wait_for

from clawsdk.store.store import Store

MARKUP = "[b]B[/b] [/] [link=file:///etc/passwd]L[/link] [@click=app.quit]Q[/]"
CONTROL = "\x1b[2J\x1b]52;c;aGk=\x07\r\x9b31m\x85\x7f"  # clear, OSC 52, BEL, CR, C1 CSI, NEL, DEL
SURROGATE = "\ud800"  # a lone one: only JSON (the events' payloads) can carry it
EVIL = CONTROL + MARKUP


def evil_store(path, *, rollout_id: str = "r[b]1[/]") -> None:
    """One run, one task, one finished rollout whose every string an agent or a task file could set is EVIL."""
    with Store(path) as store, store.transaction():
        conn = store.db.conn
        conn.execute(
            "INSERT INTO runs (id, created_at, status, agent, sandbox, samples, config) "
            "VALUES (?, ?, 'finished', ?, 'local', 1, '{}')",
            ["run" + MARKUP, BASE.isoformat(), "agent" + EVIL],
        )
        conn.execute(
            "INSERT INTO tasks (hash, id, category, source, instruction, data) VALUES ('h', ?, ?, 's', ?, '{}')",
            ["t" + EVIL, "c" + EVIL, "do " + EVIL],
        )
        conn.execute(
            "INSERT INTO rollouts (id, run_id, task_id, task_hash, sample, status, failure_kind, scored, reward, "
            "passed, error, started_at, finished_at, duration_s) "
            "VALUES (?, ?, ?, 'h', 0, 'finished', ?, 1, 0.5, 0, ?, ?, ?, 60)",
            [
                rollout_id,
                "run" + MARKUP,
                "t" + EVIL,
                "k" + EVIL,
                "error " + EVIL,
                BASE.isoformat(),
                BASE.isoformat(),
            ],
        )
        s = EVIL + SURROGATE
        payloads = [
            ("tool_call", {"tool": "exec" + s, "args": {"command": "echo " + s}}),
            ("tool_call", {"tool": "t" + s, "args": {"x": s}}),
            ("tool_result", {"tool": "read" + s, "content": "text " + s}),
            (
                "tool_result",
                {"tool": "exec", "content": json.dumps({"exit_code": 0, "stdout": s, "stderr": s})},
            ),
            ("model_request", {"messages": [{"role": "user" + s, "content": "ask " + s}]}),
            (
                "model_response",
                {
                    "message": {
                        "content": "say " + s,
                        "tool_calls": [{"function": {"name": s, "arguments": s}}],
                    },
                    "usage": {"prompt_tokens": s, "completion_tokens": 1},
                },
            ),
            ("verifier", {"check": "check" + s, "score": s, "detail": "detail " + s}),
            ("sandbox_exec", {"command": "cmd " + s, "exit_code": s, "stdout": s}),
            ("error", {"kind": s, "message": "message " + s}),
            ("note" + MARKUP, {"x": s}),  # a kind that is no CSS class name
        ]
        store.insert_events(
            [(rollout_id, 0, i, k, BASE.isoformat(), 5.0, json.dumps(p)) for i, (k, p) in enumerate(payloads)]
        )
        conn.execute(
            "INSERT INTO verdicts VALUES (?, 0, ?, 0.5, 0, ?, 0.1, ?)",
            [rollout_id, "v" + MARKUP, "d" + EVIL, BASE.isoformat()],
        )
        conn.execute(
            "INSERT INTO verdict_scores VALUES (?, 0, ?, 0.5, 1, ?)", [rollout_id, "n" + EVIL, "d" + EVIL]
        )


def on_screen(app) -> tuple[str, list]:
    """What the terminal is sent for the current screen: its text, and the segments' styles."""
    text, styles = [], []
    for row in app.screen._compositor.render_full_update().strips:
        strips = [row] if isinstance(row, Strip) else [s for s in row or () if s is not None]
        text.append("".join(seg.text for strip in strips for seg in strip))
        styles += [seg.style for strip in strips for seg in strip if seg.style is not None]
    return "\n".join(text), styles


def assert_safe(app, where: str) -> str:
    text, styles = on_screen(app)
    bad = sorted({f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in ("Cc", "Cs") and c != "\n"})
    assert not bad, f"{where}: control characters sent to the terminal: {bad}"
    actions = [s.meta["@click"] for s in styles if s.meta and "@click" in s.meta]
    links = [s.link for s in styles if s.link]
    assert not actions and not links, f"{where}: markup from the store was applied: {actions} {links}"
    return text


def test_store_text_is_shown_literally_and_without_control_characters(tmp_path):
    db = tmp_path / "store.db"
    evil_store(db)

    async def main():
        app = WatchApp(db, cursor_blink=False, clock=lambda: FIXED_NOW, interval=0.1)
        async with app.run_test(size=(220, 160), notifications=True) as pilot:  # toasts shown too
            await wait_for(pilot, lambda: app.runs)
            await pilot.pause()
            assert "run" + MARKUP in assert_safe(app, "runs")
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, RolloutsScreen) and app.screen.shown)
            assert "␛[2J" in assert_safe(app, "rollouts")
            await pilot.press("enter")
            await wait_for(
                pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.query("#verdict")
            )
            await pilot.press("e", "end")
            await pilot.pause()
            assert len(app.screen.query(EventItem)) == 10
            text = assert_safe(app, "a rollout")
            assert "message ␛[2J␛]52;c;aGk=␇␍" in text
            assert "[@click=app.quit]Q[/]" in text and "[link=file:///etc/passwd]L[/link]" in text
            assert "\ufffd" in text  # the lone surrogate, replaced
            await pilot.press("y")  # "copied r[b]1[/]": a notification
            await pilot.pause()
            assert "copied r[b]1[/]" in assert_safe(app, "a notification")
            assert app.clipboard == "r[b]1[/]"
            await pilot.press("j")
            await wait_for(pilot, lambda: isinstance(app.screen, JsonScreen) and app.screen.text)
            await pilot.pause()
            assert_safe(app, "the JSON")
            data = json.loads(app.screen.text)  # still JSON, and the same data
            assert data["events"][2]["payload"]["content"] == "text " + EVIL + SURROGATE
            assert data["rollout"]["task_id"] == "t" + EVIL

    anyio.run(main)


def test_a_click_on_store_text_runs_no_action(tmp_path):
    db = tmp_path / "store.db"
    store_of(db, [("A", 0.5)])  # rollout r000, whose check's detail is a click action
    with Store(db) as store, store.transaction():
        store.db.execute(
            "INSERT INTO verdicts VALUES ('r000', 0, 'checks', 0.5, 0, NULL, 0.1, ?)", [BASE.isoformat()]
        )
        store.db.execute(
            "INSERT INTO verdict_scores VALUES ('r000', 0, 'check', 0.5, 1, '[@click=app.quit]QUITQUITQUIT[/]')"
        )

    async def main():
        app = WatchApp(db, cursor_blink=False, clock=lambda: FIXED_NOW, interval=0.1, run_id="run")
        async with app.run_test(size=(160, 60)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, RolloutsScreen) and app.screen.shown)
            await pilot.press("enter")
            await wait_for(
                pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.query("#verdict")
            )
            await pilot.pause()
            verdict = app.screen.query_one("#verdict")
            lines = [
                "".join(s.text for s in strip) for strip in verdict.render_lines(verdict.region.reset_offset)
            ]
            y = next(i for i, line in enumerate(lines) if "QUIT" in line)
            await pilot.click("#verdict", offset=(lines[y].index("QUIT") + 2, y))
            await pilot.pause(0.3)
            assert app.is_running and isinstance(app.screen, RolloutScreen)

    anyio.run(main)


def test_clean_escapes_control_characters():
    from clawsdk_tui.render import clean

    assert clean("a\x1b[2J\x07\r\x9b\x85\x7f\ud800b") == "a␛[2J␇␍\ufffd\ufffd␡\ufffdb"
    assert clean("one\n\ttwo\r\n") == "one␊␉two␍␊"  # one line: a table cell, a header
    assert clean("one\n\ttwo\r\n", lines=True) == "one\n\ttwo\n"  # a body keeps its lines and tabs
    assert clean("plain [b]text[/b] é 漢") == "plain [b]text[/b] é 漢"


def test_the_verdict_table_is_text_not_markup():
    table = verdict_table(
        {
            "verifier": "v[/]",
            "score": 1.0,
            "passed": 1,
            "subscores": [{"name": "n[/]", "score": 1.0, "weight": 1, "detail": MARKUP + CONTROL}],
        }
    )
    console = Console(width=300, color_system="truecolor", force_terminal=True)
    segments = list(console.render(table))
    text = "".join(s.text for s in segments)
    assert "v[/]" in text and "n[/]" in text and "[@click=app.quit]Q[/]" in text and "␛[2J" in text
    assert not any(s.style and (s.style.link or s.style.meta) for s in segments)


def test_very_long_lines_are_cut():
    long = "x" * 1_000_000
    for event in (
        {"seq": 0, "kind": "error", "payload": {"kind": "k", "message": long}},
        {"seq": 1, "kind": "tool_call", "payload": {"tool": long, "args": {}}},
        {"seq": 2, "kind": "tool_result", "payload": {"tool": "read", "content": long}},
        {"seq": 3, "kind": "verifier", "payload": {"check": long, "score": 1, "detail": "d"}},
    ):
        view = render_event(event)
        body = view.body.plain if view.body is not None else ""
        assert len(view.head.plain) < 1_000 and len(body) < 25_000, event["kind"]


def test_a_payload_of_another_shape_shows_as_json():
    view = render_event({"seq": 0, "kind": "model_response", "payload": {"message": "just text\x1b[2J"}})
    assert "just text␛[2J" in view.body.plain and "model_response" in view.head.plain
