"""NaN and Infinity are not JSON: SQLite's json_extract refuses a row holding one ("malformed JSON"), and the
`tool_calls` and `tool_results` views failed for the whole store over one such number. The store writes
them as null, whoever recorded them."""

from __future__ import annotations

import json
import math
import sqlite3

from clawsdk import load_tasks, run_sync
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.store.store import dumps
from tests.conftest import make_task

NON_FINITE = {"nan": math.nan, "inf": math.inf, "minus_inf": -math.inf,
              "nested": [{"x": math.nan}, (math.inf, 1.5)], "finite": 2.5, "text": "NaN"}


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} in the store's JSON")
    return json.loads(text, parse_constant=refuse)


def test_dumps_writes_nan_and_infinity_as_null():
    assert _strict(dumps(NON_FINITE)) == {"nan": None, "inf": None, "minus_inf": None,
                                          "nested": [{"x": None}, [None, 1.5]], "finite": 2.5, "text": "NaN"}
    assert dumps({"a": 1.0, "b": "é"}) == '{"a":1.0,"b":"é"}'  # the usual encoding otherwise


class RecordsNonFinite(Agent):
    """Writes NaN and Infinity where a payload can carry them: a note and a model reply (logprobs)."""

    name = "records-non-finite"

    async def run(self, ctx: AgentContext) -> None:
        await ctx.recorder.record("note", {"event": "odd", **NON_FINITE})
        await ctx.recorder.record("model_response", {"message": {"role": "assistant", "content": "hi"},
                                                     "logprobs": [-math.inf, math.nan]})
        await ctx.tools.call("write", {"path": "done.txt", "content": "done"})


def test_a_payload_with_nan_or_infinity_leaves_the_store_readable_by_json_extract(tmp_path, db):
    tasks = load_tasks(str(make_task(tmp_path, "non-finite"))).tasks
    [o] = run_sync(tasks, agent=RecordsNonFinite(), db=db, sandbox="local", retries=0).outcomes
    assert (o.kind.value, o.passed) == ("ok", True)
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT tool FROM tool_calls").fetchall() == [("write",)]
        assert con.execute("SELECT tool, is_error FROM tool_results").fetchall() == [("write", 0)]
        assert con.execute("SELECT count(*) FROM events WHERE NOT json_valid(payload)").fetchone() == (0,)
        note = con.execute("SELECT json_extract(payload, '$.nan'), json_extract(payload, '$.nested[1]'), "
                           "json_extract(payload, '$.finite') FROM events WHERE kind = 'note' "
                           "AND json_extract(payload, '$.event') = 'odd'").fetchone()
        assert note == (None, "[null,1.5]", 2.5)
    finally:
        con.close()


def test_a_value_json_cannot_hold_for_another_reason_still_raises():
    loop: list = []
    loop.append(loop)
    try:
        dumps({"loop": loop})
    except ValueError as e:
        assert "ircular" in str(e)
    else:
        raise AssertionError("a circular value was encoded")
