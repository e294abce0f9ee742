"""Conversations recorded from model events come out in the shape a chat dataset carries, whatever
shape the agent sent them in: black-box agents behind the recording proxy send what their SDK sends."""

from __future__ import annotations

import json

import pytest

from clawsdk.data.trajectory import trajectory_from_events
from clawsdk.store.events import parse_event

HARNESS = {"id": "r0123456789abcdef", "attempt": 0, "task_id": "t", "task_hash": "h", "agent": "harness"}
TOOL_LOOP = {**HARNESS, "agent": "tool-loop"}
SYSTEM = {"role": "system", "content": "You are an agent."}
USER = {"role": "user", "content": "Write done.txt"}
DONE = {"role": "assistant", "content": "All done."}


def _events(*kinds_payloads):
    return [parse_event({"seq": i, "kind": k, "payload": p}) for i, (k, p) in enumerate(kinds_payloads)]


def _asked(*messages):
    return ("model_request", {"messages": list(messages), "tools": None})


def _reply(message, **extra):
    return ("model_response", {"message": message, "finish_reason": "stop", **extra})


def _call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _messages(*events, rollout=HARNESS):
    return trajectory_from_events(rollout, _events(*events)).messages


def _pairs(messages):
    """(arguments of each call, the content of the tool message that names its id)."""
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    calls = [c for m in messages for c in m.get("tool_calls") or []]
    return [(c["function"]["arguments"], results.get(c["id"])) for c in calls]


@pytest.mark.parametrize("failed", [
    {"error": {"error": {"message": "context too long"}}, "status": 400},
    {"error": "the client closed the connection before the answer was complete", "status": 499,
     "abandoned": True, "partial": {"content": "I will wr"}},
])
def test_a_last_response_that_is_an_error_leaves_the_conversation_at_the_last_reply(failed):
    calls = {"role": "assistant", "content": None, "tool_calls": [_call("a", "ls", "{}")]}
    messages = _messages(
        _asked(SYSTEM, USER),
        _reply(calls),
        _asked(SYSTEM, USER, calls, {"role": "tool", "tool_call_id": "a", "content": "x"}),
        ("model_response", failed),
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert messages[-1]["tool_calls"][0]["function"]["name"] == "ls"


def test_a_rollout_whose_every_response_is_an_error_has_no_reply_to_learn_from():
    with pytest.raises(ValueError, match="rollout r0123456789abcdef has no model reply recorded"):
        _messages(_asked(SYSTEM, USER), ("model_response", {"error": "bad request", "status": 400}))


def test_a_request_recorded_without_messages_is_named_not_a_type_error():
    # another writer's model_request may lack `messages`: selection reports why, as for any unreadable rollout
    with pytest.raises(ValueError, match="rollout r0123456789abcdef: the request its last reply answers records no "
                                         "messages"):
        _messages(("model_request", {"tools": None}), _reply(DONE))


def test_a_reply_answers_the_request_it_names_while_a_side_call_was_in_flight():
    main = {"role": "user", "content": "MAIN TASK: write done.txt"}
    side = {"role": "user", "content": "SIDE CALL: give this chat a title"}
    write = {"role": "assistant", "content": None, "tool_calls": [_call("w", "write", "{}")]}
    events = [_asked(main), _asked(side), _reply({"role": "assistant", "content": "Done File"}, request=1),
              _reply(write, request=0)]
    assert [m["content"] for m in _messages(*events)][:1] == [main["content"]]
    # a reply that names no request (older stores, the tool-loop agent) answers the last one before it
    unnamed = [(kind, {k: v for k, v in p.items() if k != "request"}) for kind, p in events]
    assert [m["content"] for m in _messages(*unnamed)][:1] == [side["content"]]


def test_content_parts_are_flattened_to_text_and_a_part_that_is_not_text_is_refused():
    parts = [{"type": "text", "text": "Write "}, {"type": "text", "text": "done.txt"}]
    messages = _messages(_asked(SYSTEM, {"role": "user", "content": parts}),
                         _reply({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}))
    assert [m["content"] for m in messages] == ["You are an agent.", "Write done.txt", "Done."]
    image = {"role": "user", "content": [{"type": "text", "text": "this:"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png,"}}]}
    where = r"rollout r0123456789abcdef: messages\[1\]\.content\[1\] is a 'image_url' part"
    with pytest.raises(ValueError, match=where):
        _messages(_asked(SYSTEM, image), _reply(DONE))


def test_tool_results_answer_the_call_whose_id_they_name_in_whatever_order_they_come():
    calls = {"role": "assistant", "content": None, "tool_calls": [
        _call("call_A", "read", '{"path": "a.txt"}'), _call("call_B", "read", '{"path": "b.txt"}')]}
    # the history's assistant turns are replies the model gave (an export holds no other)
    messages = _messages(_asked(SYSTEM, USER), _reply(calls), _asked(SYSTEM, USER, calls,
                                {"role": "tool", "tool_call_id": "call_B", "content": "CONTENT OF B"},
                                {"role": "tool", "tool_call_id": "call_A", "content": "CONTENT OF A"}),
                         _reply(DONE))
    assert _pairs(messages) == [('{"path": "a.txt"}', "CONTENT OF A"), ('{"path": "b.txt"}', "CONTENT OF B")]
    # ids missing or repeated: by position, as before
    same = {**calls, "tool_calls": [{**c, "id": "call_0"} for c in calls["tool_calls"]]}
    messages = _messages(_asked(SYSTEM, USER), _reply(calls), _asked(SYSTEM, USER, same,
                                {"role": "tool", "tool_call_id": "call_0", "content": "first"},
                                {"role": "tool", "content": "second"}),
                         _reply(DONE))
    assert _pairs(messages) == [('{"path": "a.txt"}', "first"), ('{"path": "b.txt"}', "second")]


def test_developer_and_legacy_function_messages_are_system_and_tool_messages():
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "ls", "arguments": "{}"}}
    messages = _messages(_asked({"role": "developer", "content": "Dev rules"}, USER), _reply(legacy),
                         _asked({"role": "developer", "content": "Dev rules"}, USER, legacy,
                                {"role": "function", "name": "ls", "content": "done.txt"}),
                         _reply(DONE))
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    (call,) = messages[2]["tool_calls"]
    assert call["function"] == {"name": "ls", "arguments": "{}"}
    assert messages[3] == {"role": "tool", "content": "done.txt", "tool_call_id": call["id"], "name": "ls"}


def test_a_refusal_is_what_the_model_said_and_an_empty_assistant_turn_is_refused():
    messages = _messages(_asked(SYSTEM, USER),
                         _reply({"role": "assistant", "content": None, "refusal": "I can't help with that."}))
    assert messages[-1] == {"role": "assistant", "content": "I can't help with that."}
    with pytest.raises(ValueError, match=r"r0123456789abcdef: messages\[2\] is an assistant turn with no"):
        _messages(_asked(SYSTEM, USER, {"role": "assistant", "content": ""}, {"role": "user", "content": "go on"}),
                  _reply(DONE))


def test_an_empty_last_reply_ends_the_work_as_the_tool_loop_agent_reads_it():
    """Small models end with an empty answer, which the tool-loop agent takes for done: such passing rollouts
    were exported before, and must still be."""
    messages = _messages(_asked(SYSTEM, USER), _reply({"role": "assistant", "content": ""}), rollout=TOOL_LOOP)
    assert messages[-1]["role"] == "assistant" and not messages[-1].get("content")


def test_an_answer_that_broke_off_with_an_error_is_not_the_reply():
    """A 2xx stream that ended in an error event: its half-made calls were never run (OpenClaw drops the turn)."""
    from clawsdk.data.trajectory import trajectory_from_events

    events = [{"kind": "model_request", "seq": 0, "payload": {"messages": [SYSTEM, USER]}},
              {"kind": "model_response", "seq": 1, "payload": {"message": DONE}},
              {"kind": "model_request", "seq": 2, "payload": {"messages": [SYSTEM, USER, DONE, USER]}},
              {"kind": "model_response", "seq": 3, "payload": {
                  "message": {"role": "assistant", "content": None, "tool_calls": [_call("x", "exec", "{")]},
                  "error": {"message": "stream broke"}, "request": 2}}]
    t = trajectory_from_events({"id": "r1", "task_id": "t", "task_hash": "h"}, [parse_event(e) for e in events])
    assert t.messages[-1] == {"role": "assistant", "content": DONE["content"]} and len(t.messages) == 3


def test_only_the_tool_loop_agent_calls_tools_in_its_text():
    prose = ('To call a tool, models write <tool_call>{"name": "rm", "arguments": {"path": "/"}}</tool_call> '
             "in their output.")
    said = _messages(_asked(SYSTEM, USER), _reply({"role": "assistant", "content": prose}))
    assert said[-1] == {"role": "assistant", "content": prose}
    called = _messages(_asked(SYSTEM, USER), _reply({"role": "assistant", "content": prose}),
                       rollout=TOOL_LOOP)
    assert [c["function"]["name"] for c in called[-1]["tool_calls"]] == ["rm"]


def test_arguments_stay_json_text():
    calls = [_call("a", "note", '"hello"'), _call("b", "write", {"path": "done.txt"}),
             _call("c", "write", '{"path": "do')]
    messages = _messages(_asked(SYSTEM, USER),
                         _reply({"role": "assistant", "content": None, "tool_calls": calls}))
    args = [c["function"]["arguments"] for c in messages[-1]["tool_calls"]]
    assert args == ['"hello"', '{"path": "done.txt"}', '{"path": "do']  # the last: cut short, kept as written
    assert json.loads(args[0]) == "hello"


def test_a_token_count_that_is_not_a_number_counts_as_none():
    """A streamed usage chunk from some client said "completion_tokens": "12": the sum raised TypeError."""
    from clawsdk.data.trajectory import trajectory_from_events

    events = [{"kind": "model_request", "seq": 0, "payload": {"messages": [{"role": "user", "content": "go"}]}},
              {"kind": "model_response", "seq": 1, "payload": {"message": {"role": "assistant", "content": "ok"},
                                                               "usage": {"completion_tokens": "12"}}},
              {"kind": "model_request", "seq": 2, "payload": {"messages": [
                  {"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"},
                  {"role": "user", "content": "more"}]}},
              {"kind": "model_response", "seq": 3, "payload": {"message": {"role": "assistant", "content": "done"},
                                                               "usage": {"completion_tokens": 5}}}]
    t = trajectory_from_events({"id": "r1", "task_id": "t", "task_hash": "h"}, [parse_event(e) for e in events])
    assert t.completion_tokens == 5 and t.messages[-1]["content"] == "done"
