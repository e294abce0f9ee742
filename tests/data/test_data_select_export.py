"""Selection over a real store, exports that read back as the store holds them, lineage rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.data import lineage
from clawsdk.data.export import (
    FORMAT_VERSION,
    drop_nulls,
    export_preferences,
    export_rl,
    export_sft,
    load_hf,
    load_rows,
    read_manifest,
)
from clawsdk.data.select import Selection, load_candidates, select
from clawsdk.models.base import ChatResponse, Model
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from clawsdk.tasks.model import Limits, Task, VerifierSpec


def hello_task(task_id: str, text: str = "hello world") -> Task:
    return Task(
        id=task_id,
        instruction=f"Write '{text}' into hello.txt.",
        category="content & domain",
        tools=["core"],
        verifier=VerifierSpec(checks=[{"type": "text_equals", "path": "hello.txt", "text": text}]),
        solution=[
            {"tool": "ls", "args": {"path": "."}},
            {"tool": "write", "args": {"path": "hello.txt", "content": text}},
        ],
        limits=Limits(timeout_s=30, tool_timeout_s=10, verifier_timeout_s=20),
    )


class ScriptedModel(Model):
    """A chat model that answers from a list, so the real tool-loop agent records real model events."""

    name = "scripted:test"

    def __init__(self, replies: list[str]):
        self.replies = list(replies)

    async def chat(self, messages, tools=None, **params):
        from clawsdk.models.toolcalls import message_from_text

        text = self.replies.pop(0) if self.replies else "done"
        return ChatResponse(
            message=message_from_text(text),
            usage={"prompt_tokens": 10, "completion_tokens": 7},
            finish_reason="stop",
        )


def call(name: str, args: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """One store: oracle rollouts (2 samples of a task, one task), and tool-loop rollouts of a scripted
    model: one that passes after a failed tool call, one that writes the wrong text."""
    from clawsdk_plugins.agents.toolloop import ToolLoopAgent

    db = tmp_path / "store.db"
    a, b = hello_task("hello-a"), hello_task("hello-b", "bye")
    run_sync([a, b], agent="oracle", samples=2, run_id="oracle-run", db=db)
    good = ToolLoopAgent(
        model=ScriptedModel(
            [
                call("read", {"path": "missing.txt"}),
                call("write", {"path": "hello.txt", "content": "hello world"}),
                call("finish", {"summary": "wrote it"}),
            ]
        )
    )
    run_sync([a], agent=good, run_id="model-good", db=db)
    bad = ToolLoopAgent(
        model=ScriptedModel([call("write", {"path": "hello.txt", "content": "nope"}), "I am done."])
    )
    run_sync([a], agent=bad, run_id="model-bad", db=db)
    return db


def test_selection_rules_keep_and_drop_with_reasons(store_path):
    with Store(store_path) as store:
        everything = select(store, Selection(min_reward=None, dedup=False))
        assert len(everything.candidates) == 6 and len(everything.kept) == 6
        result = select(store, Selection())  # defaults: reward 1.0, ending ok, dedup
        reasons = {
            (c.rollout["run_id"], c.rollout["task_id"], c.rollout["sample"]): c.reason
            for c in result.candidates
        }
        # two oracle samples of one task make the same calls: the second is a duplicate
        assert reasons[("oracle-run", "hello-a", 0)] == "kept"
        assert reasons[("oracle-run", "hello-a", 1)].startswith("dedup:")
        assert reasons[("model-bad", "hello-a", 0)].startswith("min_reward:")
        assert reasons[("model-good", "hello-a", 0)] == "kept"
        assert result.reasons() == {"dedup": 2, "min_reward": 1}

        strict = select(store, Selection(max_tool_error_rate=0.0, runs=["model-good", "oracle-run"]))
        model_good = next(c for c in strict.candidates if c.rollout["run_id"] == "model-good")
        assert model_good.reason.startswith("max_tool_error_rate: 1/2")
        # every passing trajectory has 3 assistant turns (oracle: ls, write, finish)
        assert select(store, Selection(max_turns=2)).reasons() == {"max_turns": 5, "min_reward": 1}
        capped = select(store, Selection(dedup=False, per_task_cap=1, runs=["oracle-run"]))
        assert [c.reason.split(":")[0] for c in capped.candidates] == [
            "kept",
            "per_task_cap",
            "kept",
            "per_task_cap",
        ]
        best = select(store, Selection(min_reward=None, best_of=1, runs=["model-good", "model-bad"]))
        assert [c.rollout["run_id"] for c in best.kept] == ["model-good"]
        assert select(store, Selection(exclude_tasks=["hello-a"])).reasons()["excluded"] == 4
        assert [c.rollout["agent"] for c in select(store, Selection(agents=["oracle"])).kept] == [
            "oracle"
        ] * 2
        with pytest.raises(LookupError, match="no run nope"):
            select(store, Selection(runs=["nope"]))


def test_sft_export_reads_back_as_the_store_holds_it(store_path, tmp_path):
    import datasets

    with Store(store_path) as store:
        exp = export_sft(store, select(store, Selection()), tmp_path / "out", name="hello")
        events = {c: store.events(c) for c in store.query("SELECT id FROM rollouts") for c in [c["id"]]}
    assert exp.dataset_id == "hello@v1" and exp.path.name == "hello-v1" and exp.n_rows == 3
    rows = load_rows(exp.path)
    from_disk = list(load_hf(exp.path))
    from_parquet = list(
        datasets.load_dataset("parquet", data_files=str(exp.path / "data.parquet"), split="train")
    )
    for arrow_rows in (from_disk, from_parquet):
        # Arrow pads every message to the same keys (None) and holds tools as a JSON string (TRL reads both)
        assert [drop_nulls({**r, "tools": json.loads(r["tools"])}) for r in arrow_rows] == [
            drop_nulls(r) for r in rows
        ]
    for row in rows:
        evs = events[row["rollout_id"]]
        store_calls = [(e["payload"]["tool"], e["payload"]["args"]) for e in evs if e["kind"] == "tool_call"]
        store_results = [e["payload"]["content"] for e in evs if e["kind"] == "tool_result"]
        msgs = row["messages"]
        calls = [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for m in msgs
            if m["role"] == "assistant"
            for c in m.get("tool_calls") or []
        ]
        results = [m["content"].removeprefix("error: ") for m in msgs if m["role"] == "tool"]
        # every tool call in the store is an assistant call; the last one is `finish`
        assert calls[: len(store_calls)] == store_calls and calls[-1][0] == "finish"
        assert results == store_results
        assert (
            (msgs[0]["role"] == "system"
            and msgs[1] == {"role": "user", "content": "Write 'hello world' into hello.txt."})
            or msgs[1]["content"].startswith("Write")
        )
        assert {t["function"]["name"] for t in row["tools"]} >= {"read", "write", "ls", "finish"}
        ids = [c["id"] for m in msgs if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        assert [m["tool_call_id"] for m in msgs if m["role"] == "tool"] == ids[: len(results)]
    # the oracle's rebuilt conversation frames the task exactly as the tool-loop agent did
    oracle = next(r for r in rows if r["agent"] == "oracle" and r["task_id"] == "hello-a")
    model = next(r for r in rows if r["agent"] == "tool-loop")
    assert oracle["messages"][:2] == model["messages"][:2] and oracle["tools"] == model["tools"]
    from trl.data_utils import is_conversational

    assert is_conversational(rows[0]) and is_conversational(from_disk[0])


def test_exports_are_versioned_and_recorded_with_their_rollouts(store_path, tmp_path):
    with Store(store_path) as store:
        first = export_sft(store, select(store, Selection()), tmp_path, name="hello", formats=["jsonl"])
        second = export_sft(
            store,
            select(store, Selection(runs=["oracle-run"])),
            tmp_path,
            name="hello",
            formats=["jsonl"],
            style="text",
        )
        again = export_sft(store, select(store, Selection()), tmp_path, name="hello", formats=["jsonl"])
        assert (first.dataset_id, second.dataset_id, again.dataset_id) == ("hello@v1", "hello@v2", "hello@v3")
        # the same rollouts export to the same bytes
        assert (
            lineage.dataset(store, "hello@v1")["content_hash"]
            == lineage.dataset(store, "hello@v3")["content_hash"]
        )
        assert lineage.dataset(store, "hello")["id"] == "hello@v3"  # a name means its latest version
        kept = [c.rollout_id for c in select(store, Selection()).kept]
        assert [r["rollout_id"] for r in lineage.dataset_rows(store, "hello@v1")] == kept
        row = lineage.dataset(store, "hello@v2")
        assert row["kind"] == "sft" and row["n_rows"] == 2 and row["selection"]["runs"] == ["oracle-run"]
        cid = lineage.record_checkpoint(
            store,
            trainer="trl-sft",
            base_model="/base",
            path=str(tmp_path / "ck"),
            dataset_id="hello@v1",
            metrics={"steps": 2},
        )
        child = lineage.record_checkpoint(
            store,
            trainer="trl-grpo",
            base_model=str(tmp_path / "ck"),
            path=str(tmp_path / "ck2"),
            dataset_id=None,
            parent_id=cid,
            runs=["model-bad"],
        )
        behind = lineage.rollouts_behind(store, child)
        bad = store.query("SELECT id FROM rollouts WHERE run_id = 'model-bad'")[0]["id"]
        assert set(behind) == set(kept) | {bad}
    text_rows = load_rows(second.path)
    # style text: plain messages in clawsdk's tool-call format, no tools column
    assert "tools" not in text_rows[0] and "<tools>" in text_rows[0]["messages"][0]["content"]
    assert all(set(m) == {"role", "content"} for m in text_rows[0]["messages"])
    assert (
        '<tool_call>\n{"name": "write", "arguments": {"path": "hello.txt", "content": "hello world"}}'
        in text_rows[0]["messages"][4]["content"]
    )
    manifest = read_manifest(first.path)
    assert manifest["format_version"] == FORMAT_VERSION and manifest["n_rows"] == 3
    (first.path / "dataset.json").write_text(json.dumps({**manifest, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(ValueError, match="newer than this clawsdk reads"):
        read_manifest(first.path)


def test_preference_pairs_and_rl_prompt_sets(store_path, tmp_path):
    with Store(store_path) as store:
        cands = [
            c for c in load_candidates(store, Selection(runs=["model-good", "model-bad"])) if not c.reason
        ]
        pairs = export_preferences(store, cands, tmp_path, name="prefs")
        rows = load_rows(pairs.path)
        assert len(rows) == 1
        pair = rows[0]
        assert pair["chosen_reward"] == 1.0 and pair["rejected_reward"] == 0.0
        assert [m["role"] for m in pair["prompt"]] == ["system", "user"]
        assert pair["chosen"][0]["role"] == pair["rejected"][0]["role"] == "assistant"
        roles = {r["role"]: r["rollout_id"] for r in lineage.dataset_rows(store, pairs.dataset_id)}
        assert roles == {"chosen": pair["chosen_rollout_id"], "rejected": pair["rejected_rollout_id"]}

        tasks = [store.task(h["task_hash"]) for h in store.query("SELECT DISTINCT task_hash FROM rollouts")]
        rl = export_rl(store, tasks, tmp_path, name="prompts")
        prompts = load_rows(rl.path)
        assert {p["task_id"] for p in prompts} == {"hello-a", "hello-b"}
        text = json.dumps(prompts)
        assert "solution" not in text and 'hello.txt", "content"' not in text  # references, not answers
        assert all(store.task(p["task_hash"]) is not None for p in prompts)
        assert {r["role"] for r in lineage.dataset_rows(store, rl.dataset_id)} == {"task"}


def test_data_cli_dry_run_export_and_list(store_path, tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli_main, ["data", "select", "--db", str(store_path), "--json"])
    assert res.exit_code == 0, res.output
    ledger = json.loads(res.output)
    assert ledger["kept"] == 3 and ledger["reasons"] == {"dedup": 2, "min_reward": 1}
    assert all(r["reason"] for r in ledger["rollouts"])
    with Store(store_path) as store:
        assert store.query("SELECT COUNT(*) AS n FROM datasets")[0]["n"] == 0  # a dry run writes nothing
    res = runner.invoke(
        cli_main,
        [
            "data",
            "export",
            "--db",
            str(store_path),
            "--name",
            "cli",
            "--out",
            str(tmp_path),
            "--format",
            "jsonl",
            "--run",
            "oracle-run",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "cli@v1: 2 sft rows" in " ".join(res.output.split())
    res = runner.invoke(
        cli_main,
        ["data", "export", "--db", str(store_path), "--kind", "rl", "--name", "p", "--out", str(tmp_path)],
    )
    assert res.exit_code == 2 and "needs --tasks PATH or --run" in res.output
    res = runner.invoke(cli_main, ["data", "list", "--db", str(store_path)])
    assert res.exit_code == 0 and "cli@v1" in res.output


def test_an_empty_export_says_which_rule_left_nothing_and_writes_nothing(store_path, tmp_path):
    runner = CliRunner()
    base = ["data", "export", "--db", str(store_path), "--out", str(tmp_path), "--format", "jsonl"]
    # the oracle run passes every rollout: nothing to reject
    res = runner.invoke(cli_main, [*base, "--kind", "preference", "--name", "prefs", "--run", "oracle-run"])
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "no task had both a passing (reward >= 1.0) and a failing rollout" in text
    assert "2 of 2 tasks had a passing rollout" in text
    res = runner.invoke(cli_main, [*base, "--kind", "preference", "--name", "prefs", "--run", "model-bad"])
    assert res.exit_code == 2 and "no task had a rollout scoring at least --min-chosen 1.0" in " ".join(
        res.output.split())
    res = runner.invoke(cli_main, [*base, "--name", "sft", "--min-reward", "2"])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "no rollout passed the selection rules" in text and "min_reward" in text
    assert not list(tmp_path.glob("*-v*"))
    with Store(store_path) as store:
        assert store.query("SELECT COUNT(*) AS n FROM datasets")[0]["n"] == 0
    res = runner.invoke(cli_main, ["data", "select", "--db", str(store_path), "--min-reward", "2"])
    assert res.exit_code == 0 and "nothing kept: no rollout passed the selection rules" in " ".join(res.output.split())


def test_tables_keep_whole_ids_when_not_on_a_terminal(store_path, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    runner = CliRunner()
    ledger = json.loads(runner.invoke(cli_main, ["data", "select", "--db", str(store_path), "--json"]).output)
    res = runner.invoke(cli_main, ["data", "select", "--db", str(store_path), "--min-reward", "-1"])
    assert res.exit_code == 0, res.output
    for r in ledger["rollouts"]:  # every id whole, on one line, so it can be copied
        assert r["rollout_id"] in res.output and len(r["rollout_id"]) == 16
    assert "…" not in res.output
    assert any(len(line) > 80 for line in res.output.splitlines())  # the 80-column default no longer squeezes


def test_an_export_never_removes_a_folder_it_did_not_make(store_path, tmp_path):
    import shutil

    out = tmp_path / "shared"
    # someone's own folder with the output name: refused, kept, nothing recorded
    (out / "train-v1").mkdir(parents=True)
    (out / "train-v1" / "notes.txt").write_text("notes")
    runner = CliRunner()
    base = ["data", "export", "--name", "train", "--out", str(out), "--format", "jsonl"]
    res = runner.invoke(cli_main, [*base, "--db", str(store_path)])
    assert res.exit_code == 2 and "train-v1 exists (from another store or not an export)" in " ".join(
        res.output.split()), res.output
    assert (out / "train-v1" / "notes.txt").read_text() == "notes"
    assert [p.name for p in out.iterdir()] == ["train-v1"]  # no partial folder left behind
    with Store(store_path) as store:
        assert store.query("SELECT COUNT(*) AS n FROM datasets")[0]["n"] == 0
    shutil.rmtree(out / "train-v1")

    # another store's export of the same name into the same folder: refused, the first one intact
    other = tmp_path / "other.db"
    shutil.copy(store_path, other)
    assert runner.invoke(cli_main, [*base, "--db", str(store_path)]).exit_code == 0
    first = (out / "train-v1" / "data.jsonl").read_bytes()
    res = runner.invoke(cli_main, [*base, "--db", str(other), "--run", "oracle-run"])
    assert res.exit_code == 2 and "choose another --out or --name" in " ".join(res.output.split())
    assert (out / "train-v1" / "data.jsonl").read_bytes() == first
    assert read_manifest(out / "train-v1")["store"] == str(store_path.resolve())
    with Store(other) as store:
        assert store.query("SELECT COUNT(*) AS n FROM datasets")[0]["n"] == 0

    # this store's own export of this version that never reached the store (interrupted): replaced
    with Store(store_path) as store:
        store.db.execute("DELETE FROM dataset_rows")
        store.db.execute("DELETE FROM datasets")
    res = runner.invoke(cli_main, [*base, "--db", str(store_path), "--run", "oracle-run"])
    assert res.exit_code == 0, res.output
    assert read_manifest(out / "train-v1")["n_rows"] == 2


class FailingModel(ScriptedModel):
    """Answers from its list, then every call fails: the rollout ends model_error."""

    async def chat(self, messages, tools=None, **params):
        if not self.replies:
            raise RuntimeError("the model server went away")
        return await super().chat(messages, tools, **params)


def test_a_rollout_whose_model_never_replied_is_a_dropped_candidate_not_a_failed_export(store_path, tmp_path):

    db = store_path
    a = hello_task("hello-a")
    from clawsdk_plugins.agents.toolloop import ToolLoopAgent
    run_sync([a], agent=ToolLoopAgent(model=FailingModel([])), run_id="no-reply", db=db)
    # one reply (a tool call), then the call that failed: the conversation ends at the reply it got
    one = [call("write", {"path": "hello.txt", "content": "hello world"})]
    run_sync([a], agent=ToolLoopAgent(model=FailingModel(one)), run_id="one-reply", db=db)
    runner = CliRunner()
    res = runner.invoke(cli_main, ["data", "select", "--db", str(db), "--json", "--run", "no-reply"])
    assert res.exit_code == 0, res.output
    assert [r["reason"] for r in json.loads(res.output)["rollouts"]] == ["no_reply: no model reply recorded"]
    with Store(db) as store:
        result = select(store, Selection(runs=["one-reply"], min_reward=None, failure_kinds=[]))
        (c,) = result.candidates
        assert c.reason == "kept", c.reason
        roles = [m["role"] for m in c.trajectory.messages]
        assert roles == ["system", "user", "assistant"] and c.trajectory.n_assistant_turns == 1
    res = runner.invoke(cli_main, ["data", "export", "--db", str(db), "--name", "rest",
                                   "--out", str(tmp_path), "--format", "jsonl"])
    assert res.exit_code == 0 and "rest@v1: 3 sft rows" in " ".join(res.output.split()), res.output


def test_held_out_tasks_that_cannot_be_read_are_refused_not_silently_trained_on(store_path, tmp_path):
    """--exclude-tasks-from dropped the tasks it could not read, so their rollouts went into training data."""
    from clawsdk.tasks.native import save_task

    held = tmp_path / "held-out"
    save_task(hello_task("hello-a"), held / "hello-a")
    bad = save_task(hello_task("hello-b", "bye"), held / "hello-b") / "task.yaml"
    bad.write_text(bad.read_text() + "stray_field: 1\n")
    runner = CliRunner()
    for args in (["data", "select", "--json"],
                 ["data", "export", "--name", "sft", "--out", str(tmp_path / "out"), "--format", "jsonl"],
                 ["data", "export", "--kind", "preference", "--name", "p", "--out", str(tmp_path / "out")]):
        res = runner.invoke(cli_main, [*args, "--db", str(store_path), "--exclude-tasks-from", str(held)])
        text = " ".join(res.output.split())
        assert res.exit_code == 2, text
        assert f"1 held-out task(s) could not be read: {bad}" in text, text
        assert "--exclude-task" in text and len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    with Store(store_path) as store:
        assert store.query("SELECT COUNT(*) AS n FROM datasets")[0]["n"] == 0
    # readable, it holds both tasks out
    bad.write_text(bad.read_text().replace("stray_field: 1\n", ""))
    res = runner.invoke(cli_main, ["data", "select", "--json", "--db", str(store_path),
                                   "--exclude-tasks-from", str(held), "--min-reward", "-1"])
    assert res.exit_code == 0 and {r["reason"].split(":")[0] for r in json.loads(res.output)["rollouts"]} == {
        "excluded"}


def test_a_preference_margin_of_0_or_less_is_refused_never_a_rollout_paired_with_itself(store_path, tmp_path):
    """--margin 0 paired each task's best rollout with itself: chosen and rejected the same trajectory."""
    runner = CliRunner()
    for margin in ("0", "-1"):
        res = runner.invoke(cli_main, ["data", "export", "--db", str(store_path), "--kind", "preference",
                                       "--name", "p", "--margin", margin, "--out", str(tmp_path / "out")])
        assert res.exit_code == 2 and "--margin" in res.output and "not in the range x>0" in res.output, res.output
    with Store(store_path) as store:
        cands = [c for c in load_candidates(store, Selection(runs=["model-good"])) if not c.reason]
        with pytest.raises(ValueError, match="margin must be above 0"):
            export_preferences(store, cands, tmp_path, name="p", margin=0)
        with pytest.raises(Exception, match=r"no preference pairs|pair"):  # only passing rollouts: nothing to pair
            export_preferences(store, cands, tmp_path, name="p", margin=1e-9)
