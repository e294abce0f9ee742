"""PinchBench tasks: markdown with YAML frontmatter, and the `pinchbench` grade() verifier.

A task file::

    ---
    id: task_09_files
    grading_type: automated | llm_judge | hybrid
    timeout_seconds: 120
    workspace_files: [{source: data.csv, dest: data.csv}, {path: notes.txt, content: "..."}]
    grading_weights: {automated: 0.6, llm_judge: 0.4}     # hybrid only; default 0.5 / 0.5
    ---
    ## Prompt                 the instruction
    ## Expected Behavior      context for the judge
    ## Grading Criteria
    ## Automated Checks       a ```python block defining grade(transcript, workspace_path) -> dict
    ## LLM Judge Rubric       ### Criterion N: Name (Weight: X%) with **Score 1.0**: ... lines

`workspace_files[].source` is relative to the benchmark's `assets/` folder, looked for next to
the task file and one level up, first in the task's own `assets/<task_id>/` (the per-task dialect),
then in `assets/`. grade() runs inside the sandbox after the agent finishes, with the rollout's
recorded trajectory converted to OpenClaw's transcript shape.

Dialects seen in the wild, read as their graders read them:
- `grading_weights` with any keys: the reference grader reads `automated` and `llm_judge` (0.5 each when
  absent, 0.5/0.5 when they sum to 0) and ignores the rest; clawsdk does the same and warns, naming the
  task and the weight it used, where the reference says nothing (a misspelled `llm-judge`).
- `hybrid_gate: {min_automated: T}` (or `hybrid_gate: T`): the judge part counts only when grade()'s
  score reaches T; below it the judge is not asked and counts 0.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clawsdk.errors import TaskFormatError, VerifierError, VerifierTimeout
from clawsdk.hookspecs import hookimpl
from clawsdk.store.events import (
    ModelResponse,
    SandboxExec,
    StoredEvent,
    ToolCall,
    ToolResult,
    VerifierScore,
)
from clawsdk.tasks.model import File, Limits, Task, VerifierSpec
from clawsdk.tasks.paths import normalize_relative
from clawsdk.tasks.reading import Budget, check_instruction, guarded, parse_yaml, read_file, read_head, read_text
from clawsdk.verify.untouched import untouched_copy
from clawsdk.verify.verdict import SubScore, Verdict, Verifier, VerifyContext, spec_as
from clawsdk_plugins.sources.clawgym import validated_task, validation_message_of

log = logging.getLogger(__name__)

GRADE_FILE = "pinchbench/grade.py"
DEFAULT_WEIGHTS = {"automated": 0.5, "llm_judge": 0.5}
GRADING_TYPES = ("automated", "llm_judge", "hybrid")
TASK_GLOB = "task_*.md"
_MARK = "__CLAWSDK_GRADE__"

# Runs inside the sandbox: loads the task's grade(), feeds it the transcript from stdin.
RUNNER = r'''
import json, sys, traceback
MARK = "__CLAWSDK_GRADE__"
path, workspace = sys.argv[1], sys.argv[2]
stage = "load"
try:
    transcript = json.loads(sys.stdin.read() or "[]")
    ns = {"__name__": "pinchbench_grade", "__file__": path}
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), "grade()", "exec"), ns)
    grade = ns.get("grade")
    if not callable(grade):
        out = {"error": "the Automated Checks code defines no grade() function", "stage": stage}
    else:
        stage = "grade"
        out = {"result": grade(transcript, workspace)}
except BaseException as e:
    tb = traceback.format_exc().strip().splitlines()
    out = {"error": "%s: %s" % (type(e).__name__, e), "stage": stage, "traceback": "\n".join(tb[-6:])}
sys.stdout.write("\n" + MARK + json.dumps(out, default=repr) + "\n")
'''


# ---- the markdown format ------------------------------------------------------------------


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(frontmatter YAML, body); None when the file does not start with a '---' block (a byte order mark
    before it, as some editors on Windows write, is not part of the file's text)."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1:])
    return None, text


def sections(body: str) -> dict[str, str]:
    """The `## Heading` sections of the body (headings inside code fences do not count)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    fence = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^##\s+(.+?)\s*#*\s*$", line)
        if m and not line.startswith("###"):
            current = out.setdefault(m.group(1).strip().lower(), [])
            continue
        if current is not None:
            current.append(line)
    return {k: _trim("\n".join(v)) for k, v in out.items()}


def _trim(text: str) -> str:
    lines = text.strip("\n").splitlines()
    while lines and lines[-1].strip() in ("", "---"):
        lines.pop()
    while lines and lines[0].strip() in ("", "---"):
        lines.pop(0)
    return "\n".join(lines).strip()


def python_block(text: str) -> str | None:
    """The first ```python fenced block of a section."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*```\s*(python|py)\s*$", line):
            body: list[str] = []
            for nxt in lines[i + 1:]:
                if nxt.strip() == "```":
                    return "\n".join(body) + "\n"
                body.append(nxt)
            return "\n".join(body) + "\n"
    return None


def compile_error(code: str) -> str | None:
    """Why the grade() code does not compile, or None. Checked at load: a typo in it made every rollout a
    verifier_error."""
    try:
        compile(code, "grade()", "exec", dont_inherit=True)
    except SyntaxError as e:
        return f"{e.msg} (line {e.lineno} of the code)"
    except (ValueError, RecursionError, MemoryError) as e:  # a NUL byte, nesting past the parser
        return f"{type(e).__name__}: {e}"
    return None


def _asset_places(md: Path, assets: Path | None, source: str, task_id: str = "") -> list[tuple[Path, str]]:
    """(folder, path below it) where a workspace_files source may be, in the order they are tried: the
    task's own `assets/<task_id>/` first (the per-task dialect), then `assets/`.

    The source is resolved below each folder without following a symlink, so it can name
    nothing outside the benchmark's assets/ (or the task file's own folder).
    """
    bare = source.removeprefix("assets/")
    own = [f"{task_id}/{bare}"] if task_id else []
    places = [(assets, rel) for rel in (*own, source, bare)] if assets else []
    for base in (md.parent, md.parent.parent):
        places += [(base, f"assets/{rel}") for rel in (*own, source, bare)]
    places += [(md.parent, source), (md.parent, bare)]
    seen, out = set(), []
    for base, rel in places:
        if (base, rel) not in seen:
            seen.add((base, rel))
            out.append((base, rel))
    return out


def _read_asset(md: Path, assets: Path | None, source: str, field: str, task_id: str, budget: Budget,
                found: dict[str, str] | None = None) -> bytes:
    """The bytes of a workspace_files source; `found` gets source -> the path it was read from."""
    try:
        source = normalize_relative(source)
    except ValueError:
        raise TaskFormatError(str(md), f"source {source!r} must be a relative path inside the benchmark's "
                              "assets/ folder", field=f"{field}.source", task_id=task_id) from None
    tried = []
    for base, rel in _asset_places(md, assets, source, task_id):
        tried.append(str(base / rel))
        try:
            data = read_file(base, rel, limits=budget.limits)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except TaskFormatError as e:
            raise TaskFormatError(str(md), f"source {source!r}: {e}", field=f"{field}.source",
                                  task_id=task_id) from None
        budget.take(str(base / rel), files=1, size=len(data))
        if found is not None:
            found[source] = rel
        return data
    raise TaskFormatError(str(md), f"source {source!r} not found (looked at {', '.join(tried[:4])}); "
                          "put it in the benchmark's assets/ folder", field=f"{field}.source", task_id=task_id)


def _workspace_files(raw: Any, md: Path, assets: Path | None, task_id: str, budget: Budget,
                     found: dict[str, str] | None = None) -> list[File]:
    if raw in (None, []):
        return []
    if not isinstance(raw, list):
        raise TaskFormatError(str(md), "must be a list of {source, dest} or {path, content}",
                              field="workspace_files", task_id=task_id)
    if len(raw) > budget.limits.files:
        raise TaskFormatError(str(md), f"{len(raw):,} files, over the {budget.limits.files:,} limit; set "
                              "CLAWSDK_MAX_TASK_FILES to allow more", field="workspace_files", task_id=task_id)
    files = []
    for i, item in enumerate(raw):
        field = f"workspace_files[{i}]"
        if not isinstance(item, dict):
            raise TaskFormatError(str(md), "must be {source, dest} or {path, content}", field=field, task_id=task_id)
        dest = item.get("dest") or item.get("path")
        if not isinstance(dest, str) or not dest:
            raise TaskFormatError(str(md), "needs 'dest' (or 'path'): where the file goes in the workspace",
                                  field=field, task_id=task_id)
        try:
            if "content" in item:
                content = item["content"]
                text = content if isinstance(content, str) else json.dumps(content, indent=2, default=str)
                files.append(File(path=dest, text=text))
                continue
            source = item.get("source")
            if not isinstance(source, str) or not source:
                raise TaskFormatError(str(md), "needs 'source' (a file under assets/) or 'content'",
                                      field=field, task_id=task_id)
            files.append(File.from_bytes(dest, _read_asset(md, assets, source, field, task_id, budget, found)))
        except ValidationError as e:
            raise TaskFormatError(str(md), validation_message_of(e), field=field, task_id=task_id) from None
    return files


def _weights(raw: Any, md: Path, task_id: str, warnings: list[str]) -> dict[str, float]:
    """`grading_weights` as PinchBench's reference grader reads it (`_combine_grades`): `automated` and
    `llm_judge`, each 0.5 when absent, 0.5/0.5 when they sum to 0; any other key is ignored, here with a
    warning naming the task and the weight used (the reference says nothing)."""
    if raw is None:
        return dict(DEFAULT_WEIGHTS)
    if not isinstance(raw, dict):
        raise TaskFormatError(str(md), "must be a mapping {automated: W, llm_judge: W}", field="grading_weights",
                              task_id=task_id)
    w = {}
    for key in ("automated", "llm_judge"):
        value = raw.get(key, DEFAULT_WEIGHTS[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise TaskFormatError(str(md), f"must be a finite number >= 0, got {value!r}",
                                  field=f"grading_weights.{key}", task_id=task_id)
        w[key] = float(value)
    unknown = [str(k) for k in raw if k not in w]
    if unknown:
        missing = [k for k in w if k not in raw]
        warnings.append(f"grading_weights: {', '.join(map(repr, unknown))} "
                        f"{'is not a key' if len(unknown) == 1 else 'are not keys'} PinchBench's grader reads "
                        f"(automated, llm_judge), so it is ignored, as the reference ignores it"
                        + (f"; {' and '.join(f'{k} weighs {w[k]:g}' for k in missing)} (the default)" if missing
                           else ""))
    if sum(w.values()) <= 0:
        warnings.append("grading_weights sum to 0; PinchBench's grader then weighs automated and llm_judge 0.5 "
                        "each, and so does clawsdk")
        w = dict(DEFAULT_WEIGHTS)
    return w


def _gate(raw: Any, md: Path, task_id: str) -> float | None:
    """`hybrid_gate`: the automated score the judge part needs to count (None: no gate)."""
    if raw is None:
        return None
    value = raw.get("min_automated") if isinstance(raw, dict) else raw
    extra = set(raw) - {"min_automated"} if isinstance(raw, dict) else set()
    if extra or isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise TaskFormatError(str(md), f"must be a number in [0, 1] or {{min_automated: N}}, got {raw!r}",
                              field="hybrid_gate", task_id=task_id)
    return float(value)


def load_markdown_task(md: Path, assets: Path | None = None) -> Task:
    """One PinchBench task file, or TaskFormatError naming the field at fault."""
    budget = Budget()
    text = read_text(md.parent, md.name, limits=budget.limits)
    front, body = split_frontmatter(text)
    if front is None:
        raise TaskFormatError(str(md), "no YAML frontmatter: a PinchBench task starts with a '---' block "
                                       "holding id, name, grading_type")
    try:
        meta = parse_yaml(front, str(md), limits=budget.limits, line_offset=1) or {}
    except TaskFormatError as e:
        raise TaskFormatError(str(md), e.message.replace("invalid YAML", "invalid YAML frontmatter", 1)) from None
    if not isinstance(meta, dict):
        raise TaskFormatError(str(md), "the frontmatter must be a mapping of fields")
    task_id = meta.get("id")
    if not isinstance(task_id, (str, int)) or not str(task_id).strip():
        raise TaskFormatError(str(md), "the frontmatter has no 'id' (every PinchBench task needs one, "
                                       "e.g. id: task_09_files)", field="id")
    task_id = str(task_id).strip()
    parts = sections(body)
    prompt = parts.get("prompt", "")
    if not prompt:
        raise TaskFormatError(str(md), "no '## Prompt' section (the instruction given to the agent)",
                              field="## Prompt", task_id=task_id)
    check_instruction(prompt, str(md), "## Prompt", task_id, budget.limits)
    grading = str(meta.get("grading_type") or "automated").strip().lower()
    if grading not in GRADING_TYPES:
        raise TaskFormatError(str(md), f"{grading!r} is not one of {', '.join(GRADING_TYPES)}",
                              field="grading_type", task_id=task_id)
    code = python_block(parts.get("automated checks", ""))
    rubric = parts.get("llm judge rubric", "")
    if grading in ("automated", "hybrid") and not code:
        raise TaskFormatError(str(md), f"grading_type {grading} needs a ```python grade() block under "
                              "'## Automated Checks'", field="## Automated Checks", task_id=task_id)
    if code is not None and not re.search(r"^def grade\s*\(", code, re.M):
        raise TaskFormatError(str(md), "the python block defines no grade(transcript, workspace_path) function",
                              field="## Automated Checks", task_id=task_id)
    if code is not None and (error := compile_error(code)):
        raise TaskFormatError(str(md), f"the python block does not compile: {error}", field="## Automated Checks",
                              task_id=task_id)
    if grading in ("llm_judge", "hybrid") and not rubric:
        raise TaskFormatError(str(md), f"grading_type {grading} needs a '## LLM Judge Rubric' section",
                              field="## LLM Judge Rubric", task_id=task_id)
    warnings: list[str] = []
    weights = _weights(meta.get("grading_weights"), md, task_id, warnings)
    gate = _gate(meta.get("hybrid_gate"), md, task_id)
    if gate is not None and grading != "hybrid":
        raise TaskFormatError(str(md), f"a gate needs grading_type hybrid, not {grading}", field="hybrid_gate",
                              task_id=task_id)
    for w in warnings:
        log.warning("%s (task %s): %s", md, task_id, w)
    code_spec: dict[str, Any] = {"type": "pinchbench", "grade_file": GRADE_FILE}
    found: dict[str, str] = {}  # workspace_files source -> where it was read (assets/<task_id>/..., assets/...)
    judge_spec = {"type": "rubric", "rubric": rubric, "include_transcript": True,
                  "context": parts.get("expected behavior", "")}
    if grading == "automated":
        verifier: dict[str, Any] = code_spec
    elif grading == "llm_judge":
        verifier = judge_spec
    else:
        automated: dict[str, Any] = {"name": "automated", "weight": weights["automated"], "verifier": code_spec}
        if gate is not None:  # grade() below the gate "does not pass", which keeps the judge from counting
            code_spec["pass_threshold"] = gate
            automated["gate"] = True
        verifier = {"type": "hybrid", "parts": [
            automated, {"name": "llm_judge", "weight": weights["llm_judge"], "verifier": judge_spec}]}
    timeout = meta.get("timeout_seconds")
    limits: dict[str, Any] = {}
    if timeout is not None:
        try:
            limits["timeout_s"] = float(timeout)
            if not 0 < limits["timeout_s"] < float("inf"):
                raise ValueError(timeout)
        except (TypeError, ValueError, OverflowError):
            raise TaskFormatError(str(md), f"must be a positive number of seconds, got {timeout!r}",
                                  field="timeout_seconds", task_id=task_id) from None
    if grading != "automated":
        limits["verifier_timeout_s"] = 300.0
    data = {
        "id": task_id,
        "instruction": prompt,
        "category": str(meta["category"]) if meta.get("category") else None,
        "workspace": _workspace_files(meta.get("workspace_files"), md, assets, task_id, budget, found),
        "hidden": [File(path=GRADE_FILE, text=code)] if code else [],
        "verifier": VerifierSpec.model_validate(verifier),
        "limits": Limits.model_validate(limits),
        "metadata": {"pinchbench": {"name": meta.get("name"), "grading_type": grading,
                                    "grading_weights": weights,
                                    **({"hybrid_gate": {"min_automated": gate}} if gate is not None else {}),
                                    **({"warnings": warnings} if warnings else {}),
                                    **({"assets": found} if found else {}),
                                    "expected_behavior": parts.get("expected behavior", ""),
                                    "grading_criteria": parts.get("grading criteria", "")}},
        "provenance": {"source": "pinchbench", "path": str(md)},
    }
    return validated_task(data, str(md), task_id, id_field="id")


def _looks_like_task(md: Path) -> bool:
    try:
        head = read_head(md.parent, md.name, 4000).decode("utf-8", errors="replace")
    except (OSError, TaskFormatError):
        return False
    front, _ = split_frontmatter(head)
    return front is not None and re.search(r"^id\s*:", front, re.M) is not None


class PinchBenchSource:
    """A PinchBench task file, or a folder of them (`task_*.md`, like PinchBench's tasks/ folder)."""

    def __init__(self, assets: Path | None = None):
        self.assets = assets

    def detect(self, path: Path) -> bool:
        if path.is_file():
            return path.suffix == ".md" and _looks_like_task(path)
        return path.is_dir() and any(_looks_like_task(p) for p in sorted(path.glob(TASK_GLOB))[:5])

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]:
        if path.is_file():
            files = [path.resolve()]  # the file named on the command line; a symlink found in a folder is refused
        elif path.is_dir():
            files = sorted(path.glob(TASK_GLOB))
            if not files:
                yield TaskFormatError(str(path), f"no PinchBench task files ({TASK_GLOB}) in this folder")
        else:
            yield TaskFormatError(str(path), "no such file or folder")
            return
        for md in files:
            yield guarded(md, functools.partial(load_markdown_task, md, self.assets))


# ---- our trajectory as OpenClaw's transcript -----------------------------------------------


def _message(role: str, content: list[dict], **extra: Any) -> dict:
    return {"type": "message", "message": {"role": role, "content": content, **extra}}


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw if raw is not None else {}


def to_transcript(events: list[StoredEvent] | None, instruction: str | None = None) -> list[dict]:
    """The rollout's recorded events in the shape PinchBench's grade() reads.

    Entries are {"type": "message", "message": {"role": "user" | "assistant" | "toolResult",
    "content": [...]}}; assistant content holds {"type": "text"} and {"type": "toolCall", "id",
    "name", "arguments"} items. A tool call made without a model (a scripted agent, the oracle)
    becomes an assistant message of its own.
    """
    out: list[dict] = []
    if instruction:
        out.append(_message("user", [{"type": "text", "text": instruction}]))
    pending: list[tuple[str, str]] = []  # (id, name) announced by the last model response
    awaiting: list[tuple[Any, str, str]] = []  # (seq, id, name) of calls made, waiting for their result
    for i, e in enumerate(events or []):
        if isinstance(e, ModelResponse):
            msg = e.message if isinstance(e.message, dict) else {}
            content: list[dict] = []
            if msg.get("content"):
                content.append({"type": "text", "text": str(msg["content"])})
            pending = []
            for j, call in enumerate(msg.get("tool_calls") or []):
                fn = call.get("function", call)
                cid = str(call.get("id") or f"call_{i}_{j}")
                name = str(fn.get("name", ""))
                content.append({"type": "toolCall", "id": cid, "name": name,
                                "arguments": _arguments(fn.get("arguments"))})
                pending.append((cid, name))
            if content:
                out.append(_message("assistant", content))
        elif isinstance(e, ToolCall):
            name = "" if e.tool is None else str(e.tool)
            seq = e.seq if e.seq is not None else i
            if pending and pending[0][1] == name:
                awaiting.append((seq, *pending.pop(0)))
            else:
                cid = f"call_{seq}"
                out.append(_message("assistant", [{"type": "toolCall", "id": cid, "name": name,
                                                   "arguments": e.args or {}}]))
                awaiting.append((seq, cid, name))
        elif isinstance(e, ToolResult):
            name = "" if e.tool is None else str(e.tool)
            # the call it names (concurrent calls answer in any order); a result recorded before results
            # named their call answers the first call of its tool still waiting
            own = [k for k, (seq, _, _) in enumerate(awaiting) if e.call is not None and seq == e.call]
            match = own[0] if own else next((k for k, (_, _, n) in enumerate(awaiting) if n == name), None)
            cid = awaiting.pop(match)[1] if match is not None else f"call_{e.seq if e.seq is not None else i}"
            out.append(_message("toolResult", [{"type": "text", "text": "" if e.content is None else str(e.content)}],
                                toolCallId=cid, toolName=name, isError=bool(e.is_error)))
    return out


# ---- the grade() verifier -----------------------------------------------------------------


class PinchBenchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = "pinchbench"
    grade_file: str = GRADE_FILE
    timeout_s: float = Field(60.0, gt=0)
    pass_threshold: float = Field(1.0, ge=0, le=1)
    untouched_score_max: float | None = Field(None, ge=0, le=1)
    checks: list = Field(default_factory=list)


def parse_grade_output(stdout: str, task_id: str) -> dict[str, Any]:
    """The runner's result: {"result": ...}, or {"error": ...} when grade() itself raised; VerifierError
    when the runner printed nothing or the grade code could not be loaded."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        raise VerifierError(f"task {task_id}: grade() runner printed no result (output: {stdout[-300:]!r})")
    out = json.loads(line[len(_MARK):])
    if "error" in out and out.get("stage") != "grade":
        tb = out.get("traceback", "")
        raise VerifierError(f"task {task_id}: grade() raised {out['error']}" + (f"\n{tb}" if tb else ""))
    return out


def scores_of(result: Any, task_id: str) -> list[SubScore]:
    if not isinstance(result, dict):
        raise VerifierError(f"task {task_id}: grade() must return a dict of criterion -> score, "
                            f"got {type(result).__name__}: {str(result)[:200]}")
    if not result:
        raise VerifierError(f"task {task_id}: grade() returned an empty dict; nothing to score")
    subs = []
    for key, value in result.items():
        try:
            score = float(value)
        except (TypeError, ValueError):
            raise VerifierError(f"task {task_id}: grade() gave {key!r} the value {value!r}, not a number") from None
        if math.isnan(score):
            raise VerifierError(f"task {task_id}: grade() gave {key!r} NaN")
        detail = f"grade(): {value!r}"
        if not 0 <= score <= 1:
            detail += " (clipped to [0, 1])"
            score = min(max(score, 0.0), 1.0)
        subs.append(SubScore(name=str(key)[:200], score=score, detail=detail[:200]))
    return subs


class PinchBenchVerifier(Verifier):
    """Runs the task's grade(transcript, workspace_path) in the sandbox; the score is the mean."""

    name = "pinchbench"

    def __init__(self, spec: VerifierSpec):
        self.spec = spec_as(PinchBenchSpec, spec)

    def check_task(self, task: Task) -> None:
        """ValueError when the task does not hold a grade() code that compiles: every rollout of it would be a
        verifier_error."""
        f = next((f for f in task.hidden if f.path == self.spec.grade_file), None)
        if f is None:
            raise ValueError(f"verifier.grade_file: {self.spec.grade_file!r} is not among the task's hidden "
                             f"files; the pinchbench verifier runs its grade() (in a native task: "
                             f"hidden/{self.spec.grade_file})")
        try:
            error = compile_error(f.data.decode("utf-8"))
        except UnicodeDecodeError as e:
            error = f"not UTF-8 text: {e}"
        if error:
            raise ValueError(f"verifier.grade_file: {self.spec.grade_file!r} does not compile: {error}")

    async def verify(self, ctx: VerifyContext) -> Verdict:
        task, spec = ctx.task, self.spec
        if not any(f.path == spec.grade_file for f in task.hidden) or not ctx.hidden_path:
            raise VerifierError(f"task {task.id}: {spec.grade_file} is not among its hidden files")
        transcript = to_transcript(await ctx.events(), task.instruction)
        out = await self._grade(ctx, ctx.sandbox.workspace_path, transcript, "grade(transcript, workspace_path)")
        if "error" in out:
            # on what the agent left (a file that is not UTF-8, a folder where it reads a file, JSON of
            # another shape) that is the agent's failure: unscored, an agent could drop any task from its
            # score by breaking its deliverable. It is the grade code's own when the task's untouched
            # files make it raise too.
            # A timeout is judged the same way: grade() slowed by what the agent left (a 200,000-digit line
            # under a regex) scores 0; slow on the untouched files too, it is the grader's own (unscored).
            tb = out.get("traceback", "")
            error = f"grade() raised {out['error']}" + (f"\n{tb}" if tb else "")
            untouched = await self._grade_untouched(ctx)
            if untouched.get("timed_out"):
                raise VerifierTimeout(f"task {task.id}: grade() did not finish within {spec.timeout_s:g} s "
                                      f"on the task's untouched files")
            if "error" in untouched:
                raise VerifierError(f"task {task.id}: {error} (on the task's untouched files too)")
            reason = f"scored 0: {error} on the agent's files (it scores the task's untouched files)"
            await ctx.recorder.record(VerifierScore(check="grade()", score=0.0, detail=reason[:4000]))
            return Verdict(verifier=self.name, score=0.0, passed=False, detail=reason[:4000])
        subs = scores_of(out.get("result"), task.id)
        for s in subs:
            await ctx.recorder.record(VerifierScore(check=s.name, score=s.score, detail=s.detail))
        verdict = Verdict.aggregate(self.name, subs, spec.pass_threshold,
                                    detail=f"mean of {len(subs)} grade() criteria")
        return verdict

    async def _grade(self, ctx: VerifyContext, workspace: str, transcript: list, what: str) -> dict[str, Any]:
        assert ctx.hidden_path  # verify() refused a context without the hidden files
        grade_path = f"{ctx.hidden_path.rstrip('/')}/{self.spec.grade_file}"
        result = await ctx.sandbox.exec(
            # -I: `python3 -c` imports from the working folder (the workspace) first, so a json.py the agent
            # wrote there scored 1.0; isolated mode takes neither that folder nor the user site
            ["python3", "-I", "-c", RUNNER, grade_path, workspace],
            timeout=self.spec.timeout_s, stdin=json.dumps(transcript, default=str).encode("utf-8"),
        )
        await ctx.recorder.record(SandboxExec.of(what, result))
        if result.timed_out:
            return {"error": f"a timeout (it did not finish within {self.spec.timeout_s:g} s)", "timed_out": True}
        return parse_grade_output(result.stdout + ("\n" + result.stderr if not result.stdout else ""), ctx.task.id)

    async def _grade_untouched(self, ctx: VerifyContext) -> dict[str, Any]:
        """grade() as the task stood before the agent: its initial files, copied beside the hidden files
        (no folder above them is the agent's), and a transcript of the instruction alone. {} when the copy
        cannot be written: the agent filled its disk, and its files are what failed."""
        where = await untouched_copy(ctx, ctx.task.workspace)
        if where is None:
            return {}
        return await self._grade(ctx, where, to_transcript([], ctx.task.instruction), "grade() of the untouched task")


@hookimpl
def register_task_sources(register):
    register("pinchbench", PinchBenchSource())


@hookimpl
def register_verifiers(register):
    register("pinchbench", PinchBenchVerifier)
