"""Validation runs cheap agents (clawsdk.runtime.probes) and flags a verifier that rewards them.

An audit with such agents found verifiers that gave credit for deleting every input (rename-by-rule 0.48,
photo-rename-by-date 0.20), and JSON/CSV tasks that gave credit for an empty file at the deliverable's
path. Those numbers went into every mean score; these tests keep the gate that now finds them.
"""

from __future__ import annotations

import json

import anyio
import pytest
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.runtime.validate import validate_task
from clawsdk.synth.families import FAMILIES
from clawsdk.tasks.model import Task
from clawsdk.tasks.native import save_task
from tests.sandbox.sandbox_backends import skip_unless_available

SORTED = "a\nb\nc\n"


def task(checks: list[dict], *, instruction: str = "Sort the lines of in.txt into out.txt.",
         solution: list | None = None, policy: dict | None = None) -> Task:
    return Task.model_validate({
        "id": "t", "instruction": instruction, **({"tool_policy": policy} if policy else {}),
        "workspace": [{"path": "in.txt", "text": "b\nc\na\n"}],
        "solution": solution if solution is not None else [
            {"tool": "read", "args": {"path": "in.txt"}},
            {"tool": "write", "args": {"path": "out.txt", "content": SORTED}}],
        "verifier": {"checks": checks}})


OUT_SORTED = {"type": "text_equals", "name": "sorted", "path": "out.txt", "text": SORTED}


def validate(t: Task, sandbox: str = "bwrap", **kw):
    skip_unless_available(sandbox)
    return anyio.run(lambda: validate_task(t, sandbox, **kw))


def test_a_verifier_that_only_wants_the_answer_passes_every_cheap_agent():
    v = validate(task([OUT_SORTED]))
    assert v.ok, v.problem
    assert {p.agent: p.score for p in v.cheap} == {"wipe": 0.0, "empty": 0.0, "copy": 0.0}


def test_credit_for_a_deleted_input_is_found_by_the_wipe_agent():
    gone = {"type": "file_absent", "path": "in.txt"}
    v = validate(task([OUT_SORTED, gone], instruction="Sort the lines of in.txt into out.txt, then delete in.txt.",
                      solution=[{"tool": "write", "args": {"path": "out.txt", "content": SORTED}},
                                {"tool": "exec", "args": {"command": "rm in.txt"}}]))
    assert v.baseline_score == 0 and v.solution_passed
    assert "'wipe' agent (deletes every file) scores 0.50" in v.problem
    assert "more than 0.1 above the untouched workspace (0.00)" in v.problem
    # the same check, counted only beside the deliverable, earns the wipe nothing
    fixed = validate(task([OUT_SORTED, gone | {"only_with": "sorted"}],
                          instruction="Sort the lines of in.txt into out.txt, then delete in.txt.",
                          solution=[{"tool": "write", "args": {"path": "out.txt", "content": SORTED}},
                                    {"tool": "exec", "args": {"command": "rm in.txt"}}]))
    assert fixed.ok, fixed.problem


def test_credit_for_a_deliverable_that_exists_is_found_by_the_empty_agent():
    v = validate(task([{"type": "file_exists", "path": "out.txt"}, OUT_SORTED]))
    assert "'empty' agent (writes an empty file at each deliverable) scores 0.50" in v.problem


def test_a_deliverable_a_copy_of_the_input_passes_is_found_by_the_copy_agent():
    """A 'sorted' check that only compares line sets: the input copied to out.txt passes."""
    same_lines = {"type": "command", "name": "same lines",
                  "run": "test -s out.txt && test \"$(sort out.txt)\" = \"$(sort in.txt)\""}
    v = validate(task([same_lines]))
    assert "'copy' agent (writes a copy of an input at each deliverable) passes the verifier" in v.problem


def test_a_cheap_agent_works_only_through_the_tools_the_task_offers():
    """Without exec, the wipe agent empties each input with write."""
    emptied = {"type": "text_equals", "name": "emptied", "path": "in.txt", "text": ""}
    v = validate(task([OUT_SORTED, emptied], policy={"allow": ["read", "write"]},
                      solution=[{"tool": "write", "args": {"path": "out.txt", "content": SORTED}},
                                {"tool": "write", "args": {"path": "in.txt", "content": ""}}]))
    assert "'wipe' agent (deletes every file) scores 0.50" in v.problem


def test_paths_the_instruction_does_not_name_are_not_deliverables_to_the_cheap_agents():
    """A renamed file's new name is the work itself: an agent cannot write there without doing it."""
    hidden_name = task([{"type": "text_equals", "name": "moved", "path": "2024/a.txt", "text": "b\nc\na\n"}],
                       solution=[{"tool": "exec", "args": {"command": "mkdir 2024 && mv in.txt 2024/a.txt"}}])
    from clawsdk.runtime.probes import deliverables

    assert deliverables(hidden_name) == []
    assert deliverables(task([OUT_SORTED])) == ["out.txt"]


@pytest.mark.parametrize("family", ["rename-by-rule"])
def test_deleting_every_file_earns_nothing_in_a_rename_family_at_any_level(family):
    """rename-by-rule gave half its score for the old names being gone: deleting the inputs scored 0.48."""
    for level in (1, 2, 3):
        v = validate(FAMILIES[family].task(11, 0, level))
        assert v.ok, (level, v.problem)
        assert {p.agent: p.score for p in v.cheap}["wipe"] == 0.0
        assert v.baseline_score == 0.0  # the look-alikes left alone count only beside a renamed file


def test_tasks_validate_shows_the_cheap_agents_and_fails_on_their_credit(tmp_path):
    skip_unless_available("bwrap")
    save_task(task([{"type": "file_exists", "path": "out.txt"}, OUT_SORTED]), tmp_path / "t")
    result = CliRunner().invoke(cli, ["tasks", "validate", str(tmp_path / "t"), "--sandbox", "bwrap", "--json"])
    assert result.exit_code == 1, result.output
    [row] = json.loads(result.output)["tasks"]
    assert {p["agent"]: p["score"] for p in row["cheap"]}["empty"] == 0.5 and "'empty' agent" in row["problem"]
    skipped = CliRunner().invoke(cli, ["tasks", "validate", str(tmp_path / "t"), "--sandbox", "bwrap", "--no-cheap"])
    assert skipped.exit_code == 0, skipped.output
