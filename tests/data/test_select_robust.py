"""Selection and export over stores that hold odd rollouts: one unreadable rollout drops alone, a preference
pair never mixes two agents' prompts, and a reply cut at its token limit is not trained on as finished."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.data.export import EmptyExport, export_preferences, load_rows, read_manifest
from clawsdk.data.select import Selection, load_candidates, select
from clawsdk.models.base import ChatResponse
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from tests.data.test_data_select_export import ScriptedModel, call, hello_task

WRITE = call("write", {"path": "hello.txt", "content": "hello world"})
FINISH = call("finish", {"summary": "wrote it"})


def _tool_loop(replies: list[str], **options):
    from clawsdk_plugins.agents.toolloop import ToolLoopAgent

    return ToolLoopAgent(model=ScriptedModel(replies), **options)


def _only(store: Store, run_id: str) -> str:
    return store.query("SELECT id FROM rollouts WHERE run_id = ?", [run_id])[0]["id"]


def _edit_last_request(store: Store, rollout_id: str, edit) -> None:
    """Rewrite the history of a rollout's last model request, as an odd client could have sent it."""
    row = store.query("SELECT id, payload FROM events WHERE rollout_id = ? AND kind = 'model_request' "
                      "ORDER BY seq DESC LIMIT 1", [rollout_id])[0]
    payload = json.loads(row["payload"])
    edit(next(m for m in payload["messages"] if m.get("tool_calls"))["tool_calls"])
    store.db.execute("UPDATE events SET payload = ? WHERE id = ?", [json.dumps(payload), row["id"]])


def test_a_rollout_that_cannot_be_rebuilt_is_dropped_alone_naming_it(tmp_path):
    """One odd history (a tool call without a name, `function` as text) or a task whose skill is not installed
    here raised out of load_candidates, and `data select`/`export` failed for every rollout of the store."""
    db = tmp_path / "store.db"
    a, b = hello_task("hello-a"), hello_task("hello-b", "bye")
    run_sync([a, b], agent="oracle", run_id="oracle", db=db)
    for run_id in ("noname", "fnstr"):
        run_sync([a], agent=_tool_loop([WRITE, FINISH]), run_id=run_id, db=db)
    with Store(db) as store:
        odd = {run_id: _only(store, run_id) for run_id in ("noname", "fnstr")}
        _edit_last_request(store, odd["noname"], lambda calls: calls[0]["function"].pop("name"))
        _edit_last_request(store, odd["fnstr"], lambda calls: calls[0].update(function="write"))
        # hello-b was run where a `browser` skill was installed; it is not here
        task = store.query("SELECT hash, data FROM tasks WHERE json_extract(data, '$.id') = 'hello-b'")[0]
        data = {**json.loads(task["data"]), "tools": ["core", "browser"]}
        store.db.execute("UPDATE tasks SET data = ? WHERE hash = ?", [json.dumps(data), task["hash"]])
        odd["browser"] = store.query("SELECT id FROM rollouts WHERE task_id = 'hello-b'")[0]["id"]
        result = select(store, Selection(dedup=False))
    reasons = {c.rollout_id: c.reason for c in result.candidates}
    for rid in odd.values():
        assert reasons[rid].startswith("unreadable: ") and rid in reasons[rid], reasons[rid]
    assert "no skill named 'browser'" in reasons[odd["browser"]]
    assert result.reasons() == {"unreadable": 3} and len(result.kept) == 1  # the oracle's hello-a

    runner = CliRunner()
    res = runner.invoke(cli_main, ["data", "select", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["reasons"] == {"unreadable": 3}
    out = ["--out", str(tmp_path / "out"), "--format", "jsonl"]
    res = runner.invoke(cli_main, ["data", "export", "--db", str(db), "--name", "sft", *out])
    text = " ".join(res.output.split())
    assert res.exit_code == 0, text
    assert "3 rollout(s) could not be read" in text and all(rid in text for rid in odd.values())
    assert "sft@v1: 1 sft rows" in text
    assert read_manifest(tmp_path / "out" / "sft-v1")["dropped"] == {"unreadable": 3}
    res = runner.invoke(cli_main, ["data", "export", "--db", str(db), "--kind", "preference", "--name", "p",
                                   *out])
    assert res.exit_code == 2 and "3 rollout(s) could not be read" in " ".join(res.output.split())
    assert "no preference pairs" in res.output


def test_an_interrupt_while_reading_a_rollout_is_not_taken_for_an_unreadable_one(tmp_path, monkeypatch):
    db = tmp_path / "store.db"
    run_sync([hello_task("hello-a")], agent="oracle", run_id="oracle", db=db)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules["clawsdk.data.select"], "trajectory_from_events", interrupted)
    with Store(db) as store, pytest.raises(KeyboardInterrupt):
        load_candidates(store, Selection())


def _prompt_and_tools(c):
    t = c.trajectory
    n = next(i for i, m in enumerate(t.messages) if m["role"] == "assistant")
    return t.messages[:n], t.tools


def test_preference_pairs_never_mix_two_agents_prompts_or_tools(tmp_path):
    """The oracle (the tool-loop agent's frame, every tool) passed and an agent with its own prompt and only
    `write` failed: the pair held the oracle's prompt and tools with the other agent's answer as rejected."""
    db = tmp_path / "store.db"
    a = hello_task("hello-a")
    run_sync([a], agent="oracle", run_id="oracle", db=db)
    other = {"system_prompt": "You are OtherAgent. Only write files.", "tools": ["write"]}
    wrong = call("write", {"path": "hello.txt", "content": "nope"})
    run_sync([a], agent=_tool_loop([wrong, FINISH], **other), run_id="other-bad", db=db)
    with Store(db) as store:
        cands = [c for c in load_candidates(store, Selection()) if not c.reason]
        assert _prompt_and_tools(cands[0]) != _prompt_and_tools(cands[1])
        with pytest.raises(EmptyExport, match="were made with different prompts or tools"):
            export_preferences(store, cands, tmp_path / "out", name="p", formats=["jsonl"])

        # the same agent passing too: a pair of its own two rollouts, under the prompt both were given
        run_sync([a], agent=_tool_loop([WRITE, FINISH], **other), run_id="other-good", db=db)
        cands = [c for c in load_candidates(store, Selection()) if not c.reason]
        exp = export_preferences(store, cands, tmp_path / "out", name="p", formats=["jsonl"])
    (row,) = load_rows(exp.path)
    by_id = {c.rollout_id: c for c in cands}
    chosen, rejected = by_id[row["chosen_rollout_id"]], by_id[row["rejected_rollout_id"]]
    assert chosen.rollout["run_id"] == "other-good" and rejected.rollout["run_id"] == "other-bad"
    assert (row["prompt"], row["tools"]) == _prompt_and_tools(rejected) == _prompt_and_tools(chosen)
    offered = {t["function"]["name"] for t in row["tools"]}
    assert {c["function"]["name"] for m in row["rejected"] for c in m.get("tool_calls") or []} <= offered


class CutModel(ScriptedModel):
    """Its first reply stops at the token limit (finish_reason "length"), half way into a tool call."""

    cut = True

    async def chat(self, messages, tools=None, **params):
        response = await super().chat(messages, tools, **params)
        if self.cut:
            self.cut = False
            response = ChatResponse(message=response.message, usage=response.usage, finish_reason="length")
        return response


def test_a_rollout_with_a_reply_cut_at_its_token_limit_is_dropped_unless_kept(tmp_path):

    db = tmp_path / "store.db"
    from clawsdk_plugins.agents.toolloop import ToolLoopAgent
    agent = ToolLoopAgent(model=CutModel([WRITE, FINISH]))
    run_sync([hello_task("hello-a")], agent=agent, run_id="cut", db=db)
    with Store(db) as store:
        (c,) = select(store, Selection()).candidates
        assert c.reason == "truncated: model reply 1 of 2 was cut at its token limit (finish_reason length)"
        assert c.trajectory is not None  # still shown in the ledger with its turns and tokens
        assert [c.reason for c in load_candidates(store, Selection())] == [c.reason]  # preference pool too
        assert select(store, Selection(keep_truncated=True)).candidates[0].reason == "kept"
    runner = CliRunner()
    res = runner.invoke(cli_main, ["data", "select", "--db", str(db), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["reasons"] == {"truncated": 1}, res.output
    res = runner.invoke(cli_main, ["data", "select", "--db", str(db), "--json", "--keep-truncated"])
    assert res.exit_code == 0 and json.loads(res.output)["kept"] == 1, res.output
    res = runner.invoke(cli_main, ["data", "export", "--db", str(db), "--name", "sft", "-o", str(tmp_path)])
    assert res.exit_code == 2 and "truncated 1" in " ".join(res.output.split()), res.output
