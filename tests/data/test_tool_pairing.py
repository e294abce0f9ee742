"""A rebuilt conversation pairs each tool call with the result that names it (`call`: the call's seq);
results of stores written before results named their call pair in order, as they always did."""

from __future__ import annotations

from clawsdk.data.trajectory import PromptStyle, trajectory_from_events
from clawsdk.store.events import parse_event

ROLLOUT = {"id": "r0123456789abcdef", "attempt": 0, "task_id": "t", "task_hash": "h"}


def _events(*kinds_payloads):
    return [parse_event({"seq": i, "kind": k, "payload": p}) for i, (k, p) in enumerate(kinds_payloads)]


def _pairs(events):
    traj = trajectory_from_events(ROLLOUT, events, listing=([], {}), style=PromptStyle(finish_tool=False))
    msgs = traj.messages[2:]
    # not strict: the conversation may end on a call left unanswered
    return [(m["tool_calls"][0]["function"]["arguments"], r["content"]) for m, r in zip(msgs[::2], msgs[1::2], strict=False)]


def test_results_that_name_their_call_pair_with_it_whatever_order_they_finished_in():
    events = _events(
        ("tool_call", {"tool": "exec", "args": {"command": "slow"}}),
        ("tool_call", {"tool": "exec", "args": {"command": "fast"}}),
        ("tool_result", {"tool": "exec", "call": 1, "is_error": False, "content": "fast out"}),
        ("tool_result", {"tool": "exec", "call": 0, "is_error": True, "content": "slow out"}),
    )
    assert _pairs(events) == [('{"command": "slow"}', "error: slow out"), ('{"command": "fast"}', "fast out")]


def test_results_of_older_stores_pair_in_order_and_a_call_left_unanswered_ends_the_conversation():
    events = _events(
        ("tool_call", {"tool": "ls", "args": {}}),
        ("tool_result", {"tool": "ls", "is_error": False, "content": "a.txt"}),
        ("tool_call", {"tool": "read", "args": {"path": "a.txt"}}),
        ("tool_call", {"tool": "read", "args": {"path": "b.txt"}}),
        ("tool_result", {"tool": "read", "is_error": False, "content": "first"}),
        ("tool_call", {"tool": "write", "args": {}}),
    )
    assert _pairs(events) == [("{}", "a.txt"), ('{"path": "a.txt"}', "first")]
    from clawsdk.data.trajectory import tool_calls_answered  # the pairing every consumer uses

    answered = [(c.seq, r and r.content) for c, r in tool_calls_answered(events)]
    assert answered == [(0, "a.txt"), (2, "first"), (3, None), (5, None)]
