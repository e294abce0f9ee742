"""PinchBench tasks end to end: a scripted agent, grade() inside the sandbox, the transcript it reads."""

from __future__ import annotations

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from clawsdk_plugins.sources.pinchbench import GRADE_FILE, to_transcript

from clawsdk import Store, run_sync
from clawsdk.store.events import parse_event
from clawsdk.tasks.sources import load_tasks
from tests.conftest import needs_shared_data
from tests.formats.formats_helpers import PINCHBENCH, SAMPLE_PINCHBENCH, use_scripted_judge

FILES = {
    "app/main.py": 'print("Hello from Lantern")\n',
    "README.md": "# Lantern\n\nA small project.\n",
}


def _tasks(root=PINCHBENCH):
    loaded = load_tasks(f"pinchbench:{root}")
    assert not loaded.errors
    return {t.id: t for t in loaded.tasks}


def _grade_here(task, files: dict[str, str], tmp_path, transcript=()) -> dict:
    """The task's own grade() run in this process on an equal workspace: the reference."""
    ws = tmp_path / "reference"
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    ns: dict = {}
    exec(next(f for f in task.hidden if f.path == GRADE_FILE).data.decode(), ns)
    return ns["grade"](list(transcript), str(ws))


@pytest.mark.parametrize("root, task_id, files", [
    (PINCHBENCH, "task_02_project_layout", FILES),
    pytest.param(SAMPLE_PINCHBENCH, "task_09_files", {"src/main.py": 'print("Hello, world!")\n',
                                                      "README.md": "# My Project\n\nA small project.\n"},
                 marks=needs_shared_data, id="sample")])
def test_scripted_agent_scores_what_grade_returns(tmp_path, db, root, task_id, files):
    task = _tasks(root)[task_id]
    calls = [{"tool": "write", "args": {"path": p, "content": c}} for p, c in files.items()]
    result = run_sync([task], agent=ScriptedAgent(calls), db=db, run_id="pb", retries=0)
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok", outcome.error
    workspace = {f.path: f.data.decode() for f in task.workspace} | files
    expected = _grade_here(task, workspace, tmp_path)
    mean = sum(expected.values()) / len(expected)
    assert 0 < mean < 1  # .gitignore is missing: a partial score
    with Store(db) as store:
        (row,) = store.rollouts("pb")
        assert row["reward"] == pytest.approx(mean)
        verdict = store.verdict(row["id"])
        assert {s["name"]: s["score"] for s in verdict["subscores"]} == pytest.approx(expected)


@pytest.mark.parametrize("root, task_id", [
    (PINCHBENCH, "task_01_greeting"),
    pytest.param(SAMPLE_PINCHBENCH, "task_00_sanity", marks=needs_shared_data, id="sample")])
def test_grade_reads_our_trajectory_as_openclaw_transcript(db, root, task_id):
    task = _tasks(root)[task_id]
    said = run_sync([task], agent=ScriptedAgent([{"tool": "ls", "args": {}}]), db=db, run_id="said", retries=0)
    silent = run_sync([task], agent=ScriptedAgent([]), db=db, run_id="silent", retries=0)
    assert said.outcomes[0].reward == 1.0 and silent.outcomes[0].reward == 0.0


def test_transcript_shape_pairs_model_tool_calls_with_results():
    events = [
        {"seq": 0, "kind": "model_request", "payload": {"messages": []}},
        {"seq": 1, "kind": "model_response", "payload": {"message": {
            "role": "assistant", "content": "Reading it.",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "read", "arguments": '{"path": "a.txt"}'}}]}}},
        {"seq": 2, "kind": "tool_call", "payload": {"tool": "read", "args": {"path": "a.txt"}}},
        {"seq": 3, "kind": "tool_result", "payload": {"tool": "read", "is_error": False, "content": "hello"}},
        {"seq": 4, "kind": "tool_call", "payload": {"tool": "exec", "args": {"command": "ls"}}},
        {"seq": 5, "kind": "tool_result", "payload": {"tool": "exec", "is_error": True, "content": "boom"}},
        {"seq": 6, "kind": "model_response", "payload": {"message": {"role": "assistant", "content": "Done."}}},
    ]
    t = to_transcript([parse_event(e) for e in events], "Do it")
    roles = [e["message"]["role"] for e in t]
    assert roles == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]
    call = t[1]["message"]["content"][1]
    assert call == {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.txt"}}
    assert t[2]["message"]["toolCallId"] == "c1" and t[2]["message"]["content"][0]["text"] == "hello"
    assert t[3]["message"]["content"][0]["name"] == "exec" and t[4]["message"]["isError"] is True
    assert t[4]["message"]["toolCallId"] == t[3]["message"]["content"][0]["id"]


def test_transcript_pairs_results_with_the_calls_they_name_whatever_order_they_finished_in():
    events = [  # two calls of one tool, made concurrently (an external agent over `clawsdk serve`)
        {"seq": 0, "kind": "tool_call", "payload": {"tool": "exec", "args": {"command": "sleep 1; echo A"}}},
        {"seq": 1, "kind": "tool_call", "payload": {"tool": "exec", "args": {"command": "echo B"}}},
        {"seq": 2, "kind": "tool_result", "payload": {"tool": "exec", "call": 1, "content": "B"}},
        {"seq": 3, "kind": "tool_result", "payload": {"tool": "exec", "call": 0, "content": "A"}},
    ]
    t = to_transcript([parse_event(e) for e in events])
    ids = {c["arguments"]["command"]: c["id"] for e in t if e["message"]["role"] == "assistant"
           for c in e["message"]["content"]}
    answers = {e["message"]["toolCallId"]: e["message"]["content"][0]["text"] for e in t
               if e["message"]["role"] == "toolResult"}
    assert answers == {ids["sleep 1; echo A"]: "A", ids["echo B"]: "B"}


def test_hybrid_pinchbench_task_weights_grade_and_judge_by_its_grading_weights(tmp_path, db):
    task = _tasks()["task_03_sales_summary"]
    report = ("# Summary\n\nTotal revenue: $5,550. Total margin: $2,064.\nTop region: East\n"
              "Lamps sell most. Total team costs: $4,100.\n")  # the costs are 4,210
    answer = ('{"scores": {"Reading the Inputs": {"score": 1, "reason": "both read"}, '
              '"Correct Figures": {"score": 0.5, "reason": "some"}, '
              '"Clear Structure": {"score": 0.75, "reason": "ok"}, '
              '"Useful Conclusions": {"score": 0, "reason": "none"}}}')
    judge = use_scripted_judge(answer)
    parts = task.verifier.model_dump()["parts"]
    parts[1]["verifier"]["judge"] = "scripted-judge"
    task = type(task).model_validate({**task.model_dump(), "verifier": {**task.verifier.model_dump(), "parts": parts}})
    calls = [{"tool": "write", "args": {"path": "sales_summary.md", "content": report}}]
    result = run_sync([task], agent=ScriptedAgent(calls), db=db, run_id="hy", retries=0)
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok", outcome.error
    graded = _grade_here(task, {"sales_summary.md": report}, tmp_path)
    assert graded == {"report_written": 1.0, "revenue_total": 1.0, "margin_total": 1.0, "top_region": 1.0,
                      "costs_total": 0.0}
    code = sum(graded.values()) / len(graded)
    rubric = (0.25 * 1 + 0.35 * 0.5 + 0.25 * 0.75 + 0.15 * 0) / 1.0
    assert outcome.reward == pytest.approx(0.6 * code + 0.4 * rubric)
    prompt = judge["calls"][0][-1]["content"]
    assert "Total revenue: $5,550" in prompt and "Correct Figures" in prompt
    assert "write" in prompt  # the transcript is shown to the judge, as PinchBench's judge sees it
