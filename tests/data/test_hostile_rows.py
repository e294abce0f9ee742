"""One hostile rollout cannot break an export or a training run: a history whose tool message has an id that is a
number or a name that is an object (Arrow refused the whole export), tool specs that are not functions, a
conversation that starts with the assistant (the chat template raised after the model had loaded), a tool call
with no name or with arguments that could not be read, a call after `finish` that never ran. Each is one rollout
left out (`unreadable: ...`), the others export; a hand-made row of that shape is refused before a model loads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.data.export import export_sft, load_rows
from clawsdk.data.select import Selection, select
from clawsdk.runtime.agent import Agent
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from tests.data.test_control_tokens import tiny_tokenizer, tool_loop
from tests.data.test_data_select_export import call, hello_task
from tests.data.test_export_verified import DONE, FIRST, TOOLS, WRITE, drop_reasons, export_cli, harness_runs

SAID = {"role": "assistant", "content": "Let me look."}


class Odd(Agent):
    """Does the task, and makes one odd call through the rollout's recorded tool session."""

    name = "odd"

    def __init__(self, tool: str, args):
        self.tool, self.args = tool, args

    async def run(self, ctx):
        await ctx.tools.call("write", {"path": "hello.txt", "content": "hello world"})
        await ctx.tools.call(self.tool, self.args)


def test_hostile_histories_and_calls_are_each_one_rollout_left_out(tmp_path):
    db = tmp_path / "store.db"
    ids = harness_runs(tmp_path, db, {
        "honest": ([FIRST, {"messages": ["$USER", "$REPLY0", "$RESULTS0"], "tools": TOOLS}], [WRITE, DONE]),
        "number-id": ([FIRST, {"messages": ["$USER", "$REPLY0", {"role": "tool", "tool_call_id": 7,
                                                                  "name": {"x": 1}, "content": "x"}]}], [SAID, DONE]),
        "tool-specs": ([{"messages": ["$USER"], "tools": [{}]}], [DONE]),
        "assistant-first": ([FIRST, {"messages": ["$REPLY0", "$USER"]}], [SAID, DONE]),
    })
    task = hello_task("hello-a")
    run_sync([task], agent=Odd("", {}), run_id="no-name", db=db)
    run_sync([task], agent=Odd("exec", ["ls"]), run_id="list-args", db=db)
    never_ran = call("finish", {"summary": "done"}) + "\n" + call("exec", {"command": "echo NEVER-RUN > proof.txt"})
    run_sync([task], agent=tool_loop([call("write", {"path": "hello.txt", "content": "hello world"}), never_ran]),
             run_id="after-finish", db=db)
    more, reasons = drop_reasons(db)
    ids.update(more)
    assert reasons.pop("honest") == "kept", reasons
    for run_id, reason in reasons.items():
        assert reason.startswith(f"unreadable: rollout {ids[run_id]}: "), reason
    assert "messages[2].tool_call_id: 7 is not an id" in reasons["number-id"]
    assert "tools[0]: not a function spec" in reasons["tool-specs"]
    assert "messages[0]: role 'assistant' where the conversation's first turn must be the user's" in reasons["assistant-first"]
    assert "tool_calls[0].function.name: missing or not a tool name ('')" in reasons["no-name"]
    assert "the arguments of exec could not be read" in reasons["list-args"]
    assert "exec after finish" in reasons["after-finish"]

    # every format, Arrow's too, and counted with a tokenizer (whose template raised on the assistant-first one)
    text = export_cli(db, tmp_path / "out", "h")
    assert "6 rollout(s) could not be read" in text and "h@v1: 1 sft rows" in text
    (row,) = load_rows(tmp_path / "out" / "h-v1")
    assert row["rollout_id"] == ids["honest"]
    with Store(db) as store:
        exp = export_sft(store, select(store, Selection(dedup=False)), tmp_path / "tok", name="t",
                         tokenizer=tiny_tokenizer())
    assert exp.n_rows == 1


ROW = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "name": "ls", "content": "a.txt"},
                    {"role": "assistant", "content": "done"}], "tools": [], "rollout_id": "r1"}


def _with(i: int, **change) -> dict:
    return {**ROW, "messages": [{**m, **change} if j == i else m for j, m in enumerate(ROW["messages"])]}


@pytest.mark.parametrize("row, expected", [
    (_with(3, tool_call_id=7), "messages[3].tool_call_id: 7 is not an id"),
    (_with(3, name={"x": 1}), "messages[3].name: {'x': 1} is not a tool name"),
    (_with(3, name=""), "messages[3].name: '' is not a tool name"),
    ({**ROW, "messages": ROW["messages"][:1] + ROW["messages"][2:]},
     "messages[1]: role 'assistant' where the conversation's first turn must be the user's"),
    ({**ROW, "tools": [{}]}, "tools[0]: not a function spec"),
    ({**ROW, "tools": [{"type": "function", "function": {"name": ""}}]}, "tools[0]: not a function spec"),
])
def test_train_refuses_a_hand_made_row_of_a_hostile_shape_before_the_model_loads(tmp_path, row, expected):
    folder = tmp_path / "hello-v1"
    folder.mkdir()
    manifest = {"format_version": 1, "id": "hello@v1", "name": "hello", "version": 1, "kind": "sft", "n_rows": 2}
    (folder / "dataset.json").write_text(json.dumps(manifest))
    (folder / "data.jsonl").write_text(json.dumps(ROW) + "\n" + json.dumps(row) + "\n")
    res = CliRunner().invoke(cli_main, ["train", "sft", "--db", str(tmp_path / "store.db"), "-d", str(folder),
                                        "--model", f"transformers:{tmp_path / 'no-such-model'}",
                                        "--out", str(tmp_path / "ckpt")])
    text = " ".join(res.output.split())
    assert res.exit_code == 2, text
    assert f"{folder / 'data.jsonl'}:2: {expected}" in text, text
    assert "no-such-model" not in text and not (tmp_path / "ckpt").exists()
