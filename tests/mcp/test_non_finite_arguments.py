"""NaN and Infinity in a tool call's arguments are not JSON: `serve` and the proxy refuse them when they parse
a request, and an in-process agent (a model's text call, a Python agent) gets the same answer from the tool
session: an error result it can read. Sent on, they reached the store, where one made json_extract fail for
every row."""

from __future__ import annotations

import math
import sqlite3

import pytest

from clawsdk import Store, load_tasks, run_sync
from clawsdk.mcp.session import arguments_problem
from tests.conftest import make_task
from tests.mcp.test_tool_arguments import BadArguments  # tries the call, then does the task


@pytest.mark.parametrize("args", [
    {"command": "echo hi", "extra": math.nan},
    {"command": "echo hi", "n": math.inf},
    {"command": "echo hi", "deep": [{"x": -math.inf}]},
], ids=["nan", "inf", "nested-minus-inf"])
def test_non_finite_arguments_are_an_error_result_and_the_store_stays_readable(tmp_path, db, args):
    tasks = load_tasks(str(make_task(tmp_path, "non-finite-args"))).tasks
    agent = BadArguments(args)
    [o] = run_sync(tasks, agent=agent, db=db, sandbox="local", retries=0).outcomes
    assert (o.kind.value, o.passed) == ("ok", True)
    assert "not a finite number" in agent.told[0] and "send a JSON object" in agent.told[0]
    con = sqlite3.connect(db)
    try:  # the audit's query: failed with "malformed JSON" for the whole store
        assert con.execute("SELECT tool FROM tool_calls ORDER BY seq").fetchall() == [("exec",), ("write",)]
        assert con.execute("SELECT is_error FROM tool_results ORDER BY seq").fetchall() == [(1,), (0,)]
    finally:
        con.close()
    with Store(db) as store:
        calls = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "tool_call"]
    assert "unreadable" in calls[0]["args"]  # recorded in outline, as other arguments a server cannot take


def test_finite_floats_are_arguments_like_any_other():
    assert arguments_problem({"x": 1.5, "y": [0.0, -2e300], "z": {"w": 1e-300}}) is None
