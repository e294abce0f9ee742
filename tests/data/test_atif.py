"""ATIF out and in: every exported document validates against the ATIF-v1.7 schema (tests/fixtures/atif) and the
reference models' cross-field rules, carries token ids, logprobs, tool definitions and the verdict; an imported
document is a rollout of agent `imported` that selection and export take like any other; export -> import ->
export gives the same documents."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.data.atif import ATIF_VERSION, AtifError, export_atif, import_atif, validate
from clawsdk.data.export import export_sft, load_rows
from clawsdk.data.select import Selection, select
from clawsdk.models.base import ChatResponse, Model
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from tests.conftest import FIXTURES
from tests.data.test_data_select_export import call, hello_task

SCHEMA = json.loads((FIXTURES / "atif" / "atif-v1.7.schema.json").read_text())


class TokenModel(Model):
    """Answers from a list, with the token ids and logprobs a vLLM server gives."""

    name = "tokens:test"

    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.n = 0

    async def chat(self, messages, tools=None, **params):
        from clawsdk.models.toolcalls import message_from_text

        self.n += 1
        text = self.replies.pop(0) if self.replies else "done"
        return ChatResponse(message=message_from_text(text), usage={"prompt_tokens": 10 * self.n, "completion_tokens": 3},
                            finish_reason="stop", prompt_token_ids=list(range(10 * self.n)),
                            completion_token_ids=[100 + self.n, 200, 300], logprobs=[-0.5, -0.25, -0.125])


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    from clawsdk_plugins.agents.toolloop import ToolLoopAgent

    db = tmp_path / "store.db"
    run_sync([hello_task("hello-a"), hello_task("hello-b", "bye")], agent="oracle", run_id="oracle", db=db)
    agent = ToolLoopAgent(model=TokenModel([call("read", {"path": "missing.txt"}),
                                            call("write", {"path": "hello.txt", "content": "hello world"}),
                                            call("finish", {"summary": "wrote it"})]))
    run_sync([hello_task("hello-a")], agent=agent, run_id="model", db=db)
    return db


def _export(db: Path, out: Path, name: str, **rules) -> list[dict]:
    with Store(db) as store:
        exp = export_atif(store, select(store, Selection(**rules)), out, name=name)
    docs = [json.loads(p.read_text()) for p in sorted((exp.path / "atif").glob("*.json"))]
    assert len(docs) == exp.n_rows
    return docs


def test_every_exported_document_is_atif_with_tokens_tools_and_the_verdict(store_path, tmp_path):
    docs = _export(store_path, tmp_path / "out", "traj")
    assert len(docs) == 3
    for doc in docs:
        jsonschema.validate(doc, SCHEMA)  # the shape
        validate(doc)  # and the rules the schema cannot say
        assert doc["schema_version"] == ATIF_VERSION
        assert {d["function"]["name"] for d in doc["agent"]["tool_definitions"]} >= {"read", "write", "ls"}
        ours = doc["extra"]["clawsdk"]
        assert ours["reward"] == 1.0 and ours["passed"] is True
        assert ours["subscores"] and {"name", "score", "weight"} == set(ours["subscores"][0])
        assert [s["source"] for s in doc["steps"][:2]] == ["system", "user"]
        assert doc["steps"][1]["message"].startswith("Write '")
    model = next(d for d in docs if d["extra"]["clawsdk"]["agent"] == "tool-loop")
    turns = [s for s in model["steps"] if s["source"] == "agent"]
    assert len(turns) == 3 and all(s["llm_call_count"] == 1 for s in turns)
    first = turns[0]
    assert first["metrics"] == {"prompt_tokens": 10, "completion_tokens": 3, "prompt_token_ids": list(range(10)),
                                "completion_token_ids": [101, 200, 300], "logprobs": [-0.5, -0.25, -0.125]}
    (tc,) = first["tool_calls"]
    assert tc["function_name"] == "read" and tc["arguments"] == {"path": "missing.txt"}
    (res,) = first["observation"]["results"]
    assert res["source_call_id"] == tc["tool_call_id"] and res["extra"] == {"is_error": True}
    assert model["final_metrics"]["total_prompt_tokens"] == 10 + 20 + 30
    oracle = next(d for d in docs if d["extra"]["clawsdk"]["agent"] == "oracle")
    tool_steps = [s for s in oracle["steps"] if s["source"] == "agent"]
    assert tool_steps and all(s["llm_call_count"] == 0 and "metrics" not in s for s in tool_steps)


def _stable(doc: dict) -> dict:
    """The document without what names where it is stored (the run and rollout ids, the agent column)."""
    out = copy.deepcopy(doc)
    for key in ("run_id", "rollout_id", "agent"):
        out["extra"]["clawsdk"].pop(key)
    return out


def test_export_import_export_gives_the_same_documents(store_path, tmp_path):
    first = _export(store_path, tmp_path / "a", "traj")
    again = tmp_path / "again.db"
    tasks = {t.id: t for t in (hello_task("hello-a"), hello_task("hello-b", "bye"))}
    with Store(again) as store:
        report = import_atif(store, tmp_path / "a", run_id="imported-run", tasks=tasks)
        assert report == {"imported": 3, "skipped": 0, "errors": []}
        rows = store.rollouts("imported-run")
        assert {r["agent"] for r in rows} == {"imported"} and all(r["reward"] == 1.0 for r in rows)
        assert {r["task_hash"] for r in rows} == {t.hash for t in tasks.values()}
        # again: the rollouts are there already
        assert import_atif(store, tmp_path / "a", run_id="imported-run", tasks=tasks)["skipped"] == 3
    second = _export(again, tmp_path / "b", "traj")

    def key(d: dict) -> tuple[str, str]:
        return d["extra"]["clawsdk"]["task_id"], d["session_id"]

    assert [_stable(d) for d in sorted(second, key=key)] == [_stable(d) for d in sorted(first, key=key)]


def test_imported_trajectories_flow_through_selection_and_sft_export(store_path, tmp_path):
    _export(store_path, tmp_path / "a", "traj", runs=["model"])
    again = tmp_path / "again.db"
    with Store(again) as store:
        import_atif(store, tmp_path / "a", run_id="imp", tasks={"hello-a": hello_task("hello-a")})
        exp = export_sft(store, select(store, Selection()), tmp_path / "sft", name="from-atif")
    (row,) = load_rows(exp.path)
    assert row["agent"] == "imported" and row["passed"] is True
    calls = [c["function"]["name"] for m in row["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert calls == ["read", "write", "finish"]


def test_a_document_that_is_not_atif_is_refused_naming_the_field(tmp_path):
    good = {"schema_version": "ATIF-v1.7", "agent": {"name": "x", "version": "1"},
            "steps": [{"step_id": 1, "source": "user", "message": "hi"},
                      {"step_id": 2, "source": "agent", "message": "ok", "tool_calls": [
                          {"tool_call_id": "c1", "function_name": "ls", "arguments": {}}],
                       "observation": {"results": [{"source_call_id": "c1", "content": "a.txt"}]}}]}
    validate(good)
    jsonschema.validate(good, SCHEMA)
    bad = [
        ({**good, "schema_version": "ATIF-v1.9"}, "newer than this clawsdk reads"),
        ({**good, "steps": [{**good["steps"][0], "step_id": 2}]}, "steps[0].step_id: expected 1"),
        ({**good, "steps": [{**good["steps"][0], "tool_calls": []}]}, "steps[0].tool_calls: only an agent step"),
        ({**good, "steps": [good["steps"][0], {**good["steps"][1], "observation": {"results": [
            {"source_call_id": "c9"}]}}]}, "source_call_id: 'c9' is not a tool_call_id of step 2"),
        ({**good, "surprise": 1}, "unknown field 'surprise'"),
    ]
    for doc, message in bad:
        with pytest.raises(AtifError, match=message.replace("[", r"\[").replace("]", r"\]")):
            validate(doc)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(good))
    (folder / "bad.json").write_text(json.dumps(bad[1][0]))
    db = tmp_path / "s.db"
    result = CliRunner().invoke(cli_main, ["data", "import", f"atif:{folder}", "--run", "imp", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "imported 1 trajectories into run imp" in result.output and "bad.json" in result.output
    with Store(db) as store:
        (row,) = store.rollouts("imp")
    assert row["agent"] == "imported" and row["reward"] is None and not row["scored"]  # nothing to score it by


def test_cli_exports_atif(store_path, tmp_path):
    result = CliRunner().invoke(cli_main, ["data", "export", "--format", "atif", "--name", "t", "--out",
                                           str(tmp_path / "o"), "--db", str(store_path)])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "o" / "t-v1"
    assert len(list((folder / "atif").glob("*.json"))) == 3
    import datasets

    rows = datasets.load_dataset(str(folder), split="train")
    assert rows.num_rows == 3 and all(json.loads(r)["schema_version"] == ATIF_VERSION for r in rows["atif"])
