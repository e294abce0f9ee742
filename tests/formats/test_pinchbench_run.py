"""PinchBench tasks end to end: a scripted agent, grade() inside the sandbox, the transcript it reads."""

from __future__ import annotations

import pytest

from clawsdk import Store, run_sync
from clawsdk.tasks.sources import load_tasks
from clawsdk_plugins.agents import ScriptedAgent
from clawsdk_plugins.pinchbench import GRADE_FILE, to_transcript
from tests.formats.formats_helpers import PINCHBENCH, use_scripted_judge

pytestmark = pytest.mark.skipif(not PINCHBENCH.is_dir(), reason="shared sample data not present")

FILES = {
    "src/main.py": 'print("Hello, world!")\n',
    "README.md": "# My Project\n\nA small project.\n",
}


def _tasks():
    loaded = load_tasks(f"pinchbench:{PINCHBENCH}")
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


def test_scripted_agent_scores_what_grade_returns(tmp_path, db):
    task = _tasks()["task_09_files"]
    calls = [{"tool": "write", "args": {"path": p, "content": c}} for p, c in FILES.items()]
    result = run_sync([task], agent=ScriptedAgent(calls), db=db, run_id="pb", retries=0)
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok", outcome.error
    expected = _grade_here(task, FILES, tmp_path)
    mean = sum(expected.values()) / len(expected)
    assert 0 < mean < 1  # .gitignore is missing: a partial score
    with Store(db) as store:
        (row,) = store.rollouts("pb")
        assert row["reward"] == pytest.approx(mean)
        verdict = store.verdict(row["id"])
        assert {s["name"]: s["score"] for s in verdict["subscores"]} == pytest.approx(expected)


def test_grade_reads_our_trajectory_as_openclaw_transcript(db):
    task = _tasks()["task_00_sanity"]
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
    t = to_transcript(events, "Do it")
    roles = [e["message"]["role"] for e in t]
    assert roles == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]
    call = t[1]["message"]["content"][1]
    assert call == {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.txt"}}
    assert t[2]["message"]["toolCallId"] == "c1" and t[2]["message"]["content"][0]["text"] == "hello"
    assert t[3]["message"]["content"][0]["name"] == "exec" and t[4]["message"]["isError"] is True
    assert t[4]["message"]["toolCallId"] == t[3]["message"]["content"][0]["id"]


def test_hybrid_pinchbench_task_weights_grade_and_judge_by_its_grading_weights(tmp_path, db):
    task = _tasks()["task_18_spreadsheet_summary"]
    report = ("# Summary\n\nTotal revenue: $119,900. Total profit: $47,960. East is the top region.\n"
              "Widget B is the top product. Total Q1 expenses: $15,430.\n")
    answer = ('{"scores": {"Data Reading and Parsing": {"score": 1, "reason": "both read"}, '
              '"Analytical Accuracy": {"score": 0.5, "reason": "some"}, '
              '"Report Quality and Structure": {"score": 0.75, "reason": "ok"}, '
              '"Insights and Synthesis": {"score": 0, "reason": "none"}}}')
    judge = use_scripted_judge(answer)
    parts = task.verifier.model_dump()["parts"]
    parts[1]["verifier"]["judge"] = "scripted-judge"
    task = type(task).model_validate({**task.model_dump(), "verifier": {**task.verifier.model_dump(), "parts": parts}})
    calls = [{"tool": "write", "args": {"path": "data_summary.md", "content": report}}]
    result = run_sync([task], agent=ScriptedAgent(calls), db=db, run_id="hy", retries=0)
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok", outcome.error
    graded = _grade_here(task, {"data_summary.md": report}, tmp_path)
    code = sum(graded.values()) / len(graded)
    rubric = (0.25 * 1 + 0.35 * 0.5 + 0.25 * 0.75 + 0.15 * 0) / 1.0
    assert outcome.reward == pytest.approx(0.6 * code + 0.4 * rubric)
    prompt = judge["calls"][0][-1]["content"]
    assert "Total revenue: $119,900" in prompt and "Analytical Accuracy" in prompt
    assert "write" in prompt  # the transcript is shown to the judge, as PinchBench's judge sees it
