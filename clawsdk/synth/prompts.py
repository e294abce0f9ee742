"""The prompts of the model routes. Each returns chat messages; the model answers JSON or code."""

from __future__ import annotations

import json
from typing import Any

TOOLS_DOC = """The agent works in a workspace folder with these tools: read(path), write(path, content),
edit(path, old_text, new_text), ls(path), glob(pattern), grep(pattern, path), exec(command) (bash, with
python3 and the usual command-line tools, no network). Paths are relative to the workspace."""

DRAFT_SCHEMA = """Answer with one JSON object and nothing else:
{
  "instruction": "the user's request to the agent, in their own words; names the input files and the
                  exact deliverable files and their format; never states the answer itself",
  "category": "<the category given>",
  "subcategory": "<the subcategory given>",
  "difficulty": "easy | medium | hard",
  "input_files": [{"path": "relative/path.ext", "content": "full file content, or null to generate later",
                   "description": "what the file holds"}],
  "expected_behavior": "what a correct agent does and exactly what the deliverables must contain",
  "deliverables": ["relative/path of each file the agent must write or change"],
  "reference_solution": [{"tool": "write", "args": {"path": "...", "content": "..."}}]
}
reference_solution is the list of tool calls that solves the task correctly (usually read the inputs,
then write the deliverables with their correct content). Keep files small (under 200 lines)."""


def _system(role: str) -> dict[str, str]:
    return {"role": "system", "content": role}


def persona_draft(persona: dict, category: str, subcategory: str, operations: list[str]) -> list[dict[str, Any]]:
    ops = "\n".join(f"- {o}" for o in operations)
    return [
        _system("You design realistic, verifiable workspace tasks for training and testing AI agents.\n"
                + TOOLS_DOC),
        {"role": "user", "content": (
            f"Write one task that this person would really ask an assistant to do on their computer.\n\n"
            f"Persona: {persona['name']} - {persona.get('description', '')}\n"
            f"Category: {category}\nSubcategory: {subcategory}\n"
            f"The task must need these basic operations:\n{ops}\n\n"
            "The result must be files in the workspace that a program can check exactly.\n\n" + DRAFT_SCHEMA)},
    ]


def skill_draft(primary: Any, supporting: list[Any], category: str | None) -> list[dict[str, Any]]:
    def block(s: Any) -> str:
        return f"## Skill: {s.name}\n{s.description}\n\n{s.body[:6000]}"

    extra = "\n\n".join(block(s) for s in supporting)
    cat = f"Category: {category}\n" if category else "Category: the one of the six that fits best\n"
    return [
        _system("You design realistic, verifiable workspace tasks that exercise an agent skill.\n" + TOOLS_DOC),
        {"role": "user", "content": (
            "Write one task that can only be done well by using the primary skill below"
            + (" (the supporting skills may help)" if supporting else "") + ".\n\n"
            f"# Primary skill\n{block(primary)}\n\n" + (f"# Supporting skills\n{extra}\n\n" if extra else "")
            + cat + "The result must be files in the workspace that a program can check exactly.\n\n"
            + DRAFT_SCHEMA)},
    ]


def leak_judge(draft: dict) -> list[dict[str, Any]]:
    files = "\n".join(f"- {f.get('path')}: {f.get('description', '')}" for f in draft.get("input_files", []))
    return [
        _system("You review task drafts for an AI-agent benchmark. You are strict and brief."),
        {"role": "user", "content": (
            "Check this task draft for two defects:\n"
            "1. answer_leak: the instruction gives away the answer or the deliverable's content, so the agent "
            "could succeed without doing the work.\n"
            "2. factual_error: the instruction or expected behaviour states something false or contradictory "
            "(about the files, the domain, or the format).\n\n"
            f"Instruction:\n{draft.get('instruction', '')}\n\nInput files:\n{files or '(none)'}\n\n"
            f"Expected behaviour:\n{draft.get('expected_behavior', '')}\n\n"
            'Answer with one JSON object: {"answer_leak": true|false, "factual_error": true|false, '
            '"reason": "one sentence"}')},
    ]


def workspace_file(draft: dict, path: str, description: str) -> list[dict[str, Any]]:
    return [
        _system("You write realistic input files for workspace tasks. Output only the file's content."),
        {"role": "user", "content": (
            f"Task instruction:\n{draft.get('instruction', '')}\n\n"
            f"Expected behaviour:\n{draft.get('expected_behavior', '')}\n\n"
            f"Write the full content of the input file {path} ({description}). "
            "Output only the content, no explanation.")},
    ]


VERIFIER_CONTRACT = """Write a Python 3 program check.py (standard library only) that grades the workspace.
It runs with the workspace as its current directory. It must print one line at the end: the score, a
number between 0 and 1 (1 = every requirement met, 0 = nothing done). It must not change any file.
It must score 0 on the untouched workspace (before the agent did anything) and 1 when the task was
done correctly. Check exact values where the task defines them. It must not run or import anything the agent
wrote (no subprocess, os.system, exec, pickle or import from the workspace): it runs beside the hidden answers.
If grading needs to run a program the agent wrote, make the first line of check.py `# agent_run: COMMAND`
(a shell command run in the workspace before check.py starts) and read that command's output from standard
input. Output only the code."""


def verifier(draft: dict, files: dict[str, str]) -> list[dict[str, Any]]:
    listing = "\n\n".join(f"--- {p} ---\n{c[:3000]}" for p, c in files.items())
    return [
        _system("You write exact, robust graders for workspace tasks."),
        {"role": "user", "content": (
            f"Task instruction:\n{draft.get('instruction', '')}\n\n"
            f"Expected behaviour:\n{draft.get('expected_behavior', '')}\n\n"
            f"Deliverables: {json.dumps(draft.get('deliverables', []))}\n\n"
            f"Input files:\n{listing or '(none)'}\n\n" + VERIFIER_CONTRACT)},
    ]


def verifier_repair(draft: dict, files: dict[str, str], code: str, failure: str) -> list[dict[str, Any]]:
    messages = verifier(draft, files)
    messages += [
        {"role": "assistant", "content": code},
        {"role": "user", "content": (
            f"That check.py failed its execution test:\n{failure}\n\n"
            "Fix it. Output only the whole corrected check.py.")},
    ]
    return messages


def rubric(draft: dict) -> list[dict[str, Any]]:
    return [
        _system("You write grading rubrics for an LLM judge."),
        {"role": "user", "content": (
            f"Task instruction:\n{draft.get('instruction', '')}\n\n"
            f"Expected behaviour:\n{draft.get('expected_behavior', '')}\n\n"
            "Write 2 to 4 rubric rules for the qualities a program cannot check (clarity, completeness, "
            "faithfulness to the inputs). Answer with a JSON array of rules, each:\n"
            '{"name": "...", "file_path": "the deliverable it reads", "scores": {"0": "...", "0.25": "...", '
            '"0.5": "...", "0.75": "...", "1": "..."}}')},
    ]


def rubric_repair(draft: dict, answer: str, problem: str) -> list[dict[str, Any]]:
    return rubric(draft) + [
        {"role": "assistant", "content": answer},
        {"role": "user", "content": f"That rubric does not fit the schema: {problem}\nAnswer again with the JSON array only."},
    ]
