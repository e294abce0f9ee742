"""ClawGym tasks: the folder format, `syn_task.jsonl`, and the `clawgym` reward verifier.

Folder format::

    task_0091/
      data_entry.json      task_id, user_query, input_mount_dir, metadata{category, grading_type, rule?}
      input_files/         copied into the workspace as they are
      reward/reward.sh     hidden until scoring; prints the score as its last stdout line
      reward/check.py      prints a JSON dict of sub-scores for the workspace given as argv[1]

The reward scripts name the workspace by its absolute mount path (``/root/.openclaw/workspace``).
At scoring time the verifier writes ``reward/`` into the workspace, where the scripts expect it,
and, when the sandbox's workspace is somewhere else (the local sandbox), rewrites that path in
the copies to the sandbox's own workspace path, so nothing ever touches the host's ``/root``.
Whatever the agent left at ``reward`` (a file, a folder, a symlink) is moved aside first, so
it can neither block the scripts (which would leave the rollout unscored) nor redirect them.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import re
import shlex
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clawsdk.errors import TaskFormatError, VerifierError, VerifierTimeout
from clawsdk.hookspecs import hookimpl
from clawsdk.store.events import SandboxExec, VerifierScore
from clawsdk.tasks import native
from clawsdk.tasks.categories import fill_missing_category
from clawsdk.tasks.model import File, Limits, Task, VerifierSpec
from clawsdk.tasks.reading import Budget, ReadLimits, check_instruction, lexists, parse_json, read_text, read_tree
from clawsdk.verify.untouched import untouched_copy
from clawsdk.verify.verdict import SubScore, Verdict, Verifier, VerifyContext, read_score, spec_as

ENTRY_FILE = "data_entry.json"
INPUT_DIR = "input_files"
REWARD_DIR = "reward"
MOUNT_DIR = "/root/.openclaw/workspace"
DEFAULT_TIMEOUT_S = 120.0
#: ClawGym-Bench's hybrid weighting: 0.7 code checks + 0.3 rubric judge.
CODE_WEIGHT, RUBRIC_WEIGHT = 0.7, 0.3

#: The reward.sh ClawGym ships with every task: the mean of check.py's dict (byte for byte).
REWARD_SH = (
    "#!/usr/bin/env bash\n"
    "set -euo pipefail\n"
    "\n"
    "python3 /root/.openclaw/workspace/reward/check.py /root/.openclaw/workspace | python3 -c "
    "'import json, sys; raw = sys.stdin.read().strip(); data = json.loads(raw); "
    "print(sum(float(v) for v in data.values()) / len(data) if isinstance(data, dict) and data "
    "else float(data) if isinstance(data, (int, float)) else 0.0)'\n"
)

# When a hook_code only defines grade(), this makes it the script reward.sh expects.
_GRADE_MAIN = '''

if __name__ == "__main__":
    import json as _json
    import sys as _sys

    print(_json.dumps(grade([], _sys.argv[1] if len(_sys.argv) > 1 else ".")))
'''


# ---- reading -------------------------------------------------------------------------------


def _clean_category(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def mount_dir_of(value: Any) -> str:
    """`input_mount_dir` (the workspace's absolute path in the reward scripts) normalised: no trailing or
    doubled '/', no '.' parts. ValueError for what the scripts' path rewrite cannot use: "/" would put the
    workspace path between every two characters of them, '..' names a folder outside the one given."""
    if not isinstance(value, str):
        raise ValueError(f"must be an absolute path (text), not {type(value).__name__}")
    if "\x00" in value or "\n" in value or "\r" in value:
        raise ValueError(f"must be an absolute path on one line, without NUL bytes: {value[:80]!r}")
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path, got {value[:80]!r}")
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"must not hold '..': {value[:80]!r}")
    if not parts:
        raise ValueError(f"must name a folder below '/', not {value[:80]!r}: the reward scripts name the "
                         f"workspace by that path (ClawGym's is {MOUNT_DIR})")
    return "/" + "/".join(parts)


@functools.lru_cache(maxsize=1024)
def compile_error(data: bytes) -> str | None:
    """Why a Python script does not compile (as python3 reads the file: its coding declaration, else UTF-8),
    or None. Checked at load: a check.py with a typo made every rollout a scored 0 blamed on the agent.
    Remembered by content: the loader and the verifier's check_task both ask, and compiling took a tenth of
    a ClawGym listing's CPU."""
    try:
        compile(data, "check.py", "exec", dont_inherit=True)
    except SyntaxError as e:
        return f"{type(e).__name__}: {e.msg}" + (f" (line {e.lineno})" if e.lineno else "")
    except (ValueError, RecursionError, MemoryError) as e:  # a NUL byte, nesting past the parser
        return f"{type(e).__name__}: {e}"
    return None


def rules_of(raw: Any) -> tuple[list[dict] | None, str | None]:
    """ClawGym's `rule`/`rules` as (rubric rules, free-text rubric); a dict is one rule."""
    if raw in (None, "", [], {}):
        return None, None
    if isinstance(raw, str):
        return None, raw
    if isinstance(raw, dict):
        return [raw], None
    if isinstance(raw, list) and all(isinstance(r, dict) for r in raw):
        return raw, None
    if isinstance(raw, list) and all(isinstance(r, str) for r in raw):
        return None, "\n".join(f"- {r}" for r in raw)
    raise ValueError("must be a rule {name, file_path, scores}, a list of them, or rubric text")


def build_verifier(*, grading_type: str | None, has_reward: bool, rules: list[dict] | None,
                   rubric: str | None, mount_dir: str, timeout_s: float) -> VerifierSpec:
    """The verifier of a ClawGym task from its grading type and what it ships."""
    code = {"type": "clawgym", "script": f"{REWARD_DIR}/reward.sh", "check": f"{REWARD_DIR}/check.py",
            "mount_dir": mount_dir, "timeout_s": timeout_s, "untouched_score_max": 0.0}
    judge: dict[str, Any] = {"type": "rubric"}
    if rules:
        judge["rules"] = rules
    elif rubric:
        judge["rubric"] = rubric
    has_rubric = bool(rules or rubric)
    if grading_type is not None and not isinstance(grading_type, str):
        raise ValueError(f"grading_type must be text (automated, hybrid or llm_judge), not {type(grading_type).__name__}")
    kind = (grading_type or "").strip().lower()
    if kind in ("llm_judge", "rubric", "judge") or (not kind and has_rubric and not has_reward):
        if not has_rubric:
            raise ValueError(f"grading_type {grading_type!r} needs metadata.rule (the rubric), which is missing")
        return VerifierSpec.model_validate(judge)
    if kind in ("hybrid",) or (not kind and has_rubric and has_reward):
        if not has_reward:
            raise ValueError("grading_type 'hybrid' needs reward/reward.sh, which is missing")
        if not has_rubric:
            raise ValueError("grading_type 'hybrid' needs metadata.rule (the rubric), which is missing")
        return VerifierSpec.model_validate({
            "type": "hybrid",
            "untouched_score_max": 0.0,
            "parts": [{"name": "code", "weight": CODE_WEIGHT, "verifier": code},
                      {"name": "rubric", "weight": RUBRIC_WEIGHT, "verifier": judge}],
        })
    if kind not in ("", "automated", "code"):
        raise ValueError(f"unknown grading_type {grading_type!r}; one of automated, hybrid, llm_judge")
    if not has_reward:
        raise ValueError(f"{REWARD_DIR}/reward.sh is missing; an automated ClawGym task needs it")
    return VerifierSpec.model_validate(code)


def _limits(timeout_s: float, verifier: VerifierSpec) -> Limits:
    # reward.sh, then check.py again for the sub-scores, then the judge if there is one
    extra = 180.0 if verifier.type != "clawgym" else 0.0
    return Limits(verifier_timeout_s=2 * timeout_s + 30 + extra)


def _apply_clawsdk_extras(data: dict[str, Any], extras: Any, where: str, task_id: str) -> None:
    """Fields only clawsdk writes (under the `clawsdk` key) so native -> ClawGym -> native loses nothing."""
    if extras is None:
        return
    if not isinstance(extras, dict):
        raise TaskFormatError(where, "must be a mapping of task fields", field="clawsdk", task_id=task_id)
    for key in ("difficulty", "tags", "tools", "solution", "limits", "verifier", "category", "tool_policy",
                "tool_config"):
        if key in extras:
            data[key] = extras[key]
    if isinstance(extras.get("metadata"), dict):
        data["metadata"] = {**extras["metadata"], **data.get("metadata", {})}


def load_folder_task(folder: Path) -> Task:
    """One ClawGym task folder, or TaskFormatError naming the file and field at fault."""
    entry_path = folder / ENTRY_FILE
    budget = Budget()
    try:
        text = read_text(folder, ENTRY_FILE, limits=budget.limits)
    except FileNotFoundError:
        raise TaskFormatError(str(entry_path), f"missing; a ClawGym task folder needs {ENTRY_FILE}") from None
    try:
        raw = parse_json(text, str(entry_path), limits=budget.limits)
    except TaskFormatError as e:
        e.task_id = folder.name
        raise
    if not isinstance(raw, dict):
        raise TaskFormatError(str(entry_path), f"must be a JSON object, not {type(raw).__name__}",
                              task_id=folder.name)
    task_id = _task_id(raw.get("task_id"), folder.name, str(entry_path), "task_id")
    query = raw.get("user_query")
    if not isinstance(query, str) or not query.strip():
        what = "is required but missing" if query is None else "must be non-empty text"
        raise TaskFormatError(str(entry_path), f"{what}: the instruction given to the agent",
                              field="user_query", task_id=task_id)
    check_instruction(query, str(entry_path), "user_query", task_id, budget.limits)
    meta = raw.get("metadata") or {}
    if not isinstance(meta, dict):
        raise TaskFormatError(str(entry_path), "must be a JSON object", field="metadata", task_id=task_id)
    try:
        mount = mount_dir_of(raw.get("input_mount_dir") or MOUNT_DIR)
    except ValueError as e:
        raise TaskFormatError(str(entry_path), str(e), field="input_mount_dir", task_id=task_id) from None
    try:
        workspace = read_tree(folder, INPUT_DIR, budget=budget) if lexists(folder, INPUT_DIR) else []
        hidden = (read_tree(folder, REWARD_DIR, f"{REWARD_DIR}/", budget=budget)
                  if lexists(folder, REWARD_DIR) else [])
    except TaskFormatError as e:
        e.task_id = task_id
        raise
    except ValidationError as e:  # a file no workspace can hold; the message names it
        raise TaskFormatError(str(folder), validation_message_of(e), task_id=task_id) from None
    except (OSError, ValueError) as e:
        raise TaskFormatError(str(folder), f"cannot read the task files: {e}", task_id=task_id) from None
    # reward.sh is run with bash: its mode bit carries nothing (and a jsonl line cannot hold it)
    hidden = [f.model_copy(update={"executable": True}) if f.path == f"{REWARD_DIR}/reward.sh" else f
              for f in hidden]
    has_reward = any(f.path == f"{REWARD_DIR}/reward.sh" for f in hidden)
    for f in hidden:  # check.py and any module beside it: python3 runs them at scoring time
        error = compile_error(f.data) if f.path.endswith(".py") else None
        if error:
            raise TaskFormatError(str(folder), f"does not compile: {error}", field=f.path, task_id=task_id)
    try:
        rules, rubric = rules_of(meta.get("rule", meta.get("rules")))
        verifier = build_verifier(grading_type=meta.get("grading_type"), has_reward=has_reward, rules=rules,
                                  rubric=rubric, mount_dir=mount, timeout_s=DEFAULT_TIMEOUT_S)
    except ValueError as e:
        field = "metadata.rule" if "must be a rule" in str(e) else "metadata.grading_type"
        raise TaskFormatError(str(entry_path), str(e), field=field, task_id=task_id) from None
    data: dict[str, Any] = {
        "id": task_id,
        "instruction": query,
        "category": _clean_category(meta.get("category")),
        "workspace": workspace,
        "hidden": hidden,
        "verifier": verifier,
        "limits": _limits(DEFAULT_TIMEOUT_S, verifier),
        "metadata": {"clawgym": {k: v for k, v in raw.items() if k not in ("user_query", "clawsdk")}},
        "provenance": {"source": "clawgym", "path": str(folder)},
    }
    _apply_clawsdk_extras(data, raw.get("clawsdk"), str(entry_path), task_id)
    fill_missing_category(data)  # upstream leaves most categories empty: inferred, and marked so
    return validated_task(data, str(entry_path), task_id)


def validated_task(data: dict[str, Any], where: str, task_id: str, id_field: str = "task_id") -> Task:
    """The Task of `data`, or TaskFormatError naming the field as the file names it (`id_field` for the id)."""
    from clawsdk.tasks.native import _check_verifier, validation_message

    try:
        task = Task.model_validate(data)
    except ValidationError as e:
        field, msg = validation_message(e)
        field = id_field if field == "id" else field
        raise TaskFormatError(where, msg, field=field, task_id=task_id) from None
    _check_verifier(task, Path(where))
    return task


def _jsonl_file(item: Any, i: int, mount: str) -> File:
    if not isinstance(item, dict):
        raise ValueError(f"input_files[{i}] must be an object {{file_path, content}}")
    path = item.get("file_path") or item.get("path")
    if not isinstance(path, str) or not path:
        raise ValueError(f"input_files[{i}].file_path is required")
    if path.startswith(mount + "/"):
        path = path[len(mount) + 1:]
    if "content" in item and item["content"] is None:
        raise ValueError(f"input_files[{i}].content is null; give the file's text (\"\" for an empty file)")
    content = item.get("content", "")
    encoding = item.get("encoding")
    if encoding is not None and (not isinstance(encoding, str)
                                 or encoding.strip().lower() not in ("base64", "utf-8", "utf8", "text", "")):
        raise ValueError(f"input_files[{i}].encoding {encoding!r} is unknown; leave it out for text, or give "
                         "'base64' for bytes")
    if isinstance(encoding, str) and encoding.strip().lower() == "base64":
        if not isinstance(content, str):
            raise ValueError(f"input_files[{i}].content must be base64 text with encoding 'base64', "
                             f"not {type(content).__name__}")
        return File(path=path, b64=content)
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, indent=2)
    return File(path=path, text=content)


def _task_id(value: Any, default: str, where: str, field: str) -> str:
    """A task id as given (text, or a whole number written as text), else `default` when there is none;
    an object, a list or a boolean is refused rather than turned into text ("{'a': 1}")."""
    if value is None or value == "":
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TaskFormatError(where, f"must be text, not {type(value).__name__} {str(value)[:60]!r}", field=field,
                          task_id=default)


def load_jsonl_record(raw: Any, where: str, default_id: str) -> Task:
    """One line of a syn_task.jsonl."""
    if not isinstance(raw, dict):
        raise TaskFormatError(where, f"must be a JSON object, not {type(raw).__name__}", task_id=default_id)
    key = "task_id" if raw.get("task_id") is not None else "id"
    task_id = _task_id(raw.get(key), default_id, where, key)
    prompt = raw.get("prompt", raw.get("user_query"))
    if not isinstance(prompt, str) or not prompt.strip():
        raise TaskFormatError(where, "is required but missing: the instruction given to the agent",
                              field="prompt", task_id=task_id)
    limits = ReadLimits.from_env()
    check_instruction(prompt, where, "prompt", task_id, limits)
    try:
        mount = mount_dir_of(raw.get("input_mount_dir") or MOUNT_DIR)
    except ValueError as e:
        raise TaskFormatError(where, str(e), field="input_mount_dir", task_id=task_id) from None
    inputs = raw.get("input_files") or []
    if not isinstance(inputs, list):
        raise TaskFormatError(where, "must be a list of {file_path, content}", field="input_files", task_id=task_id)
    if len(inputs) > limits.files:
        raise TaskFormatError(where, f"{len(inputs):,} files, over the {limits.files:,} limit; set "
                              "CLAWSDK_MAX_TASK_FILES to allow more", field="input_files", task_id=task_id)
    try:
        workspace = [_jsonl_file(f, i, mount) for i, f in enumerate(inputs)]
    except (ValueError, ValidationError) as e:
        msg = validation_message_of(e)
        raise TaskFormatError(where, msg, field="input_files", task_id=task_id) from None
    hook = raw.get("hook_code")
    hidden: list[File] = []
    if hook is not None:
        if not isinstance(hook, str) or not hook.strip():
            raise TaskFormatError(where, "must be the check.py source text", field="hook_code", task_id=task_id)
        error = compile_error(hook.encode("utf-8", "surrogatepass"))
        if error:
            raise TaskFormatError(where, f"does not compile: {error}", field="hook_code", task_id=task_id)
        if "__main__" not in hook and re.search(r"^def grade\(", hook, re.M):
            hook = hook.rstrip("\n") + "\n" + _GRADE_MAIN
        reward_sh = raw.get("reward_sh") or REWARD_SH
        hidden = [File(path=f"{REWARD_DIR}/check.py", text=hook),
                  File(path=f"{REWARD_DIR}/reward.sh", text=reward_sh, executable=True)]
    try:
        rules, rubric = rules_of(raw.get("rules", raw.get("rule")))
        verifier = build_verifier(grading_type=raw.get("grading_type"), has_reward=bool(hidden), rules=rules,
                                  rubric=rubric, mount_dir=mount, timeout_s=DEFAULT_TIMEOUT_S)
    except ValueError as e:
        field = "rules" if "must be a rule" in str(e) else ("hook_code" if "reward.sh" in str(e) else "grading_type")
        if field == "hook_code":
            e = ValueError("is missing: the task has no verifier code (and no rubric to judge by)")
        raise TaskFormatError(where, str(e), field=field, task_id=task_id) from None
    category = raw.get("macro_category") or raw.get("category")
    keep = {k: v for k, v in raw.items() if k not in ("prompt", "hook_code", "input_files", "clawsdk", "reward_sh")}
    data: dict[str, Any] = {
        "id": task_id,
        "instruction": prompt,
        "category": _clean_category(category),
        "tags": [t for t in (_clean_category(raw.get("category")),) if t and t != _clean_category(category)],
        "workspace": workspace,
        "hidden": hidden,
        "verifier": verifier,
        "limits": _limits(DEFAULT_TIMEOUT_S, verifier),
        "metadata": {"clawgym_jsonl": keep},
        "provenance": {"source": "clawgym-jsonl", "path": where,
                       **({"origin_template": raw["origin_template"]} if raw.get("origin_template") else {})},
    }
    _apply_clawsdk_extras(data, raw.get("clawsdk"), where, task_id)
    fill_missing_category(data)
    return validated_task(data, where, task_id)


def validation_message_of(e: Exception) -> str:
    if isinstance(e, ValidationError):
        from clawsdk.tasks.native import validation_message

        return validation_message(e)[1]
    return str(e)


def find_task_folders(root: Path) -> list[Path]:
    return native.find_task_folders(root, ENTRY_FILE)


# ---- the reward verifier ------------------------------------------------------------------


class ClawGymSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = "clawgym"
    script: str = f"{REWARD_DIR}/reward.sh"
    check: str | None = f"{REWARD_DIR}/check.py"
    mount_dir: str = MOUNT_DIR
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0)
    subscores: bool = True
    pass_threshold: float = Field(1.0, ge=0, le=1)
    untouched_score_max: float | None = Field(None, ge=0, le=1)
    checks: list = Field(default_factory=list)

    @field_validator("mount_dir", mode="before")
    @classmethod
    def _clean_mount_dir(cls, value: Any) -> str:
        return mount_dir_of(value)


def parse_score(stdout: str) -> tuple[float | None, str]:
    """(score, why) from reward.sh's stdout: its last line must be a float in [0, 1]."""
    lines = [ln.strip() for ln in stdout.strip().splitlines() if ln.strip()]
    if not lines:
        return None, "reward.sh printed nothing on stdout"
    last = lines[-1]
    value = read_score(last)
    if value is None:
        return None, f"the last line of reward.sh's output is not a number: {last[:200]!r}"
    if not 0.0 <= value <= 1.0:
        return None, f"reward.sh printed {value!r}, outside [0, 1]"
    return value, f"reward.sh printed {last}"


def subscores_of(stdout: str) -> tuple[list[SubScore], str]:
    """check.py's JSON dict as sub-scores (booleans count as 0/1); a note when it cannot be read."""
    text = stdout.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        start = text.find("{")
        try:
            data = json.loads(text[start:]) if start >= 0 else None
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, dict):
        return [], f"check.py did not print a JSON object ({text[-200:]!r})"
    subs, notes = [], []
    for key, value in data.items():
        try:
            score = float(value)
        except (TypeError, ValueError):
            notes.append(f"{key}={value!r} is not a number")
            continue
        if math.isnan(score) or not 0 <= score <= 1:
            notes.append(f"{key}={score} clipped to [0, 1]")
            score = 0.0 if math.isnan(score) else min(max(score, 0.0), 1.0)
        subs.append(SubScore(name=str(key)[:200], score=score, detail=f"check.py: {value!r}"[:200]))
    return subs, "; ".join(notes)


def _rewrite(data: bytes, mount: str, workspace: str) -> bytes:
    if mount == workspace or not mount.strip("/"):  # "/" (or nothing) would land between every two characters
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    # the mount path itself or followed by '/', never a longer name that starts with it
    pattern = re.escape(mount) + r"(?![\w.\-])"
    return re.sub(pattern, lambda _m: workspace, text).encode("utf-8")


class ClawGymVerifier(Verifier):
    """Runs reward/reward.sh in the sandbox; the score is its last stdout line."""

    name = "clawgym"

    def __init__(self, spec: VerifierSpec):
        self.spec = spec_as(ClawGymSpec, spec)
        self.reward_dir = self.spec.script.rsplit("/", 1)[0] if "/" in self.spec.script else ""

    def check_task(self, task: Task) -> None:
        """ValueError when the task does not hold the script this verifier runs: every rollout of it would be
        a verifier_error (a native task with `verifier: {type: clawgym}` and no hidden/reward/)."""
        if not any(f.path == self.spec.script for f in task.hidden):
            raise ValueError(f"verifier.script: {self.spec.script!r} is not among the task's hidden files; the "
                             f"clawgym verifier runs it (in a native task: hidden/{self.spec.script})")
        for f in task.hidden:  # check.py and any module beside it: python3 runs them at scoring time
            if f.path.endswith(".py") and (f.path == self.spec.check or f.path.startswith(self.reward_dir + "/")):
                error = compile_error(f.data)
                if error:
                    field = "verifier.check" if f.path == self.spec.check else "verifier.script"
                    raise ValueError(f"{field}: {f.path!r} does not compile: {error}; every rollout would "
                                     f"score 0")

    async def verify(self, ctx: VerifyContext) -> Verdict:
        spec, sandbox = self.spec, ctx.sandbox
        prefix = self.reward_dir + "/" if self.reward_dir else ""
        files = [f for f in ctx.task.hidden if f.path.startswith(prefix)]
        if not any(f.path == spec.script for f in files):
            raise VerifierError(f"task {ctx.task.id}: {spec.script} is not among its hidden files")
        ws = sandbox.workspace_path.rstrip("/")
        mount = spec.mount_dir.rstrip("/")
        written: list[str] = []
        started = time.perf_counter()
        try:
            planted, blocked = await self._place(sandbox, files, mount, ws, written)
            if blocked:
                # the agent's own entries (or processes still changing them) stood in the way: its failure
                reason = f"scored 0: the agent's files at {self.reward_dir or spec.script} kept the reward scripts " \
                         f"out ({blocked})"
                await ctx.recorder.record(VerifierScore(check=spec.script, score=0.0, detail=reason))
                return Verdict(verifier=self.name, score=0.0, passed=False, detail=reason[:4000])
            result = await self._reward(ctx, ws, f"bash {spec.script}")
            if result.timed_out and not await self._reward_untouched(ctx, files, mount):
                # slowed by what the agent left (a 200,000-digit report under check.py's regex): its failure
                score, why = None, f"{spec.script} did not finish within {spec.timeout_s:g} s on the agent's " \
                                   f"files (on the task's untouched files it did)"
            elif result.timed_out:
                raise VerifierTimeout(f"{spec.script} did not finish within {spec.timeout_s:g} s, on the task's "
                                      f"untouched files too (task {ctx.task.id}); set verifier.timeout_s to allow "
                                      f"longer")
            elif result.exit_code != 0:
                err = (result.stderr.strip().splitlines() or [""])[-1][:300]
                score, why = None, f"reward.sh exited with code {result.exit_code}" + (f": {err}" if err else "")
            else:
                score, why = parse_score(result.stdout)
            subs: list[SubScore] = []
            note = ""
            check_file = spec.check if spec.check and any(f.path == spec.check for f in files) else None
            # sub-scores explain a score; when reward.sh gave none they would only contradict the 0
            if spec.subscores and check_file and score is not None:
                left = max(spec.timeout_s - (time.perf_counter() - started), 5.0)
                sub = await sandbox.exec(["python3", check_file, ws], timeout=left)
                if sub.timed_out:
                    note = f"check.py timed out after {left:.0f} s; no sub-scores"
                else:
                    subs, note = subscores_of(sub.stdout)
        finally:
            if written:
                await self._remove(sandbox, written)
        final = 0.0 if score is None else score
        reason = why if score is not None else f"scored 0: {why}"
        if planted:
            reason += f"; the agent's {planted}"
        await ctx.recorder.record(VerifierScore(check=spec.script, score=final, detail=reason))
        detail = reason + (f"; {note}" if note else "")
        return Verdict(verifier=self.name, score=final, passed=final >= spec.pass_threshold - 1e-9,
                       subscores=subs, detail=detail[:4000])

    async def _reward(self, ctx: VerifyContext, ws: str, what: str) -> Any:
        """reward.sh, as placed under `ws`, run and recorded."""
        # run from the verifier's own read-only folder, not the workspace: reward.sh pipes into
        # `python3 -c`, which imports from its working folder first, so a json.py the agent left
        # there scored 1.0 on every task (the scripts name their files by absolute path)
        result = await ctx.sandbox.exec(["bash", "-c", 'cd -- "$1" && exec bash -- "$2"', "reward.sh",
                                         ctx.hidden_path or "/", f"{ws}/{self.spec.script}"],
                                        timeout=self.spec.timeout_s)
        await ctx.recorder.record(SandboxExec.of(what, result))
        return result

    async def _reward_untouched(self, ctx: VerifyContext, files: list[File], mount: str) -> bool:
        """Whether reward.sh also runs past its time on the task as it stood before the agent: its initial
        files and the reward scripts, copied beside the hidden files (no folder above them is the agent's),
        standing in for the workspace. False when the copy cannot be written: the agent filled its disk."""
        where = await untouched_copy(ctx, ctx.task.workspace, lambda ws: [
            File(path=f.path, b64=base64.b64encode(_rewrite(f.data, mount, ws)).decode(), executable=f.executable)
            for f in files])
        if where is None:
            return False
        return (await self._reward(ctx, where, f"bash {self.spec.script} (the untouched task)")).timed_out

    async def _place(self, sandbox: Any, files: list[File], mount: str, ws: str,
                     written: list[str]) -> tuple[str, str]:
        """Write the reward files where the scripts expect them: (what was moved aside, why it failed)."""
        tops = [self.reward_dir.split("/")[0]] if self.reward_dir else [f.path for f in files]
        moved = []
        for top in tops:
            aside = await sandbox.move_aside(top)
            if aside:
                moved.append(f"{top} was moved aside to {aside}")
        try:
            for f in files:
                # where the authors' harness puts reward/: inside the workspace
                await sandbox.write(f.path, _rewrite(f.data, mount, ws), executable=f.executable)
                written.append(f.path)
        except (ValueError, OSError) as e:  # PathEscapeError is a ValueError: a link swapped back in
            return "; ".join(moved), f"{type(e).__name__}: {e}"
        return "; ".join(moved), ""

    async def _remove(self, sandbox: Any, paths: list[str]) -> None:
        """Take reward/ out of the workspace again (a judge or a later reader must not see it)."""
        folders = sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p}, key=len, reverse=True)
        cmd = "rm -f -- " + " ".join(shlex.quote(p) for p in paths)
        if folders:
            cmd += "; rmdir -- " + " ".join(shlex.quote(d) for d in folders) + " 2>/dev/null; true"
        try:
            await sandbox.exec(cmd, timeout=30)
        except Exception:  # the sandbox is closed right after; scoring is done
            pass


def clawgym_verifier(spec: VerifierSpec) -> ClawGymVerifier:
    return ClawGymVerifier(spec)


@hookimpl
def register_verifiers(register):
    register("clawgym", clawgym_verifier)
