"""A text tool call whose arguments hold NaN or Infinity (Python's json reads both, and 1e999 as Infinity) is
a malformed call: JSON has no such value. The tool-loop agent answers it with an error the model can read,
and nothing non-finite reaches a tool, the store or an SFT example."""

from __future__ import annotations

import sqlite3

import pytest
from clawsdk_plugins.agents.toolloop import ToolLoopAgent

from clawsdk import load_tasks, run_sync
from clawsdk.models.base import ChatResponse, Model
from clawsdk.models.toolcalls import message_from_text, parse_tool_calls
from tests.conftest import make_task


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "[1, NaN]", '{"x": -1e999}'])
def test_a_call_with_a_non_finite_number_is_malformed(value):
    call = f'{{"name": "exec", "arguments": {{"command": "echo hi", "n": {value}}}}}'
    text = f"<tool_call>\n{call}\n</tool_call>"
    parsed = parse_tool_calls(text)
    assert parsed.calls == []
    [(raw, why)] = parsed.errors
    assert '"n"' in raw and "exec" in why and "not a finite number" in why
    assert "tool_calls" not in message_from_text(text)


def test_arguments_as_a_json_string_with_nan_are_malformed_too():
    parsed = parse_tool_calls('<tool_call>{"name": "exec", "arguments": "{\\"n\\": NaN}"}</tool_call>')
    assert parsed.calls == [] and "not a finite number" in parsed.errors[0][1]


def test_finite_numbers_parse_as_before():
    text = '<tool_call>{"name": "exec", "arguments": {"n": 1e300, "m": -0.5}}</tool_call>'
    [call] = parse_tool_calls(text).calls
    assert call.arguments == {"n": 1e300, "m": -0.5}


NAN_CALL = '<tool_call>{"name": "exec", "arguments": {"command": "echo hi", "n": NaN}}</tool_call>'
WRITE_CALL = '<tool_call>{"name": "write", "arguments": {"path": "done.txt", "content": "done"}}</tool_call>'


class WritesNaN(Model):
    name = "writes-nan"

    def __init__(self):
        self.seen: list[str] = []

    async def chat(self, messages, tools=None, **params):
        self.seen.append(str(messages[-1].get("content")))
        if len(self.seen) == 1:
            text = NAN_CALL
        elif len(self.seen) == 2:
            text = WRITE_CALL
        else:
            text = "Done."
        return ChatResponse(message={"role": "assistant", "content": text}, usage={"completion_tokens": 5},
                            finish_reason="stop")


def test_the_tool_loop_answers_a_nan_call_with_an_error_and_the_store_stays_readable(tmp_path, db):
    tasks = load_tasks(str(make_task(tmp_path, "nan-call"))).tasks
    model = WritesNaN()
    [o] = run_sync(tasks, agent=ToolLoopAgent(model=model), db=db, sandbox="local", retries=0).outcomes
    assert (o.kind.value, o.passed) == ("ok", True)
    assert "could not be read" in model.seen[1] and "not a finite number" in model.seen[1]
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT tool FROM tool_calls").fetchall() == [("write",)]
        assert con.execute("SELECT count(*) FROM events WHERE NOT json_valid(payload)").fetchone() == (0,)
    finally:
        con.close()
