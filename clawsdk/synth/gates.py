"""The gates a model-written candidate passes: parsing, the execution gate, the rubric schema.

The execution gate runs the candidate as a real task in a sandbox: the verifier on the untouched
workspace (it must run and score 0) and after the reference solution (it must pass).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clawsdk.tasks.model import CATEGORIES, File, Limits, Task, ToolCall, VerifierSpec

CORE_TOOLS = ("read", "write", "edit", "ls", "glob", "grep", "exec")
MAX_FILE_BYTES = 256 * 1024
CHECK_FILE = "check.py"


class GateFailure(Exception):
    """A candidate fails a gate; the message says why, for the record."""


def extract_json(text: str) -> Any:
    """The JSON value in a model's answer: a fenced block, the whole text, or the first {...} / [...]."""
    text = (text or "").strip()
    fenced = re.search(r"```(?:json|JSON)?\s*\n(.*?)```", text, re.S)
    for candidate in ([fenced.group(1)] if fenced else []) + [text]:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[min(starts):])
            return value
        except json.JSONDecodeError as e:
            raise GateFailure(f"the answer is not valid JSON: {e.msg} at character {e.pos}") from None
    raise GateFailure(f"the answer holds no JSON: {text[:120]!r}")


def strip_code(text: str) -> str:
    """The code in a model's answer: the first fenced block, or the whole text."""
    fenced = re.search(r"```[\w+-]*\s*\n(.*?)```", text or "", re.S)
    return (fenced.group(1) if fenced else (text or "")).strip() + "\n"


class InputFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str
    content: str | None = None
    description: str = ""

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        from clawsdk.tasks.paths import normalize_relative

        return normalize_relative(path)


class Draft(BaseModel):
    """What the route's model writes, before the gates."""

    model_config = ConfigDict(extra="ignore")

    instruction: str = Field(min_length=20)
    category: str | None = None
    subcategory: str | None = None
    difficulty: str | None = None
    input_files: list[InputFile] = Field(default_factory=list, max_length=30)
    expected_behavior: str = ""
    deliverables: list[str] = Field(default_factory=list)
    reference_solution: list[ToolCall] | None = None

    @field_validator("difficulty")
    @classmethod
    def _difficulty(cls, v: str | None) -> str | None:
        return v if v in (None, "easy", "medium", "hard") else None


def parse_draft(text: str, category: str | None, extra_tools: bool) -> Draft:
    raw = extract_json(text)
    if not isinstance(raw, dict):
        raise GateFailure(f"the draft must be a JSON object, not {type(raw).__name__}")
    try:
        draft = Draft.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise GateFailure(f"draft field {where}: {err['msg']}") from None
    if category:
        draft.category = category
    elif draft.category not in CATEGORIES:
        raise GateFailure(f"draft category {draft.category!r} is not one of the six categories")
    paths = [f.path for f in draft.input_files]
    if len(set(paths)) != len(paths):
        raise GateFailure("the draft lists an input file twice")
    for step in draft.reference_solution or []:
        if step.tool not in CORE_TOOLS and not extra_tools:
            raise GateFailure(f"the reference solution calls {step.tool!r}, which is not a core tool "
                              f"({', '.join(CORE_TOOLS)})")
    return draft


def parse_judge(text: str) -> dict[str, Any]:
    raw = extract_json(text)
    if not isinstance(raw, dict) or "answer_leak" not in raw or "factual_error" not in raw:
        raise GateFailure('the judge must answer {"answer_leak": bool, "factual_error": bool, "reason": str}')
    return {"answer_leak": _truthy(raw["answer_leak"]), "factual_error": _truthy(raw["factual_error"]),
            "reason": str(raw.get("reason", ""))[:500]}


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "yes", "1"))


def parse_rubric(text: str) -> list[dict[str, Any]]:
    """Rules checked against the rubric schema (clawsdk.verify.rubric.Rule), with all five levels."""
    from clawsdk.verify.rubric import LEVELS, Rule

    raw = extract_json(text)
    if isinstance(raw, dict) and isinstance(raw.get("rules"), list):
        raw = raw["rules"]
    if not isinstance(raw, list) or not raw:
        raise GateFailure("the rubric must be a non-empty JSON array of rules")
    if len(raw) > 10:
        raise GateFailure(f"the rubric has {len(raw)} rules; at most 10")
    rules = []
    for i, r in enumerate(raw):
        try:
            rule = Rule.model_validate(r)
        except ValidationError as e:
            err = e.errors()[0]
            raise GateFailure(f"rule {i}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        missing = [f"{lv:g}" for lv in LEVELS if f"{lv:g}" not in rule.scores]
        if missing:
            raise GateFailure(f"rule {i} ({rule.name!r}) lacks score levels {missing}")
        rules.append(rule.model_dump(mode="json", exclude_defaults=True))
    return rules


def check_files(files: dict[str, str]) -> None:
    for path, text in files.items():
        File(path=path, text=text)
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            raise GateFailure(f"input file {path} is over {MAX_FILE_BYTES // 1024} KiB")


def check_compiles(code: str) -> None:
    try:
        compile(code, CHECK_FILE, "exec")
    except SyntaxError as e:
        raise GateFailure(f"check.py does not compile: line {e.lineno}: {e.msg}") from None


#: modules that start processes or load code: what check.py starts would run beside the hidden files
_RUNS_CODE = {"subprocess", "multiprocessing", "concurrent", "asyncio", "pty", "runpy", "importlib", "imp",
              "pkgutil", "zipimport", "ctypes", "code", "codeop", "pdb", "doctest", "unittest", "pickle",
              "shelve", "marshal", "webbrowser"}
_OS_RUNS_CODE = re.compile(r"system|popen|exec\w*|spawn\w*|fork\w*|posix_spawnp?")
_BUILTINS_RUN_CODE = {"exec", "eval", "compile", "__import__", "breakpoint"}
_AGENT_RUN = re.compile(r"^#\s*agent_run:\s*(.*?)\s*$", re.M)


def check_isolated(code: str) -> None:
    """check.py runs while the hidden files exist, so it may run none of the agent's code: no process, no
    import from the workspace, no code loaded from a file. Whatever it started could read the expected values
    (or check.py itself). What needs the agent's code to run goes in its `# agent_run:` line."""
    def fail(node: ast.stmt | ast.expr, what: str) -> GateFailure:
        return GateFailure(
            f"check.py line {node.lineno}: {what}. check.py runs while the hidden files exist, so any program "
            "of the agent's it ran could read them: grade the files the agent left, and to run a program the "
            "agent wrote, give the command in a first line `# agent_run: COMMAND` and read its output from "
            "standard input")

    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and (node.level or not node.module):
                raise fail(node, "a relative import loads a file beside check.py")
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [str(node.module)]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names:
                    raise fail(node, f"`{name}` is not in the standard library (it may be the agent's module)")
                if top in _RUNS_CODE:
                    raise fail(node, f"`{name}` starts processes or loads code")
            if isinstance(node, ast.ImportFrom) and node.module == "os":
                for a in node.names:
                    if _OS_RUNS_CODE.fullmatch(a.name):
                        raise fail(node, f"`os.{a.name}` starts a process")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
              and _OS_RUNS_CODE.fullmatch(node.attr)):
            raise fail(node, f"`os.{node.attr}` starts a process")
        elif isinstance(node, ast.Name) and node.id in _BUILTINS_RUN_CODE:
            raise fail(node, f"`{node.id}` runs code given as text")
    commands = _AGENT_RUN.findall(code)
    if len(commands) > 1:
        raise GateFailure("check.py has more than one `# agent_run:` line; give one command (join steps with &&)")
    if commands and not commands[0]:
        raise GateFailure("check.py's `# agent_run:` line names no command")


def agent_run_of(code: str) -> str | None:
    """The command of check.py's `# agent_run:` line: it runs the agent's code before the hidden files exist,
    and its output is check.py's standard input."""
    found = _AGENT_RUN.search(code)
    return found.group(1) if found and found.group(1) else None


def build_task(task_id: str, draft: Draft, files: dict[str, str], check_py: str, tools: list[str],
               provenance: dict[str, Any], metadata: dict[str, Any]) -> Task:
    return Task(
        id=task_id,
        instruction=draft.instruction.strip() + "\n",
        category=draft.category,
        difficulty=draft.difficulty,
        tags=[t for t in (draft.subcategory,) if t],
        tools=tools,
        workspace=[File(path=p, text=t) for p, t in files.items()],
        hidden=[File(path=CHECK_FILE, text=check_py)],
        solution=draft.reference_solution or None,
        verifier=VerifierSpec(type="checks", checks=[{
            "type": "command", "name": "check.py", "score_from_stdout": True,
            "run": f'python3 "$CLAWSDK_HIDDEN/{CHECK_FILE}"',
            **({"agent_run": agent_run} if (agent_run := agent_run_of(check_py)) else {})}]),
        limits=Limits(timeout_s=900, max_tool_calls=100),
        provenance=provenance,
        metadata=metadata,
    )


@dataclass
class GateRun:
    score: float | None
    error: str | None
    detail: str


async def _attempt(task: Task, agent: Any, make_sandbox: Any, registry: Any) -> GateRun:
    from clawsdk.errors import FailureKind
    from clawsdk.runtime.rollout import attempt_rollout
    from clawsdk.store.recorder import Recorder

    r = await attempt_rollout(task, agent, make_sandbox, Recorder(None, "synth-gate"), registry)
    detail = "; ".join(s.detail for s in r.verdict.subscores) if r.verdict else ""
    if r.kind is not FailureKind.OK or r.verdict is None:
        return GateRun(None, r.error or r.kind.value, detail)
    return GateRun(r.verdict.score, None, detail)


async def execution_gate(task: Task, sandbox: str = "auto") -> dict[str, Any]:
    """Run the verifier on the untouched workspace, after the reference solution and after each cheap agent
    (clawsdk.runtime.probes), in `sandbox`: all are model-written code, so `auto` is bwrap where it works.

    Raises GateFailure with what went wrong (fed back to the model in a repair round).
    """
    from clawsdk.plugins import get_registry
    from clawsdk.runtime.oracle import OracleAgent
    from clawsdk.runtime.probes import Idle, probe_task
    from clawsdk.sandbox.base import SandboxConfig
    from clawsdk.sandbox.capabilities import choose_sandbox

    registry = get_registry()
    make = registry.get("sandboxes", choose_sandbox(sandbox))

    def make_sandbox() -> Any:
        return make(SandboxConfig())

    base = await _attempt(task, Idle(), make_sandbox, registry)
    out: dict[str, Any] = {"untouched_score": base.score}
    if base.error:
        raise GateFailure(f"on the untouched workspace the verifier failed to run: {base.error}; {base.detail}")
    if base.score != 0:
        raise GateFailure(f"on the untouched workspace (before any work) check.py scored {base.score:g}; it must "
                          f"score 0. Its output: {base.detail}")
    if task.solution:
        sol = await _attempt(task, OracleAgent(), make_sandbox, registry)
        out["reference_score"] = sol.score
        if sol.error:
            raise GateFailure(f"after the reference solution the verifier failed to run: {sol.error}; {sol.detail}")
        if sol.score is None or sol.score < task.verifier.pass_threshold:
            raise GateFailure(f"after the correct reference solution check.py scored {sol.score:g}; it must "
                              f"score 1. Its output: {sol.detail}")
    probes = await probe_task(task, make_sandbox, registry)
    out["cheap_scores"] = {p.agent: p.score for p in probes}
    problem = next((p for p in (c.problem(0.0) for c in probes) if p), "")
    if problem:
        raise GateFailure(f"check.py rewards an agent that did no work: {problem}. It must score 0 unless the "
                          "deliverables hold the right answer")
    return out
