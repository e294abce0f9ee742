"""clawsdk's one tool-call format: rendering for prompts and SFT, and the parser's tolerance."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clawsdk.models import toolcalls as tc

TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def test_render_round_trip_of_a_conversation():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is in a.txt?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
            {"id": "c2", "type": "function", "function": {"name": "read", "arguments": {"path": "b.txt"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
        {"role": "tool", "tool_call_id": "c2", "content": "beta"},
        {"role": "assistant", "content": "a.txt says alpha."},
    ]
    out = tc.render_messages(messages, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant"]
    assert out[0]["content"].startswith("Be brief.\n\n# Tools") and '"name": "read"' in out[0]["content"]
    assert out[2]["content"] == ('Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call>'
                                 '\n<tool_call>\n{"name": "read", "arguments": {"path": "b.txt"}}\n</tool_call>')
    assert out[3]["content"] == "<tool_response>\nalpha\n</tool_response>\n<tool_response>\nbeta\n</tool_response>"
    assert set(out[0]) == {"role", "content"} and set(out[3]) == {"role", "content"}
    # what the model wrote parses back to the same calls
    parsed = tc.parse_tool_calls(out[2]["content"])
    assert parsed.content == "Let me look." and not parsed.errors
    assert [(c.name, c.arguments) for c in parsed.calls] == [("read", {"path": "a.txt"}), ("read", {"path": "b.txt"})]


def test_a_system_message_is_added_for_tools_when_there_is_none():
    out = tc.render_messages([{"role": "user", "content": "hi"}], TOOLS)
    assert out[0]["role"] == "system" and out[0]["content"].startswith("# Tools")
    assert tc.render_messages([{"role": "user", "content": "hi"}]) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("text, name, args", [
    ('<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>', "ls", {"path": "."}),
    ('<tool_call>{"name": "ls", "arguments": {"path": "."}}', "ls", {"path": "."}),  # cut at the stop string
    ('<tool_call>\n```json\n{"name": "ls", "arguments": {}}\n```\n</tool_call>', "ls", {}),
    ('<tool_call>{"name": "ls", "arguments": {"path": ".",},}</tool_call>', "ls", {"path": "."}),
    ("<tool_call>{'name': 'ls', 'arguments': {'path': '.'}}</tool_call>", "ls", {"path": "."}),
    ('<tool_call>{"name": "ls", "parameters": {"path": "."}}</tool_call>', "ls", {"path": "."}),
    ('<tool_call>{"name": "ls", "arguments": "{\\"path\\": \\".\\"}"}</tool_call>', "ls", {"path": "."}),
    ('<tool_call>{"function": {"name": "ls", "arguments": {"path": "."}}}</tool_call>', "ls", {"path": "."}),
    ('<tool_call>{"name": "ls", "arguments": {"path": "."}} trailing words</tool_call>', "ls", {"path": "."}),
    ('{"name": "ls", "arguments": {"path": "."}}', "ls", {"path": "."}),  # bare JSON, whole output
])
def test_lenient_where_the_intent_is_clear(text, name, args):
    parsed = tc.parse_tool_calls(text)
    assert not parsed.errors
    assert [(c.name, c.arguments) for c in parsed.calls] == [(name, args)]


@pytest.mark.parametrize("text, message", [
    ('<tool_call>{"name": "ls", "arguments": {"path": </tool_call>', "not valid JSON"),
    ('<tool_call>{"arguments": {}}</tool_call>', 'no "name"'),
    ('<tool_call>{"name": "ls", "arguments": [1, 2]}</tool_call>', "must be a JSON object"),
    ('<tool_call>{"name": "ls", "arguments": "{oops"}</tool_call>', "not valid JSON"),
    ("<tool_call>just words</tool_call>", "not valid JSON"),
    ("<tool_call>42</tool_call>", "expected a JSON object"),
])
def test_malformed_calls_are_reported_not_raised(text, message):
    parsed = tc.parse_tool_calls("Before. " + text)
    assert parsed.calls == [] and len(parsed.errors) == 1
    assert message in parsed.errors[0][1]
    assert parsed.content == "Before."
    # the assistant message keeps the broken block, so the agent finds it again
    msg = tc.message_from_text("Before. " + text)
    assert "tool_calls" not in msg and "<tool_call>" in msg["content"]


def test_plain_answers_and_several_calls():
    assert tc.parse_tool_calls("The answer is 4.").content == "The answer is 4."
    assert tc.parse_tool_calls('I think {"a": 1} is JSON').calls == []
    text = ('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]</tool_call>'
            '<tool_call>{"name": "c", "arguments": {}}</tool_call>')
    assert [c.name for c in tc.parse_tool_calls(text).calls] == ["a", "b", "c"]
    msg = tc.message_from_text(text)
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["a", "b", "c"]
    assert len({c["id"] for c in msg["tool_calls"]}) == 3 and msg["content"] is None
    assert json.loads(msg["tool_calls"][1]["function"]["arguments"]) == {"x": 1}


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                           max_leaves=10)


@given(name=st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True),
       args=st.dictionaries(st.text(max_size=10), json_values, max_size=4), prefix=st.text(max_size=40))
def test_whatever_the_renderer_writes_the_parser_reads(name, args, prefix):
    prefix = prefix.replace("<tool_call>", "").replace("</tool_call>", "")
    text = tc.assistant_text({"role": "assistant", "content": prefix, "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
    parsed = tc.parse_tool_calls(text)
    assert not parsed.errors and [(c.name, c.arguments) for c in parsed.calls] == [(name, args)]
    assert parsed.content == prefix.strip()


@given(st.text(max_size=300))
def test_the_parser_never_raises(text):
    tc.parse_tool_calls(text)
    tc.parse_tool_calls("<tool_call>" + text)
